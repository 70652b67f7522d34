package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
)

// signer is an ES256 bundle signing key and its public key.
type signer struct {
	privPEM, pubPEM []byte
}

func newSigner() (signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return signer{}, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return signer{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return signer{}, err
	}
	return signer{
		privPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		pubPEM:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}, nil
}

// writeBundle writes a signed bundle archive holding files (path without
// the leading slash → content) and a manifest claiming the root svc.
// Unlike `core policy bundle`, which writes the merged data as one
// data.json, the data stays in the files it is given, each a data.json
// at the path it fills: that is how data larger than a bundle file may be
// (bundle.MaxFileBytes) is shipped.
func writeBundle(files map[string][]byte, s signer, revision string) ([]byte, error) {
	manifest, err := json.Marshal(map[string]any{"revision": revision, "roots": []string{"svc"}, "rego_version": 1})
	if err != nil {
		return nil, err
	}
	all := maps.Clone(files)
	all[".manifest"] = manifest
	hasher, err := opabundle.NewSignatureHasher(opabundle.SHA256)
	if err != nil {
		return nil, err
	}
	var infos []opabundle.FileInfo
	names := slices.Sorted(maps.Keys(all))
	for _, name := range names {
		var v any = all[name]
		if opabundle.IsStructuredDoc(name) {
			var doc any
			if err := util.UnmarshalJSON(all[name], &doc); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			v = doc
		}
		sum, err := hasher.HashFile(v)
		if err != nil {
			return nil, fmt.Errorf("hash %s: %w", name, err)
		}
		infos = append(infos, opabundle.NewFile(name, hex.EncodeToString(sum), string(opabundle.SHA256)))
	}
	tok, err := opabundle.GenerateSignedToken(infos, &opabundle.SigningConfig{Key: string(s.privPEM), Algorithm: "ES256"}, "default")
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	sigs, err := json.Marshal(map[string]any{"signatures": []string{tok}})
	if err != nil {
		return nil, err
	}
	all[".signatures.json"] = sigs
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range append([]string{".signatures.json"}, names...) {
		body := all[name]
		if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
