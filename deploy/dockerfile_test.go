package deploy

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// dockerStage is what the demo's checks need of a Dockerfile: the RUN
// commands of every stage (continuation lines joined) and the final
// stage's WORKDIR, USER, ENTRYPOINT and COPY lines.
type dockerStage struct {
	runs       []string
	workdir    string
	user       string
	entrypoint []string
	copies     []dockerCopy
}

type dockerCopy struct {
	from     string // --from=stage, empty for the build context
	src, dst string
	intoDir  bool // dst is a directory: several sources or a trailing slash
}

// parseDockerfile reads the instructions the demo relies on. It knows the
// exec form of ENTRYPOINT only, which is the form the shipped files use.
func parseDockerfile(t *testing.T, file string) dockerStage {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(raw), " ")
	var st dockerStage
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		args := strings.TrimSpace(strings.TrimPrefix(line, f[0]))
		switch strings.ToUpper(f[0]) {
		case "FROM":
			st = dockerStage{runs: st.runs}
		case "RUN":
			st.runs = append(st.runs, args)
		case "WORKDIR":
			st.workdir = path.Join(st.workdir, args)
			if !path.IsAbs(args) {
				st.workdir = path.Join("/", st.workdir)
			}
		case "USER":
			st.user = args
		case "ENTRYPOINT":
			st.entrypoint = nil
			if err := json.Unmarshal([]byte(args), &st.entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s: not the exec form: %v", file, args, err)
			}
		case "COPY":
			c := dockerCopy{}
			rest := f[1:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
				if v, ok := strings.CutPrefix(rest[0], "--from="); ok {
					c.from = v
				}
				rest = rest[1:]
			}
			if len(rest) < 2 {
				t.Fatalf("%s: %s", file, line)
			}
			c.dst = rest[len(rest)-1]
			c.intoDir = len(rest) > 2 || strings.HasSuffix(c.dst, "/") || c.dst == "."
			if !path.IsAbs(c.dst) {
				c.dst = path.Join(st.workdir, c.dst)
			}
			for _, src := range rest[:len(rest)-1] {
				c.src = src
				st.copies = append(st.copies, c)
			}
		}
	}
	return st
}

// contextFile is the file of the build context that the image holds at
// the absolute path p, through a COPY from the context, or "". As COPY
// does, a directory source copies its contents, and a file copied into a
// directory keeps its name.
func (st dockerStage) contextFile(buildContext, p string) string {
	for _, c := range st.copies {
		if c.from != "" {
			continue
		}
		src := filepath.Join(buildContext, filepath.FromSlash(c.src))
		info, err := os.Stat(src)
		if err != nil {
			continue
		}
		if !info.IsDir() {
			target := c.dst
			if c.intoDir {
				target = path.Join(c.dst, path.Base(c.src))
			}
			if p == target {
				return src
			}
			continue
		}
		if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(c.dst, "/")+"/"); ok {
			return filepath.Join(src, filepath.FromSlash(rest))
		}
	}
	return ""
}

// builtBinary requires the image's ENTRYPOINT to be a binary copied from
// the build stage, where `go build -o` wrote it from pkg, and returns the
// go build command.
func (st dockerStage) builtBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	if len(st.entrypoint) == 0 {
		t.Fatalf("%s: no ENTRYPOINT", name)
	}
	var built string
	for _, c := range st.copies {
		if c.from != "" && (c.dst == st.entrypoint[0] || c.dst == path.Dir(st.entrypoint[0])+"/") {
			built = c.src
		}
	}
	if built == "" {
		t.Fatalf("%s: ENTRYPOINT %s is not copied from a build stage", name, st.entrypoint[0])
	}
	for _, run := range st.runs {
		if strings.Contains(run, "go build") && strings.Contains(run, "-o "+built+" "+pkg) {
			return run
		}
	}
	t.Fatalf("%s: no `go build -o %s %s` makes the ENTRYPOINT %s", name, built, pkg, st.entrypoint[0])
	return ""
}

