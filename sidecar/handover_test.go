package sidecar

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/sidecar/listeners"
)

// TestHandoverCoversEveryListener opens a sidecar with the SAML gateway
// on a listeners.Set, hands its sockets over as a restart does, and
// builds the next server from the handover: every listener (gRPC, HTTP,
// SAML) is taken over on the same address.
func TestHandoverCoversEveryListener(t *testing.T) {
	cfg, _ := samlConfig(t)

	first, _ := listeners.New("")
	s1, err := New(Deps{Engine: newTestEngine(t, cfg), Logger: quietLogger(), Listen: first.Listen})
	if err != nil {
		t.Fatal(err)
	}
	files, env, err := first.Handover()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ListenerGRPC, ListenerHTTP, ListenerSAML} {
		if !strings.Contains(env, name+"=") {
			t.Errorf("handover %q lacks the %s listener", env, name)
		}
	}
	addrs := []string{s1.GRPCAddr().String(), s1.HTTPAddr().String(), s1.SAMLAddr().String()}
	s1.closeListeners()

	next, err := listeners.New(env)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(Deps{Engine: newTestEngine(t, cfg), Logger: quietLogger(), Listen: next.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.closeListeners()
	next.Close()
	for _, f := range files {
		f.Close()
	}
	got := []string{s2.GRPCAddr().String(), s2.HTTPAddr().String(), s2.SAMLAddr().String()}
	if !next.TookOver() || strings.Join(got, " ") != strings.Join(addrs, " ") {
		t.Errorf("next server on %v (took over %v), want %v", got, next.TookOver(), addrs)
	}
}
