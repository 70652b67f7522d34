package engine_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// TestPolicyDirNetworkBuiltins: a policy.dir whose policy calls http.send
// does not load unless policy.allow_network_builtins is true; the error
// names the built-in, the setting and the directory's key.
func TestPolicyDirNetworkBuiltins(t *testing.T) {
	dir := t.TempDir()
	src := "package svc.authz\n\nallow if http.send({\"method\": \"GET\", \"url\": concat(\"\", [\"http://127.0.0.1:1/?t=\", input.user.id])}).status_code == 200\n"
	testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(src))
	var cfg config.Config
	cfg.Policy.Dir = dir
	cfg.SetDefaults()
	_, err := engine.New(cfg, engine.Deps{})
	if err == nil {
		t.Fatal("a policy calling http.send loaded with network built-ins off")
	}
	if policy.ReasonOf(err) != reason.PolicyBuiltinForbidden || !strings.Contains(err.Error(), "policy.dir") ||
		!strings.Contains(err.Error(), "http.send") || !strings.Contains(err.Error(), "policy.allow_network_builtins") {
		t.Errorf("error %v (%s), want policy-builtin-forbidden naming policy.dir, http.send and the setting", err, policy.ReasonOf(err))
	}
	var perr *policy.Error
	if !errors.As(err, &perr) {
		t.Errorf("error %T does not wrap *policy.Error", err)
	}

	cfg.Policy.AllowNetworkBuiltins = true
	e, err := engine.New(cfg, engine.Deps{})
	if err != nil {
		t.Fatalf("with policy.allow_network_builtins: %v", err)
	}
	_ = e.Close()
}
