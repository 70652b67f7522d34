package bundle

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/svc-dev/svc/engine/policy"
)

// metaCreatedAt is the manifest metadata key holding the creation time,
// RFC 3339 in UTC.
const metaCreatedAt = "created_at"

// BuildOptions says how to build a bundle.
type BuildOptions struct {
	// Revision is the manifest revision. Empty means the creation time
	// as "20060102T150405Z".
	Revision string
	// SignKeyPEM is the PEM private key (EC P-256 or RSA of at least
	// 2048 bits) to sign with; nil builds an unsigned bundle.
	SignKeyPEM []byte
	// KeyID is the key id the signature names; empty means DefaultKeyID.
	KeyID string
	// Alg is the signing algorithm (ES256, RS256, PS256); empty means
	// ES256 for an EC key and RS256 for an RSA key.
	Alg string
	// CreatedAt is the creation time to record; zero means now.
	CreatedAt time.Time
	// AllowNetworkBuiltins lets the policies call policy.NetworkBuiltins;
	// a sidecar still refuses such a bundle unless its own
	// policy.allow_network_builtins is true.
	AllowNetworkBuiltins bool
}

// Build compiles the policy directory dir exactly as policy.Load reads it
// (so a bundle never holds a policy set that would not load), and writes
// it to w as a bundle: the Rego modules byte for byte, the merged data as
// one /data.json, and a manifest with the revision, the roots and the
// creation time. With a signing key it also writes /.signatures.json.
// Compile errors are *policy.Error.
//
// The manifest's roots are "svc" plus the first segment of every data
// path outside data.svc, so that a policy directory with data files at its
// top level bundles as it loads. Every module's package must lie under a
// root, which a package outside svc never does.
func Build(w io.Writer, dir string, opts BuildOptions) (Info, error) {
	var key signingKey
	if opts.SignKeyPEM != nil {
		var err error
		if key, err = parseSigningKey(opts.SignKeyPEM, opts.Alg); err != nil {
			return Info{}, fmt.Errorf("signing key: %w", err)
		}
	} else if opts.Alg != "" {
		return Info{}, fmt.Errorf("algorithm %s given without a signing key", opts.Alg)
	}
	set, err := policy.Load(dir, policy.AllowNetworkBuiltins(opts.AllowNetworkBuiltins))
	if err != nil {
		return Info{}, err
	}
	created := opts.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	created = created.UTC().Truncate(time.Second)
	rev := opts.Revision
	if rev == "" {
		rev = created.Format("20060102T150405Z")
	}

	data := set.Data()
	roots := rootsFor(data)
	b := opabundle.Bundle{
		Data: data,
		Manifest: opabundle.Manifest{
			Revision: rev,
			Roots:    &roots,
			Metadata: map[string]any{metaCreatedAt: created.Format(time.RFC3339)},
		},
	}
	b.Manifest.SetRegoVersion(ast.RegoV1)

	parsed := set.Modules()
	info := Info{Revision: rev, Roots: slices.Clone(roots), CreatedAt: created, DataFiles: []string{"data.json"}}
	for _, file := range set.Files() {
		if !strings.HasSuffix(file, ".rego") {
			continue
		}
		m := parsed[file]
		if !opabundle.RootPathsContain(roots, packagePath(m)) {
			return Info{}, fmt.Errorf("%s: package %s is outside the bundle roots %v; helper packages belong under data.%s", file, strings.TrimPrefix(m.Package.Path.String(), "data."), roots, Root)
		}
		raw, err := os.ReadFile(filepath.FromSlash(file))
		if err != nil {
			return Info{}, fmt.Errorf("read %s: %w", file, err)
		}
		name := "/" + relName(dir, file)
		b.Modules = append(b.Modules, opabundle.ModuleFile{URL: name, Path: name, Raw: raw, Parsed: m})
		info.Policies = append(info.Policies, strings.TrimPrefix(name, "/"))
	}
	slices.Sort(info.Policies)

	if opts.SignKeyPEM != nil {
		keyID := opts.KeyID
		if keyID == "" {
			keyID = DefaultKeyID
		}
		sc := &opabundle.SigningConfig{Key: string(key.pem), Algorithm: key.alg}
		if err := b.GenerateSignature(sc, keyID, true); err != nil {
			return Info{}, fmt.Errorf("sign bundle: %w", err)
		}
		// The signed file list is data.json, the manifest and the modules.
		info.Signature = &Signature{Alg: key.alg, KeyID: keyID, Files: len(b.Modules) + 2}
	}
	if err := opabundle.NewWriter(w).UseModulePath(true).DisableFormat(true).Write(b); err != nil {
		return Info{}, fmt.Errorf("write bundle: %w", err)
	}
	return info, nil
}

// rootsFor returns Root plus the top-level keys of data other than Root,
// sorted after Root.
func rootsFor(data map[string]any) []string {
	roots := []string{Root}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if k != Root {
			roots = append(roots, k)
		}
	}
	return roots
}

// packagePath is the package of m as a slash path without the data
// prefix ("svc/authz"), the form bundle roots are compared with.
func packagePath(m *ast.Module) string {
	parts := make([]string, 0, len(m.Package.Path)-1)
	for _, t := range m.Package.Path[1:] {
		if s, ok := t.Value.(ast.String); ok {
			parts = append(parts, string(s))
		} else {
			parts = append(parts, t.String())
		}
	}
	return strings.Join(parts, "/")
}

// relName turns a file name as policy.Load reports it (dir joined with the
// relative path) back into the path relative to dir.
func relName(dir, file string) string {
	prefix := filepath.ToSlash(filepath.Clean(dir))
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return path.Base(file)
	}
	if prefix == "." {
		return file
	}
	return strings.TrimPrefix(file, prefix+"/")
}
