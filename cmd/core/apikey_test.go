package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/reason"
)

func TestAPIKeyCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys.toml")
	r := run(t, dir, "api-key", "create", "--file", file, "--tenant", "acme", "--subject", "ci", "--role", "admin", "--role", "deployer", "--expires", "720h")
	if r.code != 0 {
		t.Fatalf("create: exit %d\n%s", r.code, r.stderr)
	}
	key := strings.TrimSpace(r.stdout)
	id, ok := apikey.Split(key)
	if !ok || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("create printed %q, want the key alone", r.stdout)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v, %v; want mode 0600", fi, err)
	}
	r = run(t, dir, "--output", "json", "api-key", "create", "--file", file, "--tenant", "acme", "--subject", "cron", "--role", "viewer")
	var created struct{ ID, Key string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil || !strings.HasPrefix(created.Key, apikey.Prefix+created.ID+"_") {
		t.Fatalf("create --output json: exit %d, %q", r.code, r.stdout)
	}

	r = run(t, dir, "api-key", "list", "--file", file)
	if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "admin,deployer") || !strings.Contains(r.stdout, created.ID) {
		t.Fatalf("list: exit %d\n%s", r.code, r.stdout)
	}
	data, _ := os.ReadFile(file)
	if strings.Contains(r.stdout, "sha256") || strings.Contains(string(data), key[len(apikey.Prefix)+13:]) {
		t.Fatalf("a hash in the list, or the secret in the file:\n%s\n%s", r.stdout, data)
	}

	if r = run(t, dir, "api-key", "revoke", "--file", file, id); r.code != 0 {
		t.Fatalf("revoke: exit %d\n%s", r.code, r.stderr)
	}
	r = run(t, dir, "--output", "json", "api-key", "list", "--file", file)
	var listed []apiKeyListed
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &listed) != nil || len(listed) != 2 {
		t.Fatalf("list --output json: exit %d, %q", r.code, r.stdout)
	}
	if !listed[0].Revoked || listed[1].Revoked || listed[0].Expires == nil || listed[1].Expires != nil {
		t.Fatalf("listed = %+v, want the first revoked with an expiry", listed)
	}
	data, _ = os.ReadFile(file)
	set, err := apikey.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, code := set.Verify(key, time.Now()); code != reason.APIKeyRevoked {
		t.Fatalf("revoked key: %s", code)
	}
	if _, code := set.Verify(created.Key, time.Now()); code != reason.OK {
		t.Fatalf("other key: %s", code)
	}

	for _, args := range [][]string{
		{"api-key", "create", "--file", file, "--tenant", "acme"},
		{"api-key", "revoke", "--file", file, "aaaaaaaaaaaa"},
		{"api-key", "list", "--file", filepath.Join(dir, "missing.toml")},
	} {
		if r = run(t, dir, args...); r.code != exitUsage {
			t.Errorf("core %s: exit %d, want %d", strings.Join(args, " "), r.code, exitUsage)
		}
	}
}
