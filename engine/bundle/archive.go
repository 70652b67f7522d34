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
	lim Limits
	// src holds the archive, size bytes, read anew for each pass.
	src        io.ReaderAt
	size       int64
	files      map[string]bool // the archive's files by cleaned path, "/authz.rego"
	manifest   []byte          // nil when absent
	signatures []byte          // nil when absent
	// signatureFiles are the paths of the files OPA's reader takes for
	// signatures (any named .signatures.json), in archive order.
	signatureFiles []string
}

// readArchive reads a gzipped tar from r within lim, and its manifest.
// Its errors match ErrMalformed, and ErrTooLarge when over lim.
func readArchive(r io.Reader, lim Limits) (*archive, error) {
	a, err := readTar(r, lim)
	if err == nil && a.manifest != nil {
		var m opabundle.Manifest
		if jerr := json.Unmarshal(a.manifest, &m); jerr != nil {
			err = fmt.Errorf("decode .manifest: %w", jerr)
		}
	}
	var tl *tooLargeError
	if err != nil && !errors.As(err, &tl) {
		return nil, &malformedError{err}
	}
	return a, err
}

// readTar reads the files of a gzipped tar from r within lim.
func readTar(r io.Reader, lim Limits) (*archive, error) {
	src, size, err := source(r, lim)
	if err != nil {
		return nil, err
	}
	a := &archive{lim: lim, src: src, size: size, files: map[string]bool{}}
	var total int64
	err = a.eachFile(func(hdr *tar.Header, body io.Reader) error {
		if hdr.Size > lim.File {
			return &tooLargeError{fmt.Sprintf("bundle file %q is larger than %d bytes", hdr.Name, lim.File)}
		}
		if total += hdr.Size; total > lim.Unpacked {
			return &tooLargeError{fmt.Sprintf("bundle unpacks to more than %d bytes", lim.Unpacked)}
		}
		name := path.Clean("/" + hdr.Name)
		if a.files[name] {
			return fmt.Errorf("bundle holds %q twice", name)
		}
		a.files[name] = true
		if opabundle.IsSignaturesFile(hdr.Name) {
			a.signatureFiles = append(a.signatureFiles, hdr.Name)
		}
		// Only the manifest and the signatures are kept: OPA's reader
		// reads the rest again from raw, and a copy of every file here
		// would double what a large bundle takes while it loads.
		var dst *[]byte
		switch name {
		case "/.manifest":
			dst = &a.manifest
		case "/.signatures.json":
			dst = &a.signatures
		}
		if dst == nil {
			if _, err := io.Copy(io.Discard, body); err != nil {
				return fmt.Errorf("read bundle file %q: %w", hdr.Name, err)
			}
			return nil
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return fmt.Errorf("read bundle file %q: %w", hdr.Name, err)
		}
		*dst = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(a.files) == 0 {
		return nil, errors.New("bundle holds no files")
	}
	return a, nil
}

// eachFile unpacks the archive and calls fn with each regular file (OPA's
// reader reads no other kind), its body read within the per-file limit,
// until fn fails. Entries of every kind count towards MaxFiles.
func (a *archive) eachFile(fn func(hdr *tar.Header, body io.Reader) error) error {
	gz, err := gzip.NewReader(a.open())
	if err != nil {
		return fmt.Errorf("bundle is not a gzip archive: %w", err)
	}
	tr := tar.NewReader(gz)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bundle is not a tar archive: %w", err)
		}
		if n >= MaxFiles {
			return fmt.Errorf("bundle holds more than %d entries", MaxFiles)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := fn(hdr, io.LimitReader(tr, a.lim.File)); err != nil {
			return err
		}
	}
}

// source returns the archive r holds as a ReaderAt, without a copy when r
// is one with a size (a *bytes.Reader: an archive in memory); unread
// bytes of r are the archive.
func source(r io.Reader, lim Limits) (io.ReaderAt, int64, error) {
	type sized interface {
		io.ReaderAt
		io.Seeker
		Size() int64
	}
	if sr, ok := r.(sized); ok {
		off, err := sr.Seek(0, io.SeekCurrent)
		if err == nil {
			size := sr.Size() - off
			if size > lim.Archive {
				return nil, 0, &tooLargeError{fmt.Sprintf("bundle is larger than %d bytes", lim.Archive)}
			}
			return io.NewSectionReader(sr, off, size), size, nil
		}
	}
	raw, err := io.ReadAll(io.LimitReader(r, lim.Archive+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read bundle: %w", err)
	}
	if int64(len(raw)) > lim.Archive {
		return nil, 0, &tooLargeError{fmt.Sprintf("bundle is larger than %d bytes", lim.Archive)}
	}
	return bytes.NewReader(raw), int64(len(raw)), nil
}

// open returns a reader of the whole archive.
func (a *archive) open() io.Reader { return io.NewSectionReader(a.src, 0, a.size) }

// reader returns OPA's bundle reader over the archive, with its per-file
// limit set so that it never trusts a size claimed by a tar header. It
// leaves out the data files, which loadData reads.
func (a *archive) reader() *opabundle.Reader {
	return a.readerOf(opabundle.NewTarballLoaderWithBaseURL(a.open(), "").WithFilter(withoutData))
}

// fullReader is reader with the data files.
func (a *archive) fullReader() *opabundle.Reader {
	return a.readerOf(opabundle.NewTarballLoaderWithBaseURL(a.open(), ""))
}

func (a *archive) readerOf(loader opabundle.DirectoryLoader) *opabundle.Reader {
	loader = loader.WithSizeLimitBytes(a.lim.File)
	return opabundle.NewCustomReader(loader).
		WithSizeLimitBytes(a.lim.File).
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
