package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/md5" //nolint:gosec // OPA's signatures may name MD5; the choice is the signer's
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/svc-dev/svc/engine/policy"
)

// A bundle's data files are read here, not by OPA's reader: each is
// decoded as it is unpacked, straight into the compact tree of the set's
// data (policy.CompactDataBuilder), never whole into Go maps, and its
// signed digest is computed from that tree. OPA's reader reads the rest
// (modules, manifest) with the data files filtered out.

// isDataFile says whether the file at p (a path in the archive) is a data
// file, as OPA's reader tells them.
func isDataFile(p string) bool {
	base := filepath.Base(filepath.ToSlash(p))
	return base == "data.json" || opabundle.IsYAMLDataFile(p)
}

// dataPath is the path in data of the data file at p, as OPA's reader
// makes it: the file's directory, leading "/" and "." removed.
func dataPath(p string) []string {
	dir := strings.TrimLeft(filepath.ToSlash(filepath.Dir(p)), "/.")
	if dir == "" {
		return nil
	}
	return strings.Split(dir, "/")
}

// withoutData is a loader filter that leaves out data files.
func withoutData(abspath string, info fs.FileInfo, _ int) bool {
	return !info.IsDir() && isDataFile(abspath)
}

// verifyError marks an error as the failure of a file to verify.
type verifyError struct{ err error }

func (e *verifyError) Error() string { return e.err.Error() }
func (e *verifyError) Unwrap() error { return e.err }

// loadData unpacks the archive once more, one file at a time, and builds
// its data. With files set (the digests the verified signature lists,
// by path), every file but the signatures must be listed there with a
// matching digest, and every listed file must be present: OPA's rules,
// which opabundle.VerifyBundleFile applies to the other files. Failures
// of verification are *verifyError.
func (a *archive) loadData(files map[string]opabundle.FileInfo) (*policy.CompactData, error) {
	var b policy.CompactDataBuilder
	err := a.eachFile(func(hdr *tar.Header, body io.Reader) error {
		if opabundle.IsSignaturesFile(hdr.Name) {
			return nil
		}
		p := strings.TrimPrefix(filepath.ToSlash(hdr.Name), "/")
		if !isDataFile(p) {
			if files == nil {
				return nil
			}
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, body); err != nil {
				return err
			}
			if err := opabundle.VerifyBundleFile(p, buf, files); err != nil {
				return &verifyError{err}
			}
			return nil
		}
		var digest hash.Hash
		var want []byte
		if files != nil {
			var err error
			if digest, want, err = signedDigest(p, files); err != nil {
				return &verifyError{err}
			}
		}
		if err := addDataFile(&b, p, body, digest); err != nil {
			if files != nil {
				return &verifyError{err}
			}
			return fmt.Errorf("bundle load failed on %v: %w", "/"+p, err)
		}
		if digest != nil {
			if got := digest.Sum(nil); !bytes.Equal(got, want) {
				return &verifyError{fmt.Errorf("%v: digest mismatch (want: %x, got: %x)", p, want, got)}
			}
			delete(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) != 0 {
		return nil, &verifyError{fmt.Errorf("file(s) %v specified in bundle signatures but not found in the target bundle", util.Keys(files))}
	}
	return b.Build(), nil
}

// addDataFile decodes the data file at p from body into b, writing its
// canonical encoding to digest when set. A JSON file is decoded as it is
// read; a YAML file, small as such files are, whole.
func addDataFile(b *policy.CompactDataBuilder, p string, body io.Reader, digest hash.Hash) error {
	var w io.Writer
	if digest != nil {
		w = digest
	}
	if !opabundle.IsYAMLDataFile(p) {
		return b.AddJSON(dataPath(p), body, w)
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	var v any
	if err := util.Unmarshal(raw, &v); err != nil {
		return err
	}
	return b.AddValue(dataPath(p), v, w)
}

// signedDigest returns a hash of the algorithm the signature names for
// the file at p and the digest it lists, with OPA's errors for a file
// that is not listed or names no or an unknown algorithm.
func signedDigest(p string, files map[string]opabundle.FileInfo) (hash.Hash, []byte, error) {
	fi, ok := files[p]
	if !ok {
		return nil, nil, fmt.Errorf("file %v not included in bundle signature", p)
	}
	if fi.Algorithm == "" {
		return nil, nil, fmt.Errorf("no hashing algorithm provided for file %v", p)
	}
	newHash, ok := hashes[opabundle.HashingAlgorithm(fi.Algorithm)]
	if !ok {
		_, err := opabundle.NewSignatureHasher(opabundle.HashingAlgorithm(fi.Algorithm))
		if err == nil {
			err = fmt.Errorf("unsupported hashing algorithm: %s", fi.Algorithm)
		}
		return nil, nil, err
	}
	want, err := hex.DecodeString(fi.Hash)
	if err != nil {
		return nil, nil, err
	}
	return newHash(), want, nil
}

// hashes are the hashing algorithms of OPA's signatures.
var hashes = map[opabundle.HashingAlgorithm]func() hash.Hash{
	opabundle.MD5:       md5.New,
	opabundle.SHA1:      sha1.New,
	opabundle.SHA224:    sha256.New224,
	opabundle.SHA256:    sha256.New,
	opabundle.SHA384:    sha512.New384,
	opabundle.SHA512:    sha512.New,
	opabundle.SHA512224: sha512.New512_224,
	opabundle.SHA512256: sha512.New512_256,
}

// checkDataRoots checks that the data lies within roots, as OPA's reader
// checks the data it decoded.
func checkDataRoots(data *policy.CompactData, roots []string) error {
	trimmed := make([]string, len(roots))
	for i, r := range roots {
		trimmed[i] = strings.Trim(r, "/")
	}
	return data.Visit(func(p string, object bool) (bool, error) {
		p = strings.Trim(p, "/")
		if opabundle.RootPathsContain(trimmed, p) {
			return true, nil
		}
		if object {
			for _, r := range trimmed {
				if opabundle.RootPathsContain(strings.Split(p, "/"), r) {
					return false, nil
				}
			}
		}
		return false, fmt.Errorf("manifest roots %v do not permit data at path '/%s' (hint: check bundle directory structure)", trimmed, p)
	})
}
