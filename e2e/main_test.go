package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(noopAddrEnv); addr != "" {
		// BenchmarkCompareNoop's no-op server, in a process of its own.
		if err := serveNoop(addr); err != nil {
			fmt.Fprintln(os.Stderr, "no-op ext_authz server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if addr := os.Getenv(noopHTTPAddrEnv); addr != "" {
		// BenchmarkCompareHTTPNoop's no-op HTTP server.
		if err := serveNoopHTTP(addr); err != nil {
			fmt.Fprintln(os.Stderr, "no-op HTTP server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if addr := os.Getenv(decisionReceiverAddrEnv); addr != "" {
		// BenchmarkCompareNoop's decision-log service (HTTP sink).
		if err := serveDecisionReceiver(addr); err != nil {
			fmt.Fprintln(os.Stderr, "decision-log service:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	harness.Cleanup()
	removeSDKDist()
	os.Exit(code)
}
