package reason_test

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

var update = flag.Bool("update", false, "rewrite testdata/failures.json")

// testdata/failures.json is what the SDKs' tests compare their lists of
// credential failures with (Python, TypeScript, Rust): one list, here.
func TestFailuresGolden(t *testing.T) {
	got, err := json.MarshalIndent(map[string][]reason.Code{
		"token_failures":   reason.TokenFailures,
		"api_key_failures": reason.APIKeyFailures,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, *update, "testdata/failures.json", append(got, '\n'))
}
