package main

import (
	"context"
	"encoding/json"
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
