package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/svc-dev/svc/internal/jsonscan"
)

// decisionReceiverAddrEnv makes the e2e test binary serve a decision-log
// service in OPA's upload shape on the address it names instead of
// running tests (see TestMain): BenchmarkCompareNoop's HTTP sink, in a
// process of its own so that its CPU is counted apart.
const decisionReceiverAddrEnv = "SVC_E2E_DECISION_RECEIVER_ADDR"

// serveDecisionReceiver takes uploads on addr until SIGTERM or SIGINT as
// a control plane does: POST <url>/logs, a gzipped JSON array of
// records, each read for its decision id; an upload that is not one, or a record without
// a decision id, is refused with 400 (which the sidecar retries, and the
// benchmark then sees as records never shipped).
func serveDecisionReceiver(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(receiveDecisions), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func receiveDecisions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "want a gzipped POST /logs", http.StatusBadRequest)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := decisionIDs(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// decisionIDs counts the records of an upload, a JSON array of objects,
// each with a non-empty "decision_id" string. It finds its way with
// jsonscan rather than decoding: the service shares the benchmark's
// cores, and a control plane's parsing is its own cost, not the
// sidecar's.
func decisionIDs(b []byte) (int, error) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return 0, errors.New("not a JSON array")
	}
	n := 0
	for i = jsonscan.SkipSpace(b, i+1); i < len(b) && b[i] != ']'; n++ {
		if n > 0 {
			if b[i] != ',' {
				return n, fmt.Errorf("record %d: want , or ]", n)
			}
			i = jsonscan.SkipSpace(b, i+1)
		}
		end, ok := jsonscan.SkipValue(b, i)
		if !ok || b[i] != '{' {
			return n, fmt.Errorf("record %d: not a JSON object", n)
		}
		if !hasDecisionID(b[i:end]) {
			return n, fmt.Errorf("record %d: no decision_id", n)
		}
		i = jsonscan.SkipSpace(b, end)
	}
	if i >= len(b) || jsonscan.SkipSpace(b, i+1) != len(b) {
		return n, errors.New("the array does not end")
	}
	return n, nil
}

// hasDecisionID says whether the JSON object obj has a member
// "decision_id" that is a non-empty string.
func hasDecisionID(obj []byte) bool {
	for i := jsonscan.SkipSpace(obj, 1); i < len(obj) && obj[i] != '}'; {
		if obj[i] == ',' {
			i = jsonscan.SkipSpace(obj, i+1)
		}
		kend, ok := jsonscan.SkipValue(obj, i)
		if !ok {
			return false
		}
		key := obj[i:kend]
		i = jsonscan.SkipSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(obj, i+1)
		vend, ok := jsonscan.SkipValue(obj, i)
		if !ok {
			return false
		}
		if match, _ := jsonscan.KeyIs(key, "decision_id"); match {
			return obj[i] == '"' && vend-i > 2
		}
		i = jsonscan.SkipSpace(obj, vend)
	}
	return false
}

// TestDecisionReceiverReadsIDs: the benchmark's service takes an upload
// only when every record has a decision id, so that records counted as
// shipped are records that arrived whole.
func TestDecisionReceiverReadsIDs(t *testing.T) {
	for body, want := range map[string]int{
		`[]`: 0,
		` [ {"decision_id":"d1","input":{"decision_id":""}} , {"a":[1,{"b":"}"}],"decision_id":"d2"} ] `: 2,
		`[{"decision_\u0069d":"d1"}]`: 1,
	} {
		if n, err := decisionIDs([]byte(body)); err != nil || n != want {
			t.Errorf("%s: %d records, %v; want %d", body, n, err, want)
		}
	}
	for _, body := range []string{
		``, `{}`, `[`, `[{"decision_id":"d1"}`, `[{"decision_id":""}]`, `[{"decision_id":1}]`,
		`[{"input":{"decision_id":"d1"}}]`, `[{"decision_id":"d1"} {"decision_id":"d2"}]`, `[{"decision_id":"d1"}] x`, `["d1"]`,
	} {
		if n, err := decisionIDs([]byte(body)); err == nil {
			t.Errorf("%q: taken as %d records, want an error", body, n)
		}
	}
}
