package samltest

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"io"
	"testing"
)

// RedirectRequest decodes the SAMLRequest parameter of the HTTP-Redirect
// binding (base64 of a raw DEFLATE stream) into the AuthnRequest's XML,
// failing t when it is not one.
func RedirectRequest(t testing.TB, param string) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(param)
	if err != nil {
		t.Fatalf("SAMLRequest is not base64: %v", err)
	}
	doc, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("SAMLRequest is not DEFLATE: %v", err)
	}
	return doc
}
