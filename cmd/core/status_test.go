package main

import (
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/sidecar"
)

// TestSidecarStatusNotReady runs a sidecar whose identity provider never
// answered: `core sidecar status` says unavailable with the reason, as
// /readyz does, instead of healthy.
func TestSidecarStatusNotReady(t *testing.T) {
	var cfg config.Config
	cfg.SDK.SidecarAddr, cfg.Sidecar.HTTPAddr, cfg.SDK.TenantID = "127.0.0.1:0", "127.0.0.1:0", "acme"
	cfg.SDK.FailMode = config.FailClosed
	cfg.SDK.JWKSURL = closedURL(t) + "/jwks.json"
	cfg.Audit.Destination = config.AuditOff
	quiet := slog.New(slog.DiscardHandler)
	eng, err := engine.New(cfg, engine.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	srv, err := sidecar.New(sidecar.Deps{Engine: eng, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	url := "http://" + srv.HTTPAddr().String()

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
