package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
)

// TestSidecarStatusNotReady runs a sidecar whose identity provider never
// answered: `core sidecar status` says unavailable with the reason, as
// /readyz does, instead of healthy.
func TestSidecarStatusNotReady(t *testing.T) {
	cfg := devConfig()
	cfg.SDK.FailMode = config.FailClosed
	cfg.SDK.JWKSURL = closedURL(t) + "/jwks.json"
	url := startSidecarWith(t, cfg)

	// Until Serve has begun the reason is "starting".
	want := regexp.MustCompile(`(?m)^Status:\s+unavailable \(jwks-unavailable\)$`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := run(t, "", "--sidecar", url, "sidecar", "status")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if want.MatchString(r.stdout) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of a sidecar that cannot verify tokens:\n%s", r.stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
