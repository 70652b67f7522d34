// Command sbom writes an SPDX 2.3 JSON software bill of materials of Go
// binaries: one package per binary (with its SHA-256), one per Go module
// compiled into any of them (with its purl), and the Go standard library,
// as the build information embedded in each binary records them
// (debug/buildinfo, which reads binaries of any GOOS/GOARCH). The document
// is built with the types of github.com/spdx/tools-golang and written by
// its JSON writer.
//
//	go run ./scripts/sbom -name svc -version 1.2.3 -o dist/svc.spdx.json dist/*/*
//
// make dist runs it.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "svc", "name of the document and of the product")
	version := fs.String("version", "", "version of the product (required)")
	out := fs.String("o", "", "write the document to `file` (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version == "" || *out == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: sbom -version <v> -o <file> <binary>...")
		return 2
	}
	created, err := creationTime(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintln(stderr, "sbom:", err)
		return 2
	}
	doc, err := Document(*name, *version, created, fs.Args())
	if err == nil {
		err = writeFile(*out, doc)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sbom:", err)
		return 1
	}
	return 0
}

// creationTime is SOURCE_DATE_EPOCH when set (reproducible builds), else
// now.
func creationTime(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Now().UTC(), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", epoch)
	}
	return time.Unix(s, 0).UTC(), nil
}

func writeFile(path string, doc *spdx.Document) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := spdxjson.Write(doc, f, spdxjson.Indent("  ")); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// Document builds the SBOM of the binaries at paths.
func Document(name, version string, created time.Time, paths []string) (*spdx.Document, error) {
	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT",
		DocumentName:   name + "-" + version,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "svc-sbom"}},
			Created:  created.Format(time.RFC3339),
		},
	}
	modules := map[string]common.ElementID{} // "path@version" → package id
	ids := map[common.ElementID]bool{}
	newID := func(kind, s string) common.ElementID {
		base := "Package-" + kind + "-" + strings.Trim(idUnsafe.ReplaceAllString(s, "-"), "-")
		id := common.ElementID(base)
		for i := 2; ids[id]; i++ {
			id = common.ElementID(fmt.Sprintf("%s-%d", base, i))
		}
		ids[id] = true
		return id
	}
	digest := sha256.New()
	for _, path := range paths {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return nil, err
		}
		digest.Write([]byte(sum))
		rel := filepath.ToSlash(path)
		bin := &spdx.Package{
			PackageName:             filepath.Base(path),
			PackageSPDXIdentifier:   newID("binary", rel),
			PackageVersion:          version,
			PackageFileName:         rel,
			PackageDownloadLocation: "NOASSERTION",
			PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: sum}},
			PackageLicenseConcluded: "NOASSERTION",
			PackageLicenseDeclared:  "NOASSERTION",
			PackageCopyrightText:    "NOASSERTION",
			PackageComment:          fmt.Sprintf("Go %s, main package %s, %s", info.GoVersion, info.Path, buildSettings(info)),
			PrimaryPackagePurpose:   "APPLICATION",
		}
		doc.Packages = append(doc.Packages, bin)
		doc.Relationships = append(doc.Relationships, relation("DOCUMENT", bin.PackageSPDXIdentifier, common.TypeRelationshipDescribe))

		mods := []*moduleRef{{path: "stdlib", version: info.GoVersion}, {path: info.Main.Path, version: mainVersion(info.Main.Version, version), sum: info.Main.Sum}}
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			mods = append(mods, &moduleRef{path: d.Path, version: d.Version, sum: d.Sum})
		}
		for _, m := range mods {
			key := m.path + "@" + m.version
			id, ok := modules[key]
			if !ok {
				id = newID("go-module", key)
				modules[key] = id
				doc.Packages = append(doc.Packages, m.pkg(id))
			}
			doc.Relationships = append(doc.Relationships, relation(bin.PackageSPDXIdentifier, id, common.TypeRelationshipContains))
		}
	}
	doc.DocumentNamespace = fmt.Sprintf("https://github.com/svc-dev/svc/spdx/%s-%s-%s", name, version, hex.EncodeToString(digest.Sum(nil))[:16])
	return doc, nil
}

// idUnsafe matches what an SPDX identifier may not hold.
var idUnsafe = regexp.MustCompile(`[^a-zA-Z0-9.-]+`)

type moduleRef struct{ path, version, sum string }

func (m *moduleRef) pkg(id common.ElementID) *spdx.Package {
	p := &spdx.Package{
		PackageName:             m.path,
		PackageSPDXIdentifier:   id,
		PackageVersion:          m.version,
		PackageDownloadLocation: "NOASSERTION",
		PackageLicenseConcluded: "NOASSERTION",
		PackageLicenseDeclared:  "NOASSERTION",
		PackageCopyrightText:    "NOASSERTION",
		PrimaryPackagePurpose:   "LIBRARY",
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL,
			Locator: "pkg:golang/" + m.path + "@" + m.version,
		}},
	}
	if m.sum != "" {
		// The go.sum hash (h1: base64 SHA-256 of the module's file tree).
		p.PackageComment = "go.sum " + m.sum
	}
	return p
}

// mainVersion is the main module's version: the build's "(devel)" says
// nothing, the release version does.
func mainVersion(built, release string) string {
	if built == "" || built == "(devel)" {
		return release
	}
	return built
}

// buildSettings lists the settings that make a build reproducible.
func buildSettings(info *buildinfo.BuildInfo) string {
	var parts []string
	for _, s := range info.Settings {
		switch s.Key {
		case "-tags", "-trimpath", "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64":
			parts = append(parts, s.Key+"="+s.Value)
		}
	}
	return strings.Join(parts, " ")
}

func relation(a, b common.ElementID, kind string) *spdx.Relationship {
	return &spdx.Relationship{
		RefA:         common.MakeDocElementID("", string(a)),
		RefB:         common.MakeDocElementID("", string(b)),
		Relationship: kind,
	}
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
