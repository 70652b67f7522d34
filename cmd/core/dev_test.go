package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/devissuer"
	"github.com/svc-dev/svc/engine/token"
)

// TestDevToken: core dev token prints a token the development issuer's
// key verifies, with the defaults of development mode's tenant and the
// flags given; core dev jwks prints that key; bad flags exit 2.
func TestDevToken(t *testing.T) {
	dir := t.TempDir()
	r := run(t, "", "dev", "token", "--dir", dir, "--role", "viewer", "--role", "billing", "--output", "json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep devTokenReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.Issuer != "svc-dev" || rep.Subject != "dev-user" || rep.Tenant != "dev" || strings.Join(rep.Roles, ",") != "viewer,billing" ||
		rep.Dir != dir || time.Until(rep.ExpiresAt) < 59*time.Minute || time.Until(rep.ExpiresAt) > time.Hour {
		t.Errorf("report %+v", rep)
	}
	d, created, err := devissuer.Open(dir)
	if err != nil || created {
		t.Fatalf("the key pair is not in --dir: %v, created %v", err, created)
	}
	v, err := token.New(token.Options{Keys: d, Issuer: devissuer.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := v.Verify(context.Background(), rep.Token)
	if err != nil || claims["tenant_id"] != "dev" || claims["sub"] != "dev-user" {
		t.Fatalf("the printed token does not verify with the key in --dir: %v %v", err, claims)
	}

	r = run(t, "", "dev", "token", "--dir", dir, "--role", "admin", "--tenant", "acme", "--subject", "alice", "--ttl", "5m")
	if r.code != 0 || strings.Count(strings.TrimSpace(r.stdout), ".") != 2 {
		t.Fatalf("text output: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	claims, err = v.Verify(context.Background(), strings.TrimSpace(r.stdout))
	if err != nil || claims["tenant_id"] != "acme" || claims["sub"] != "alice" {
		t.Errorf("flags: %v %v", err, claims)
	}

	r = run(t, "", "dev", "jwks", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, `"kid":"`+d.KeyID()+`"`) {
		t.Errorf("dev jwks: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	for _, bad := range [][]string{
		{"dev", "token", "--dir", dir, "--ttl", "0s"},
		{"dev", "token", "--dir", dir, "--ttl", "1000h"},
		{"dev", "token", "--dir", dir, "--tenant", ""},
		{"dev", "token", "--dir", dir, "extra"},
		{"dev", "jwks", "--dir", dir, "--listen", "0.0.0.0:8000"},
	} {
		if r := run(t, "", bad...); r.code != exitUsage || r.stderr == "" {
			t.Errorf("%v: exit %d, want %d with a message\n%s", bad, r.code, exitUsage, r.stderr)
		}
	}
}

// TestDevIssuerDirPrecedence: core dev token finds the key pair in --dir,
// else in SVC_DEV_ISSUER_DIR (the sidecar reads the same variable), else
// in ~/.config/svc/dev-issuer.
func TestDevIssuerDirPrecedence(t *testing.T) {
	home, fromEnv, fromFlag := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	dirOf := func(args ...string) string {
		t.Helper()
		r := run(t, "", append([]string{"dev", "token", "--output", "json"}, args...)...)
		var rep devTokenReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 0 || err != nil {
			t.Fatalf("exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return rep.Dir
	}
	if got, want := dirOf(), filepath.Join(home, ".config", "svc", "dev-issuer"); got != want {
		t.Errorf("default: key pair in %s, want %s", got, want)
	}
	t.Setenv(devissuer.EnvDir, fromEnv)
	if got := dirOf(); got != fromEnv {
		t.Errorf("%s set: key pair in %s, want %s", devissuer.EnvDir, got, fromEnv)
	}
	if got := dirOf("--dir", fromFlag); got != fromFlag {
		t.Errorf("--dir and %s set: key pair in %s, want --dir %s", devissuer.EnvDir, got, fromFlag)
	}
	for _, dir := range []string{fromEnv, fromFlag} {
		if _, created, err := devissuer.Open(dir); err != nil || created {
			t.Errorf("no key pair made in %s: %v", dir, err)
		}
	}
}
