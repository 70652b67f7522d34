package wire_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/wire"
)

// FuzzParseDropped: any stream line, as core reads it from the sidecar,
// is a drop notice or not without a panic, and a notice read is one the
// sidecar could have written.
func FuzzParseDropped(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"dropped":3,"type":"dropped"}`))
	f.Add([]byte(`{"type":"dropped","dropped":-1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		n, ok := wire.ParseDropped(line)
		if !ok {
			return
		}
		b, err := json.Marshal(wire.DroppedNotice{Dropped: n, Type: wire.DroppedType})
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := wire.ParseDropped(b); !ok || m != n {
			t.Errorf("notice %s reads back as %d, %v", b, m, ok)
		}
	})
}
