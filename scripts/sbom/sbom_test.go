package main

import (
	"bufio"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"

	"github.com/svc-dev/svc/internal/harness"
)

// TestDistNative runs make dist for the native platform only into a
// temporary directory: each binary prints the stamped version, SHA256SUMS
// holds the digest of every file, and the SBOM parses with the library
// that wrote it and lists every binary (with its digest) and every module
// compiled into it.
func TestDistNative(t *testing.T) {
	mk := harness.LookPath(t, "make", "apt-get install make")
	// make dist builds the SDK artifacts too (dist-sdk): the wheel with
	// Debian's python3-build, the tarball with npm.
	harness.LookPath(t, "npm", "npm")
	if err := exec.Command("/usr/bin/python3", "-c", "import build").Run(); err != nil {
		harness.Missing(t, "python module build", "apt-get install python3-build")
	}
	root := harness.ModuleRoot(t)
	dist := t.TempDir()
	const version = "0.0.0-disttest"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.Command(mk, "-C", root, "dist", "DIST="+dist, "DIST_PLATFORMS="+platform, "VERSION="+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	binDir := "svc_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH
	names := []string{"svc-sidecar", "core", "svc-demo"}
	for _, name := range names {
		out, err := exec.Command(filepath.Join(dist, binDir, name), "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		if got, want := strings.TrimSpace(string(out)), name+" "+version; got != want {
			t.Errorf("%s --version = %q, want %q", name, got, want)
		}
	}

	// SHA256SUMS: every binary, the SBOM and the SDK artifacts, each
	// digest right.
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		want, err := fileSHA256(filepath.Join(dist, file))
		if err != nil {
			t.Fatal(err)
		}
		if sum != want {
			t.Errorf("SHA256SUMS: %s %s, the file's digest is %s", sum, file, want)
		}
		sums[file] = sum
	}
	sbomFile := "svc_" + version + ".spdx.json"
	// The SDK artifacts carry the SDKs' own version, not the release's.
	sdk, err := filepath.Glob(filepath.Join(dist, "svc_sdk-*-py3-none-any.whl"))
	if err != nil || len(sdk) != 1 {
		t.Fatalf("make dist made wheels %v, want one", sdk)
	}
	tgz, err := filepath.Glob(filepath.Join(dist, "svc-sdk-*.tgz"))
	if err != nil || len(tgz) != 1 {
		t.Fatalf("make dist made npm tarballs %v, want one", tgz)
	}
	sdkFiles := []string{filepath.Base(sdk[0]), filepath.Base(tgz[0])}
	for _, file := range append([]string{sbomFile, binDir + "/svc-sidecar", binDir + "/core", binDir + "/svc-demo"}, sdkFiles...) {
		if sums[file] == "" {
			t.Errorf("SHA256SUMS has no line for %s", file)
		}
	}

	// The SBOM.
	sf, err := os.Open(filepath.Join(dist, sbomFile))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	doc, err := spdxjson.Read(sf)
	if err != nil {
		t.Fatalf("the SBOM does not parse: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DocumentName != "svc-"+version || doc.CreationInfo == nil || doc.DocumentNamespace == "" {
		t.Errorf("document header: %s %q namespace %q", doc.SPDXVersion, doc.DocumentName, doc.DocumentNamespace)
	}
	byName := map[string]common.ElementID{}
	byID := map[common.ElementID]string{}
	for _, p := range doc.Packages {
		byName[p.PackageName+"@"+p.PackageVersion] = p.PackageSPDXIdentifier
		byID[p.PackageSPDXIdentifier] = p.PackageName
		if p.PrimaryPackagePurpose == "APPLICATION" {
			file := p.PackageFileName
			if len(p.PackageChecksums) != 1 || p.PackageChecksums[0].Value != sums[file] {
				t.Errorf("package %s (%s): checksums %+v, SHA256SUMS says %s", p.PackageName, file, p.PackageChecksums, sums[file])
			}
		}
	}
	contains := map[common.ElementID][]common.ElementID{}
	described := map[common.ElementID]bool{}
	for _, r := range doc.Relationships {
		switch r.Relationship {
		case common.TypeRelationshipDescribe:
			described[r.RefB.ElementRefID] = true
		case common.TypeRelationshipContains:
			contains[r.RefA.ElementRefID] = append(contains[r.RefA.ElementRefID], r.RefB.ElementRefID)
		}
	}
	for _, name := range names {
		id, ok := byName[name+"@"+version]
		if !ok || !described[id] {
			t.Errorf("the SBOM does not describe the binary %s %s", name, version)
			continue
		}
		info, err := buildinfo.ReadFile(filepath.Join(dist, binDir, name))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"stdlib@" + info.GoVersion, "github.com/svc-dev/svc@" + version}
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			want = append(want, d.Path+"@"+d.Version)
		}
		for _, m := range want {
			mid, ok := byName[m]
			if !ok || !slices.Contains(contains[id], mid) {
				t.Errorf("the SBOM does not say that %s contains %s", name, m)
			}
		}
		if name == "svc-sidecar" && !slices.ContainsFunc(want, func(m string) bool { return strings.HasPrefix(m, "github.com/open-policy-agent/opa@v") }) {
			t.Errorf("svc-sidecar's build information has no OPA module: %v", want)
		}
	}
}
