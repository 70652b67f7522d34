package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/internal/testkit"
)

// splitDir writes a policy directory: the default policy and data.json
// holding data.
func splitDir(t *testing.T, data any) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(defaultPolicyDir, "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"authz.rego": src, "data.json": raw} {
		testkit.WriteFile(t, filepath.Join(dir, name), body)
	}
	return dir
}

// TestBuildSplitsData: data larger than a bundle file may hold is written
// as several data.json files, none larger than the limit, which load back
// into the same data, signature verified.
func TestBuildSplitsData(t *testing.T) {
	const limit = 4096
	defer bundle.SetDataFileBytes(limit)()
	tenants, roles := map[string]any{}, map[string]any{}
	for i := range 300 {
		tenants[fmt.Sprintf("t%04d", i)] = map[string]any{"plan": []string{"free", "team", "enterprise"}[i%3], "active": i%7 != 0, "seats": i}
	}
	for i := range 60 {
		roles[fmt.Sprintf("r%03d", i)] = map[string]any{"grants": []string{"orders:read", fmt.Sprintf("reports:%d", i)}, "note": "a <role> & more"}
	}
	data := map[string]any{
		"svc":   map[string]any{"tables": map[string]any{"tenants": tenants, "roles": roles}, "flags": map[string]any{"beta": true}},
		"extra": map[string]any{"region": "eu"},
	}
	key := ecKey(t, elliptic.P256())
	raw := build(t, splitDir(t, data), bundle.BuildOptions{Revision: "split-1", SignKeyPEM: key.private})

	var dataFiles []string
	for _, e := range unpack(t, raw) {
		if strings.HasSuffix(e.name, "/data.json") {
			dataFiles = append(dataFiles, e.name)
			if len(e.body) > limit {
				t.Errorf("%s holds %d bytes, more than %d", e.name, len(e.body), limit)
			}
		}
	}
	if len(dataFiles) < 4 {
		t.Fatalf("data files %v: want the data split over several", dataFiles)
	}
	info, err := bundle.Verify(bytes.NewReader(raw), key.public)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(info.DataFiles) != len(dataFiles) {
		t.Errorf("Info.DataFiles = %v, the archive holds %v", info.DataFiles, dataFiles)
	}
	set, err := bundle.Load(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: key.public})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(jsonOf(t, data), jsonOf(t, set.Data())); diff != "" {
		t.Errorf("data loaded from the split bundle (-want +got):\n%s", diff)
	}
}

// TestBuildSplitRefused: data that cannot be cut into objects of the
// file size is refused with a reason, not written as a bundle the sidecar
// would refuse.
func TestBuildSplitRefused(t *testing.T) {
	defer bundle.SetDataFileBytes(1024)()
	tests := []struct {
		name string
		data any
		want string
	}{
		{"a string larger than a file", map[string]any{"svc": map[string]any{"blob": strings.Repeat("x", 2000)}}, "only an object can be split"},
		{"a key that names no directory", map[string]any{"svc": map[string]any{"a/b": map[string]any{"x": strings.Repeat("y", 700)}, "c": strings.Repeat("z", 700)}}, `key "a/b" cannot name a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := bundle.Build(&buf, splitDir(t, tt.data), bundle.BuildOptions{Revision: "r"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLimits: a bundle over the limits it is read within is refused with
// an error matching ErrTooLarge (and ErrMalformed); within larger limits
// the same bundle reads.
func TestLimits(t *testing.T) {
	raw := build(t, defaultPolicyDir, bundle.BuildOptions{Revision: "r"})
	var largest int64
	for _, e := range unpack(t, raw) {
		largest = max(largest, int64(len(e.body)))
	}
	tests := []struct {
		name string
		lim  bundle.Limits
		ok   bool
	}{
		{"defaults", bundle.DefaultLimits, true},
		{"archive over", bundle.Limits{Archive: int64(len(raw)) - 1, File: 1 << 20, Unpacked: 1 << 20}, false},
		{"a file over", bundle.Limits{Archive: 1 << 20, File: largest - 1, Unpacked: 1 << 20}, false},
		{"unpacked over", bundle.Limits{Archive: 1 << 20, File: largest, Unpacked: largest}, false},
		{"LimitsOf the largest file", bundle.LimitsOf(max(largest, int64(len(raw)))), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := bundle.CheckArchiveWithin(bytes.NewReader(raw), tt.lim)
			_, _, oerr := bundle.OpenWithin(bytes.NewReader(raw), tt.lim, nil)
			if tt.ok {
				if err != nil || oerr != nil {
					t.Fatalf("CheckArchiveWithin = %v, OpenWithin = %v, want both to read it", err, oerr)
				}
				return
			}
			for _, e := range []error{err, oerr} {
				if !errors.Is(e, bundle.ErrTooLarge) || !errors.Is(e, bundle.ErrMalformed) {
					t.Errorf("error = %v, want one matching ErrTooLarge and ErrMalformed", e)
				}
			}
		})
	}
}
