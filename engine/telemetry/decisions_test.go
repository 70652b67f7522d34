package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/audit"
)

func TestDecisionFeedCountsDropsPerSubscriber(t *testing.T) {
	df := NewDecisionFeed(8)
	if df.Watched() {
		t.Fatal("Watched() with no subscriber")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := df.Watch(ctx, nil, time.Time{})
	fast := df.Watch(ctx, func(r audit.Record) bool { return r.Tenant == "acme" }, time.Time{})
	if !df.Watched() {
		t.Fatal("Watched() false with two subscribers")
	}
	n := SubscriberBuffer + 10
	for i := range n {
		tenant := "globex"
		if i == 0 {
			tenant = "acme"
		}
		df.Publish(audit.Record{Tenant: tenant, Time: time.Now()})
	}
	if got := slow.Dropped(); got != 10 {
		t.Errorf("slow subscriber dropped %d, want 10", got)
	}
	if got := fast.Dropped(); got != 0 {
		t.Errorf("filtered subscriber dropped %d, want 0", got)
	}
	if r := <-fast.C; r.Tenant != "acme" {
		t.Errorf("filtered subscriber got %+v", r)
	}
	if st := df.Stats(); st.Dropped != 10 || st.Published != uint64(n) || st.Subscribers != 2 {
		t.Errorf("Stats() = %+v", st)
	}
	cancel()
	for range slow.C {
	}
	for range fast.C {
	}
	if df.Watched() {
		t.Error("Watched() after the subscriptions ended")
	}
}
