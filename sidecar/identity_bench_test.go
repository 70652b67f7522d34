package sidecar

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

// BenchmarkCheckIdentityToken measures Envoy's Check over loopback gRPC
// with identity tokens on against the no-op ext_authz server, and against
// the same sidecar without them, alternating the three in every round
// (the load shape of BenchmarkLoopbackCheck: 1000 users' tokens over
// 1000 paths). Every allowed answer carries x-svc-identity, minted once
// per user and half-lifetime, reused in between.
//
// Reported: throughput-vs-noop (calls per second with identity tokens
// over the no-op server's; the bar is at least 0.8) and
// throughput-vs-plain (over the sidecar without identity tokens).
func BenchmarkCheckIdentityToken(b *testing.B) {
	idp := newTestIdP(b)
	noopAddr := startNoopAuthz(b)
	tokens := mintTokens(b, idp, benchDistinct)
	reqs := make([]*authv3.CheckRequest, benchDistinct)
	for i := range reqs {
		reqs[i] = checkRequest(tokens[i], http.MethodGet, "/orders/"+strconv.Itoa(i))
	}
	withID := startBenchSidecarWith(b, idp, func(cfg *config.Config) {
		cfg.IdentityToken.SigningKeyFile = testkit.TokenKeyFile(b)
		cfg.IdentityToken.TTL.Duration = 5 * time.Minute
	})
	plain := startBenchSidecar(b, idp)
	targets := []*loadTarget{
		{name: "identity", clients: authzClients(b, withID.GRPCAddr())},
		{name: "plain", clients: authzClients(b, plain.GRPCAddr())},
		{name: "noop", clients: authzClients(b, noopAddr)},
	}
	driveAlternating(b, reqs, targets, func() {
		resp, err := targets[0].clients[0].Check(b.Context(), reqs[0])
		if err != nil || !hasIdentity(resp) {
			b.Fatalf("no x-svc-identity on an allowed Check: %v %v", resp, err)
		}
	})
	if st := withID.identity.Status(); st.Minted > int64(benchDistinct) {
		b.Errorf("%d identity tokens minted for %d users within one lifetime", st.Minted, benchDistinct)
	}
}

// driveAlternating warms targets up (every token verified once, as a
// running sidecar has), runs check, then drives b.N calls of each target
// in benchRounds rounds that alternate their order, and reports the
// first target's ns/op, throughput-vs-noop (over the third's) and
// throughput-vs-plain (over the second's).
func driveAlternating(b *testing.B, reqs []*authv3.CheckRequest, targets []*loadTarget, check func()) {
	for _, tg := range targets {
		tg.drive(b, reqs, 0, len(reqs))
		tg.latencies, tg.wall = nil, 0
	}
	check()
	b.ResetTimer()
	for r := range benchRounds {
		n := b.N*(r+1)/benchRounds - b.N*r/benchRounds
		for i := range targets {
			tg := targets[(i+r)%len(targets)]
			tg.drive(b, reqs, len(tg.latencies), n)
		}
	}
	b.StopTimer()
	first, plain, noop := targets[0].wall.Seconds(), targets[1].wall.Seconds(), targets[2].wall.Seconds()
	b.ReportMetric(float64(targets[0].wall.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(noop/first, "throughput-vs-noop")
	b.ReportMetric(plain/first, "throughput-vs-plain")
}

func hasIdentity(resp *authv3.CheckResponse) bool {
	for _, h := range resp.GetOkResponse().GetHeaders() {
		if h.GetHeader().GetKey() == "x-svc-identity" && h.GetHeader().GetValue() != "" {
			return true
		}
	}
	return false
}
