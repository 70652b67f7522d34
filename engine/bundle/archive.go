package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
)

// archive is a bundle read into memory and listed, before OPA's reader
// sees it. Listing it first enforces the limits on the unpacked size,
// which OPA's reader does not bound as a whole.
type archive struct {
	raw        []byte
	files      map[string][]byte // by cleaned path, "/authz.rego"
	manifest   []byte            // nil when absent
	signatures []byte            // nil when absent
}

// readArchive reads a gzipped tar from r within the package limits, and
// its manifest. Its errors match ErrMalformed.
func readArchive(r io.Reader) (*archive, error) {
	a, err := readTar(r)
	if err == nil && a.manifest != nil {
		var m opabundle.Manifest
		if jerr := json.Unmarshal(a.manifest, &m); jerr != nil {
			err = fmt.Errorf("decode .manifest: %w", jerr)
		}
	}
	if err != nil {
		return nil, &malformedError{err}
	}
	return a, nil
}

// readTar reads the files of a gzipped tar from r within the package
// limits.
func readTar(r io.Reader) (*archive, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxArchiveBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	if len(raw) > MaxArchiveBytes {
		return nil, fmt.Errorf("bundle is larger than %d bytes", MaxArchiveBytes)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("bundle is not a gzip archive: %w", err)
	}
	a := &archive{raw: raw, files: map[string][]byte{}}
	tr := tar.NewReader(gz)
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("bundle is not a tar archive: %w", err)
		}
		if n >= MaxFiles {
			return nil, fmt.Errorf("bundle holds more than %d entries", MaxFiles)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue // OPA's reader reads regular files only
		}
		if hdr.Size > MaxFileBytes {
			return nil, fmt.Errorf("bundle file %q is larger than %d bytes", hdr.Name, MaxFileBytes)
		}
		if total += hdr.Size; total > MaxUnpackedBytes {
			return nil, fmt.Errorf("bundle unpacks to more than %d bytes", MaxUnpackedBytes)
		}
		body, err := io.ReadAll(io.LimitReader(tr, MaxFileBytes))
		if err != nil {
			return nil, fmt.Errorf("read bundle file %q: %w", hdr.Name, err)
		}
		name := path.Clean("/" + hdr.Name)
		if _, dup := a.files[name]; dup {
			return nil, fmt.Errorf("bundle holds %q twice", name)
		}
		a.files[name] = body
		switch name {
		case "/.manifest":
			a.manifest = body
		case "/.signatures.json":
			a.signatures = body
		}
	}
	if len(a.files) == 0 {
		return nil, errors.New("bundle holds no files")
	}
	return a, nil
}

// reader returns OPA's bundle reader over the archive, with its per-file
// limit set so that it never trusts a size claimed by a tar header.
func (a *archive) reader() *opabundle.Reader {
	loader := opabundle.NewTarballLoaderWithBaseURL(bytes.NewReader(a.raw), "").WithSizeLimitBytes(MaxFileBytes)
	return opabundle.NewCustomReader(loader).
		WithSizeLimitBytes(MaxFileBytes).
		WithLazyLoadingMode(false)
}

// info describes the archive from its listing and manifest, leaving out
// the signature, which signature decodes.
func (a *archive) info() (Info, error) {
	info := Info{Policies: []string{}, DataFiles: []string{}, Roots: []string{}}
	for name := range a.files {
		rel := strings.TrimPrefix(name, "/")
		switch base := path.Base(name); {
		case strings.HasSuffix(base, ".rego"):
			info.Policies = append(info.Policies, rel)
		case base == "data.json" || base == "data.yaml" || base == "data.yml":
			info.DataFiles = append(info.DataFiles, rel)
		}
	}
	slices.Sort(info.Policies)
	slices.Sort(info.DataFiles)
	if a.manifest != nil {
		var m opabundle.Manifest
		if err := json.Unmarshal(a.manifest, &m); err != nil {
			return Info{}, fmt.Errorf("decode .manifest: %w", err)
		}
		info.Revision = m.Revision
		if m.Roots != nil {
			info.Roots = slices.Sorted(slices.Values(*m.Roots))
		} else {
			info.Roots = []string{""}
		}
		if s, ok := m.Metadata[metaCreatedAt].(string); ok {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return Info{}, fmt.Errorf("decode .manifest: metadata %s: %w", metaCreatedAt, err)
			}
			info.CreatedAt = t.UTC()
		}
	} else {
		info.Roots = []string{""} // OPA's default: the bundle owns all of data
	}
	return info, nil
}

// signature decodes, without verifying, what .signatures.json claims; nil
// when the bundle has none.
func (a *archive) signature() (*Signature, error) {
	if a.signatures == nil {
		return nil, nil
	}
	return decodeSignatures(a.signatures)
}

// opaDefaultSignaturePlugin is the plugin OPA's own signer records.
const opaDefaultSignaturePlugin = "_default"

// decodeSignatures reads what .signatures.json claims: the algorithm and
// key id from the JWS header, the number of files from the payload.
func decodeSignatures(raw []byte) (*Signature, error) {
	var sc opabundle.SignaturesConfig
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("decode .signatures.json: %w", err)
	}
	// "_default" is OPA's built-in verifier, which opa build --signing-key
	// names: the same JWS as no plugin.
	if sc.Plugin != "" && sc.Plugin != opaDefaultSignaturePlugin {
		return nil, fmt.Errorf("decode .signatures.json: signature plugin %q is not supported", sc.Plugin)
	}
	if len(sc.Signatures) != 1 {
		return nil, fmt.Errorf("decode .signatures.json: want exactly one signature, found %d", len(sc.Signatures))
	}
	hdr, payload, err := decodeJWS(sc.Signatures[0])
	if err != nil {
		return nil, fmt.Errorf("decode .signatures.json: %w", err)
	}
	sig := &Signature{Alg: hdr.Alg, KeyID: hdr.KeyID, Files: len(payload.Files)}
	if sig.KeyID == "" {
		sig.KeyID = payload.KeyID
	}
	return sig, nil
}

type jwsHeader struct {
	Alg   string `json:"alg"`
	KeyID string `json:"kid"`
}

// decodeJWS decodes the header and payload of a compact JWS without
// checking its signature.
func decodeJWS(token string) (jwsHeader, opabundle.DecodedSignature, error) {
	var (
		hdr     jwsHeader
		payload opabundle.DecodedSignature
	)
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return hdr, payload, errors.New("signature is not a compact JWS")
	}
	for i, dst := range []any{&hdr, &payload} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return hdr, payload, fmt.Errorf("signature part %d: %w", i+1, err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			return hdr, payload, fmt.Errorf("signature part %d: %w", i+1, err)
		}
	}
	return hdr, payload, nil
}
