package apikey

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"

	"github.com/svc-dev/svc/reason"
)

// The keys of testdata/valid.toml.
const (
	adminKey  = "svck_aeaqcaibaeaq_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE"
	viewerKey = "svck_aibaeaqcaiba_AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"
)

func readSet(t testing.TB, name string) *Set {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	set, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return set
}

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, key, err := Generate(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Split(key)
		if !ok || got != id {
			t.Fatalf("Split(%q) = %q, %v; want %q, true", key, got, ok, id)
		}
		if seen[key] {
			t.Fatalf("key %q generated twice", key)
		}
		seen[key] = true
	}
	id, key, err := Generate(bytes.NewReader(bytes.Repeat([]byte{1}, 39)))
	if err != nil || id != "aeaqcaibaeaq" || key != adminKey {
		t.Fatalf("Generate(0x01...) = %q, %q, %v; want the key of testdata/valid.toml", id, key, err)
	}
	if _, _, err := Generate(bytes.NewReader(make([]byte, 10))); err == nil {
		t.Fatal("Generate from a short reader: no error")
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name, key string
		ok        bool
	}{
		{"valid", adminKey, true},
		{"empty", "", false},
		{"bearer", "eyJhbGciOiJSUzI1NiJ9.e30.sig", false},
		{"no prefix", strings.TrimPrefix(adminKey, Prefix), false},
		{"upper-case id", "svck_AEAQCAIBAEAQ_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE", false},
		{"id with 1", "svck_aeaqcaibaea1_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE", false},
		{"short secret", adminKey[:len(adminKey)-1], false},
		{"long secret", adminKey + "A", false},
		{"padding", adminKey[:len(adminKey)-1] + "=", false},
		{"spare bits set", adminKey[:len(adminKey)-1] + "F", false},
		{"no separator", "svck_aeaqcaibaeaqXAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE", false},
		{"standard base64", "svck_aeaqcaibaeaq_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBA+E", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := Split(tt.key); ok != tt.ok {
				t.Errorf("Split(%q) ok = %v, want %v", tt.key, ok, tt.ok)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		file    string
		line    int
		message string
	}{
		{"plaintext.toml", 6, "plaintext API key"},
		{"plaintext_field.toml", 4, "plaintext API key (key = ...)"},
		{"duplicate.toml", 7, `id "aeaqcaibaeaq" repeats the entry of line 1`},
		{"badhash.toml", 1, `hash must be "sha256:" and 64 hex digits`},
		{"badsyntax.toml", 4, "toml:"},
		{"badid.toml", 1, "not 12 characters of lower-case base32"},
		{"notenant.toml", 3, "tenant is missing"},
		{"unknownfield.toml", 6, `unknown field "keys.role"`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Parse = %v, want a *LineError", err)
			}
			if le.Line != tt.line || !strings.Contains(le.Msg, tt.message) {
				t.Errorf("Parse = %v, want line %d and %q", err, tt.line, tt.message)
			}
			if strings.Contains(err.Error(), "AQEBAQEBAQEB") {
				t.Errorf("the refusal repeats the secret: %v", err)
			}
		})
	}
	set := readSet(t, "valid.toml")
	if set.Len() != 2 || set.Keys()[0].Line != 4 || set.Keys()[1].Line != 11 {
		t.Fatalf("valid.toml: %d keys at lines %d, %d; want 2 at 4 and 11", set.Len(), set.Keys()[0].Line, set.Keys()[1].Line)
	}
	empty, err := Parse(nil)
	if err != nil || empty.Len() != 0 {
		t.Fatalf("Parse(empty) = %v, %v; want no keys", empty, err)
	}
}

func TestVerify(t *testing.T) {
	set := readSet(t, "valid.toml")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	revoked := readSet(t, "valid.toml")
	revoked.keys["aeaqcaibaeaq"].Revoked = true
	wrongSecret := testkit.WrongSecret(adminKey)
	unknownID := "svck_aaaaaaaaaaaa_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE"
	tests := []struct {
		name    string
		set     *Set
		key     string
		now     time.Time
		want    reason.Code
		subject string
	}{
		{"admin", set, adminKey, now, reason.OK, "ci-deployer"},
		{"viewer before expiry", set, viewerKey, now, reason.OK, "reporting"},
		{"viewer at expiry", set, viewerKey, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), reason.APIKeyExpired, ""},
		{"wrong secret", set, wrongSecret, now, reason.APIKeyUnknown, ""},
		{"unknown id", set, unknownID, now, reason.APIKeyUnknown, ""},
		{"malformed", set, "not-a-key", now, reason.APIKeyMalformed, ""},
		{"revoked", revoked, adminKey, now, reason.APIKeyRevoked, ""},
		{"revoked, wrong secret", revoked, wrongSecret, now, reason.APIKeyUnknown, ""},
		{"nil set", nil, adminKey, now, reason.APIKeyUnknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, code := tt.set.Verify(tt.key, tt.now)
			if code != tt.want {
				t.Fatalf("Verify = %v, want %v", code, tt.want)
			}
			if (k != nil) != (tt.want == reason.OK) || k != nil && k.Subject != tt.subject {
				t.Fatalf("Verify key = %+v, want subject %q", k, tt.subject)
			}
		})
	}
	k, _ := set.Verify(adminKey, now)
	if k.Tenant != "acme" || strings.Join(k.Roles, ",") != "admin,deployer" {
		t.Errorf("admin key = %+v, want tenant acme, roles admin,deployer", k)
	}
}

func TestAppendRevoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.toml")
	const head = "# API keys of the staging deployment\n"
	if err := os.WriteFile(path, []byte(head), 0o640); err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	id1, key1, err := Append(path, NewEntry{Tenant: "acme", Subject: "ci", Roles: []string{"admin"}, Expires: expires})
	if err != nil {
		t.Fatal(err)
	}
	id2, key2, err := Append(path, NewEntry{Tenant: "acme", Subject: "cron", Roles: []string{"viewer", "auditor"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), head) {
		t.Errorf("Append dropped the file's content:\n%s", data)
	}
	if bytes.Contains(data, []byte(key1[len(Prefix)+idLen+1:])) {
		t.Fatalf("the file holds the secret:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want the file's own 0640", fi.Mode().Perm())
	}
	set, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if k, code := set.Verify(key1, now); code != reason.OK || k.ID != id1 || !k.Expires.Equal(expires) {
		t.Fatalf("Verify(key1) = %+v, %v", k, code)
	}
	if k, code := set.Verify(key2, now); code != reason.OK || k.ID != id2 || len(k.Roles) != 2 {
		t.Fatalf("Verify(key2) = %+v, %v", k, code)
	}

	if already, err := Revoke(path, id1); err != nil || already {
		t.Fatalf("Revoke(%s) = %v, %v", id1, already, err)
	}
	if already, err := Revoke(path, id1); err != nil || !already {
		t.Fatalf("Revoke(%s) again = %v, %v; want already", id1, already, err)
	}
	if _, err := Revoke(path, "aaaaaaaaaaaa"); err == nil {
		t.Fatal("Revoke of an unknown id: no error")
	}
	data, _ = os.ReadFile(path)
	set, err = Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, code := set.Verify(key1, now); code != reason.APIKeyRevoked {
		t.Fatalf("Verify(key1) after Revoke = %v, want api-key-revoked\n%s", code, data)
	}
	if _, code := set.Verify(key2, now); code != reason.OK {
		t.Fatalf("Verify(key2) after revoking key1 = %v, want ok\n%s", code, data)
	}
	if !strings.HasPrefix(string(data), head) {
		t.Errorf("Revoke dropped the file's content:\n%s", data)
	}

	fresh := filepath.Join(t.TempDir(), "new.toml")
	if _, _, err := Append(fresh, NewEntry{Tenant: "acme", Subject: "ci"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o600 {
		t.Errorf("new file mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestRevokeExistingField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.toml")
	src, _ := os.ReadFile(filepath.Join("testdata", "valid.toml"))
	src = bytes.Replace(src, []byte(`roles = ["viewer"]`), []byte("revoked = false\nroles = [\"viewer\"]"), 1)
	testkit.WriteFile(t, path, src)
	if _, err := Revoke(path, "aibaeaqcaiba"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Count(data, []byte("revoked")) != 1 {
		t.Fatalf("revoked appears other than once:\n%s", data)
	}
	set := mustParse(t, data)
	if _, code := set.Verify(viewerKey, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); code != reason.APIKeyRevoked {
		t.Fatalf("Verify after Revoke = %v", code)
	}
}

func mustParse(t *testing.T, data []byte) *Set {
	t.Helper()
	set, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.toml")
	good, _ := os.ReadFile(filepath.Join("testdata", "valid.toml"))
	testkit.WriteFile(t, path, good)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f, err := Open(path, now)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := f.Reload(now); changed || err != nil {
		t.Fatalf("Reload of an unchanged file = %v, %v", changed, err)
	}
	bad, _ := os.ReadFile(filepath.Join("testdata", "plaintext.toml"))
	testkit.WriteFile(t, path, bad)
	if changed, err := f.Reload(now); changed || err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Fatalf("Reload of a plaintext file = %v, %v; want a refusal naming line 6", changed, err)
	}
	if _, err := f.Reload(now); err != nil {
		t.Fatalf("the same refused file is refused again: %v", err)
	}
	if st := f.Status(); st.Refusals != 1 || st.Keys != 2 || !strings.Contains(st.LastError, "line 6") {
		t.Fatalf("Status = %+v, want 1 refusal, 2 keys, the error", st)
	}
	if _, code := f.Set().Verify(viewerKey, now); code != reason.OK {
		t.Fatalf("the previous keys are not in force: %v", code)
	}
	one := bytes.SplitN(good, []byte("\n[[keys]]"), 3)
	testkit.WriteFile(t, path, append(one[0], '\n'))
	if changed, err := f.Reload(now); !changed || err != nil {
		t.Fatalf("Reload of a good file = %v, %v", changed, err)
	}
	if st := f.Status(); st.Keys != 0 || st.LastError != "" {
		t.Fatalf("Status = %+v, want no keys and no error", st)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.toml"), now); err == nil {
		t.Fatal("Open of a missing file: no error")
	}
	testkit.WriteFile(t, path, bad)
	if _, err := Open(path, now); err == nil {
		t.Fatal("Open of a bad file: no error")
	}
}

func BenchmarkVerifyAPIKey(b *testing.B) {
	set := readSet(b, "valid.toml")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, code := set.Verify(adminKey, now); code != reason.OK {
			b.Fatal(code)
		}
	}
}
