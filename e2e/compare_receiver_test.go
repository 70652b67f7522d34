package e2e

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"
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
	var recs []struct {
		DecisionID string `json:"decision_id"`
	}
	if err := json.NewDecoder(zr).Decode(&recs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rec := range recs {
		if rec.DecisionID == "" {
			http.Error(w, "a record without decision_id", http.StatusBadRequest)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
