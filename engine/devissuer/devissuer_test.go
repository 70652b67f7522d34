package devissuer

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestOpenCreatesOneKey: programs opening an empty directory at once
// agree on one key pair, kept private to the user; a later Open reads it.
func TestOpenCreatesOneKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-issuer")
	const n = 4
	kids := make([]string, n)
	var created sync.Map
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, c, err := Open(dir)
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = d.KeyID()
			if c {
				created.Store(i, true)
			}
		}()
	}
	wg.Wait()
	count := 0
	created.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Errorf("%d programs say they created the key; want 1", count)
	}
	for _, k := range kids[1:] {
		if k != kids[0] {
			t.Fatalf("kids differ: %v", kids)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v; want 0700", di.Mode().Perm())
	}
	d, c, err := Open(dir)
	if err != nil || c || d.KeyID() != kids[0] {
		t.Errorf("reopen = %v, created %v, kid %s", err, c, d.KeyID())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files; want the key alone", len(entries))
	}
}

func TestOpenRefusesBadKeys(t *testing.T) {
	for name, data := range map[string]string{
		"not PEM":   "hello",
		"EC key":    "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgevZzL1gdAFr88hb2\nOF/2NxApJCzGCEDdfSp6VQO30hyhRANCAAQRWz+jn65BtOMvdyHKcvjBeBSDZH2r\n1RTwjmYSi9R/zpBnuQ4EiMnCqfMPWiZqB4QdbAd0E7oH50VpuZ1P087G\n-----END PRIVATE KEY-----\n",
		"truncated": "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			testkit.WriteFile(t, filepath.Join(dir, KeyFile), []byte(data))
			if _, _, err := Open(dir); err == nil || !strings.Contains(err.Error(), KeyFile) {
				t.Errorf("Open = %v; want an error naming %s", err, KeyFile)
			}
		})
	}
}

func TestSignAndIssuedBy(t *testing.T) {
	d, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.Sign(Token{Subject: "dev-user", Tenant: "dev", Roles: []string{"viewer"}, TTL: time.Hour}, time.Now())
	if err != nil || !IssuedBy(tok) {
		t.Fatalf("Sign = %v; IssuedBy %v", err, IssuedBy(tok))
	}
	for _, bad := range []Token{
		{Tenant: "dev", TTL: time.Hour},
		{Subject: "s", TTL: time.Hour},
		{Subject: "s", Tenant: "dev"},
		{Subject: "s", Tenant: "dev", TTL: MaxTTL + time.Second},
	} {
		if _, err := d.Sign(bad, time.Now()); err == nil {
			t.Errorf("Sign(%+v) accepted", bad)
		}
	}
	for _, s := range []string{"", "anything", "a.b.c", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJvdGhlciJ9.", strings.Repeat("x", 40<<10)} {
		if IssuedBy(s) {
			t.Errorf("IssuedBy(%.20q) = true", s)
		}
	}
}

func FuzzIssuedBy(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJzdmMtZGV2In0.sig")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, s string) { _ = IssuedBy(s) })
}
