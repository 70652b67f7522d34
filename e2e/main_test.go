package e2e

import (
	"os"
	"testing"

	"github.com/svc-dev/svc/e2e/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}
