package sidecar

import (
	"net/http"
	"strconv"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/natstest"
)

// BenchmarkCheckDecisionLog measures Envoy's Check over loopback gRPC
// with the decision log shipping to NATS JetStream, against the same
// sidecar without it and the no-op ext_authz server, alternating the
// three in every round (the load shape of BenchmarkLoopbackCheck).
//
// Reported: throughput-vs-noop and throughput-vs-plain (calls per second
// with the decision log over the no-op server's and over the sidecar's
// without it).
func BenchmarkCheckDecisionLog(b *testing.B) {
	idp := newTestIdP(b)
	noopAddr := startNoopAuthz(b)
	nats := natstest.Start(b)
	tokens := mintTokens(b, idp, benchDistinct)
	reqs := make([]*authv3.CheckRequest, benchDistinct)
	for i := range reqs {
		reqs[i] = checkRequest(tokens[i], http.MethodGet, "/orders/"+strconv.Itoa(i))
	}
	logged := startBenchSidecarWith(b, idp, func(cfg *config.Config) {
		cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogNATS, URL: nats.URL(), SpoolDir: b.TempDir()}
	})
	plain := startBenchSidecar(b, idp)
	targets := []*loadTarget{
		{name: "decision-log", clients: authzClients(b, logged.GRPCAddr())},
		{name: "plain", clients: authzClients(b, plain.GRPCAddr())},
		{name: "noop", clients: authzClients(b, noopAddr)},
	}
	driveAlternating(b, reqs, targets, func() {})
}
