package docgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

func TestSlug(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Run it in one minute", "run-it-in-one-minute"},
		{"gRPC (`sdk.sidecar_addr`, default `[::1]:50051`)", "grpc-sdksidecar_addr-default-150051"},
		{"nginx and Caddy", "nginx-and-caddy"},
		{"Envoy, Istio and Kubernetes", "envoy-istio-and-kubernetes"},
		{"[Link](x.md) text", "link-text"},
		{"core policy dry-run", "core-policy-dry-run"},
	} {
		if got := Slug(c.in); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAnchorsNumberRepeats(t *testing.T) {
	a := Anchors("# A\n## Flags\n```\n# not a heading\n```\n## Flags\n")
	for _, want := range []string{"a", "flags", "flags-1"} {
		if !a[want] {
			t.Errorf("no anchor %s in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a comment in a code block is not a heading")
	}
}

// TestCheckLinksFindsBroken: a missing file, a missing anchor and a link
// out of the tree are reported; code is not read as links.
func TestCheckLinksFindsBroken(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		testkit.WriteFileMode(t, filepath.Join(root, name), []byte(text), 0o644)
	}
	write("docs/b.md", "# B page\n## Part two\n")
	write("README.md", "[ok](docs/b.md#part-two) [self](#top) [gone](docs/c.md) [bad](docs/b.md#part-three)\n"+
		"[out](../x.md) `[code](nowhere.md)` [later](docs/rust.md)\n```\n[block](nowhere.md)\n```\n# Top\n")
	errs := CheckLinks(root, filepath.Join(root, "README.md"), map[string]bool{"docs/rust.md": true})
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"docs/c.md: no such file", "#part-three", "../x.md points outside"} {
		if !strings.Contains(all, want) {
			t.Errorf("no error about %s in\n%s", want, all)
		}
	}
	if len(errs) != 3 {
		t.Errorf("%d errors, want 3:\n%s", len(errs), all)
	}
}

func TestReplace(t *testing.T) {
	page := "intro\n" + Begin("x") + "\nold\n" + End("x") + "\nafter\n"
	got, err := Replace(page, "x", "new")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + Begin("x") + "\n\nnew\n\n" + End("x") + "\nafter\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := Replace("no markers", "x", "new"); err == nil {
		t.Error("a page without markers must be an error")
	}
}

func TestStripName(t *testing.T) {
	for _, c := range []struct{ doc, name, want string }{
		{"TooLarge: the body is over the limit.", "TooLarge", "the body is over the limit."},
		{"CodeRevisionOlder refuses a bundle.", "CodeRevisionOlder", "refuses a bundle."},
		{"SPPrivateKeyFile / SPCertificateFile are PEM files.", "SPPrivateKeyFile", "are PEM files."},
		{"Token decision codes.", "OK", "Token decision codes."},
		{"OKAY is not the name.", "OK", "OKAY is not the name."},
	} {
		if got := stripName(c.doc, c.name); got != c.want {
			t.Errorf("stripName(%q, %q) = %q, want %q", c.doc, c.name, got, c.want)
		}
	}
}

func TestStripNameOfSecondField(t *testing.T) {
	if got := stripName("SPPrivateKeyFile / SPCertificateFile are PEM files.", "SPCertificateFile"); got != "are PEM files." {
		t.Errorf("got %q", got)
	}
}