func nonRoot(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u != "" && u != "root" && u != "0"
}

func serviceDockerfile(t *testing.T, p *types.Project, name string) (dockerStage, string) {
	t.Helper()
	s := p.Services[name]
	if s.Build == nil {
		t.Fatalf("service %s has no build", name)
	}
	df := s.Build.Dockerfile
	if !filepath.IsAbs(df) {
		df = filepath.Join(s.Build.Context, df)
	}
	return parseDockerfile(t, df), s.Build.Context
}

// TestComposeImages checks that the images docker compose builds hold
// what the compose file runs: the sidecar's production build (static,
// vtprotobuf codec) reading the mounted svc.toml from its working
// directory, the demo binary, the identity providers' scripts, each
// running as a user other than root.
func TestComposeImages(t *testing.T) {
	p, err := loadCompose("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}

	st, _ := serviceDockerfile(t, p, "sidecar")
	build := st.builtBinary(t, "sidecar", "./cmd/svc-sidecar")
	for _, want := range []string{"CGO_ENABLED=0", "-tags vtprotobuf"} {
		if !strings.Contains(build, want) {
			t.Errorf("sidecar: %q lacks %s", build, want)
		}
	}
	if !nonRoot(st.user) {
		t.Errorf("sidecar image runs as %q", st.user)
	}
	sc := p.Services["sidecar"]
	if len(sc.Entrypoint) > 0 || len(sc.Command) > 0 || sc.WorkingDir != "" {
		t.Errorf("sidecar overrides the image's entrypoint %q, command %q or working_dir %q", sc.Entrypoint, sc.Command, sc.WorkingDir)
	}
	// svc-sidecar reads svc.toml from its working directory when no
	// --config names a file (cmd/svc-sidecar defaultConfigFile).
	mountOf(t, sc, path.Join(st.workdir, "svc.toml"))

	for _, name := range []string{"orders", "billing", "traffic"} {
		st, _ := serviceDockerfile(t, p, name)
		st.builtBinary(t, name, "./cmd/svc-demo")
		if !nonRoot(st.user) {
			t.Errorf("%s image runs as %q", name, st.user)
		}
	}

	// The identity providers run node on scripts the image copies from
	// e2e/, where the end-to-end tests run them.
	nodeScript := regexp.MustCompile(`(?:^|\s)((?:\S+/)?\S+\.mjs)(?:\s|$)`)
	scripts := map[string]string{}
	for _, name := range []string{"oidc", "saml-idp"} {
		s := p.Services[name]
		for _, arg := range append(append([]string{}, s.Entrypoint...), s.Command...) {
			if m := nodeScript.FindStringSubmatch(arg); m != nil {
				scripts[name] = m[1]
			}
		}
		if scripts[name] == "" {
			t.Errorf("%s runs no .mjs script: %q %q", name, s.Entrypoint, s.Command)
		}
	}
	st, ctx := serviceDockerfile(t, p, "oidc")
	if p.Services["saml-idp"].Image != p.Services["oidc"].Image {
		t.Errorf("saml-idp runs image %q, not the providers' image %q", p.Services["saml-idp"].Image, p.Services["oidc"].Image)
	}
	if !nonRoot(st.user) {
		t.Errorf("the providers' image runs as %q", st.user)
	}
	for name, script := range scripts {
		abs := script
		if !path.IsAbs(abs) {
			abs = path.Join(st.workdir, abs)
		}
		src := st.contextFile(ctx, abs)
		if src == "" {
			t.Errorf("%s runs %s, which the image does not copy", name, abs)
			continue
		}
		if !strings.HasPrefix(src, filepath.Join(ctx, "e2e")+string(filepath.Separator)) {
			t.Errorf("%s runs %s, not a script of e2e/", name, src)
		}
		if _, err := os.Stat(src); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
