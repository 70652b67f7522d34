package testkit

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPoll: Poll returns once the condition holds, and otherwise fails
// after its deadline naming what was awaited and the last state seen.
func TestPoll(t *testing.T) {
	t.Run("holds on the third call", func(t *testing.T) {
		calls := 0
		var o outcome
		o.run(func(tb testing.TB) {
			Poll(tb, time.Minute, "the third call", func() (bool, string) {
				calls++
				return calls == 3, "call " + strconv.Itoa(calls)
			})
		})
		if o.failed || calls != 3 {
			t.Errorf("failed %v (%s) after %d calls, want success on the third", o.failed, o.msg, calls)
		}
	})
	t.Run("never holds", func(t *testing.T) {
		calls := 0
		var o outcome
		o.run(func(tb testing.TB) {
			Poll(tb, 20*time.Millisecond, "a miracle", func() (bool, string) {
				calls++
				return false, "call " + strconv.Itoa(calls)
			})
		})
		want := "waiting for a miracle; last seen: call " + strconv.Itoa(calls)
		if !o.failed || !strings.HasSuffix(o.msg, want) {
			t.Errorf("failed %v with %q, want a failure ending %q", o.failed, o.msg, want)
		}
	})
	t.Run("nothing seen", func(t *testing.T) {
		var o outcome
		o.run(func(tb testing.TB) {
			EventuallyWithin(tb, 5*time.Millisecond, "a miracle", func() bool { return false })
		})
		if want := "timed out after 5ms waiting for a miracle"; !o.failed || o.msg != want {
			t.Errorf("failed %v with %q, want %q", o.failed, o.msg, want)
		}
	})
}

// TestAwait: Await reports, without failing anyone, whether the condition
// held within the deadline and the state it last saw.
func TestAwait(t *testing.T) {
	calls := 0
	seen, ok := Await(time.Minute, func() (bool, string) {
		calls++
		return calls == 3, "call " + strconv.Itoa(calls)
	})
	if !ok || seen != "call 3" || calls != 3 {
		t.Errorf("Await = %q, %v after %d calls; want \"call 3\", true after 3", seen, ok, calls)
	}
	start := time.Now()
	seen, ok = Await(20*time.Millisecond, func() (bool, string) { return false, "still no" })
	if ok || seen != "still no" || time.Since(start) < 20*time.Millisecond {
		t.Errorf("Await = %q, %v after %v; want \"still no\", false after the deadline", seen, ok, time.Since(start))
	}
}
