package bundle

import (
	"archive/tar"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
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
	"github.com/open-policy-agent/opa/v1/util"

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
// Data larger than a bundle file may hold (MaxFileBytes) is split over
// several data.json files, each at most MaxFileBytes, at the directories
// of the objects it cuts (see splitData); reading the bundle merges them
// back into the same data.
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

	keyID := opts.KeyID
	if keyID == "" {
		keyID = DefaultKeyID
	}
	parts, err := splitData(data, dataFileBytes)
	if err != nil {
		return Info{}, err
	}
	if len(parts) > 1 {
		info.DataFiles = info.DataFiles[:0]
		files := make(map[string][]byte, len(parts)+len(b.Modules))
		for dir, body := range parts {
			name := path.Join(dir, "data.json")
			files[name] = body
			info.DataFiles = append(info.DataFiles, name)
		}
		slices.Sort(info.DataFiles)
		for _, m := range b.Modules {
			files[strings.TrimPrefix(m.Path, "/")] = m.Raw
		}
		if err := writeFiles(w, files, b.Manifest, opts.SignKeyPEM != nil, key, keyID); err != nil {
			return Info{}, err
		}
		if opts.SignKeyPEM != nil {
			info.Signature = &Signature{Alg: key.alg, KeyID: keyID, Files: len(files) + 1}
		}
		return info, nil
	}
	if opts.SignKeyPEM != nil {
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

// WriteFiles writes a bundle of files (path without the leading slash →
// content, data files as data.json at the path they fill) to w, with a
// manifest of opts' revision and creation time and the given roots,
// signed when opts has a signing key. Unlike Build it neither compiles
// the modules nor lays out the data: it is for tools that lay out their
// own files, such as benchmarks of data split over several files.
func WriteFiles(w io.Writer, files map[string][]byte, roots []string, opts BuildOptions) error {
	var key signingKey
	if opts.SignKeyPEM != nil {
		var err error
		if key, err = parseSigningKey(opts.SignKeyPEM, opts.Alg); err != nil {
			return fmt.Errorf("signing key: %w", err)
		}
	}
	created := opts.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	m := opabundle.Manifest{
		Revision: opts.Revision,
		Roots:    &roots,
		Metadata: map[string]any{metaCreatedAt: created.UTC().Truncate(time.Second).Format(time.RFC3339)},
	}
	m.SetRegoVersion(ast.RegoV1)
	keyID := opts.KeyID
	if keyID == "" {
		keyID = DefaultKeyID
	}
	return writeFiles(w, files, m, opts.SignKeyPEM != nil, key, keyID)
}

// writeFiles writes a bundle archive of files (path without the leading
// slash → content) and the manifest m to w, signed with key when signed.
// The digests are OPA's: of the parsed document for data files and the
// manifest, of the bytes for the rest.
func writeFiles(w io.Writer, files map[string][]byte, m opabundle.Manifest, signed bool, key signingKey, keyID string) error {
	manifest, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode .manifest: %w", err)
	}
	all := maps.Clone(files)
	all[".manifest"] = manifest
	names := slices.Sorted(maps.Keys(all))
	if signed {
		hasher, err := opabundle.NewSignatureHasher(opabundle.SHA256)
		if err != nil {
			return err
		}
		infos := make([]opabundle.FileInfo, 0, len(names))
		for _, name := range names {
			var v any = all[name]
			if opabundle.IsStructuredDoc(name) {
				var doc any
				if err := util.UnmarshalJSON(all[name], &doc); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				v = doc
			}
			sum, err := hasher.HashFile(v)
			if err != nil {
				return fmt.Errorf("digest %s: %w", name, err)
			}
			infos = append(infos, opabundle.NewFile(name, hex.EncodeToString(sum), string(opabundle.SHA256)))
		}
		tok, err := opabundle.GenerateSignedToken(infos, &opabundle.SigningConfig{Key: string(key.pem), Algorithm: key.alg}, keyID)
		if err != nil {
			return fmt.Errorf("sign bundle: %w", err)
		}
		sigs, err := json.Marshal(opabundle.SignaturesConfig{Signatures: []string{tok}})
		if err != nil {
			return err
		}
		all[".signatures.json"] = sigs
		names = append([]string{".signatures.json"}, names...)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, name := range names {
		body := all[name]
		if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
		if _, err := tw.Write(body); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

// dataFileBytes is the size Build splits data at: MaxFileBytes, lower in
// tests.
var dataFileBytes = MaxFileBytes

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
