package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"

	"github.com/svc-dev/svc/engine/bundle"
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
// Unlike `core policy bundle`, which splits the merged data itself, the
// data stays in the files it is given, each a data.json at the path it
// fills, laid out by the tables (tables.files).
func writeBundle(files map[string][]byte, s signer, revision string) ([]byte, error) {
	var buf bytes.Buffer
	if err := bundle.WriteFiles(&buf, files, []string{bundle.Root}, bundle.BuildOptions{Revision: revision, SignKeyPEM: s.privPEM}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
