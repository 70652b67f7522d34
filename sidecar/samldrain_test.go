package sidecar

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestDrainSAMLInFlight: an ACS POST in flight on the SAML listener when
// the shutdown begins is answered, and Serve returns only after it; the
// drain does not leave it to be cut when the process exits.
func TestDrainSAMLInFlight(t *testing.T) {
	cfg, _ := samlConfig(t)
	cfg.Sidecar.DrainTimeout = config.Duration{Duration: 2 * waitTimeout}
	r := startSidecar(t, cfg)

	body := url.Values{"SAMLResponse": {"bm90IGEgU0FNTCByZXNwb25zZQ=="}, "RelayState": {"/"}}.Encode()
	half := len(body) / 2
	c, err := net.DialTimeout("tcp", r.SAMLAddr().String(), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /auth/saml/acs HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:half])
	testkit.Eventually(t, "the ACS request is in flight", func() bool { return r.inflight.Load() == 1 })

	r.cancel()
	testkit.Eventually(t, "readiness reports draining", func() bool { return !r.isReady() })
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		t.Fatalf("Serve returned (%v) while an ACS request was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := io.WriteString(c, body[half:]); err != nil {
		t.Fatalf("send the rest of the body: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * waitTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("in-flight ACS request cut during the drain: %v", err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("in-flight ACS answer cut during the drain: %v", err)
	}
	resp.Body.Close()
	// Not a valid assertion: a refusal, but a whole answer from the gateway.
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("ACS answer = %d, want the gateway's 4xx refusal", resp.StatusCode)
	}
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(2 * waitTimeout):
		t.Fatal("Serve did not return after the ACS request completed")
	}
}
