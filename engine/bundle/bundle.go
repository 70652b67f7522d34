// Package bundle builds, signs, inspects and verifies policy bundles in the
// OPA bundle format: a gzipped tar archive holding the Rego modules, one
// data.json with the merged data, a .manifest (revision, roots, creation
// time) and, when signed, a .signatures.json whose JWT lists the SHA-256
// digest of every other file.
//
// Reading is hardened for untrusted input: the archive, each file and the
// unpacked total are bounded, and when a verification key is given an
// unsigned or wrongly signed bundle is always rejected, whatever else the
// bundle claims.
package bundle

import (
	"errors"
	"time"
)

// Limits on what a bundle may hold. They bound the memory a hostile
// archive (a gzip bomb, a tar header claiming exabytes) can make a reader
// use; real policy bundles are several orders of magnitude smaller.
const (
	// MaxArchiveBytes bounds the compressed archive.
	MaxArchiveBytes = 64 << 20
	// MaxFileBytes bounds any one file inside the archive.
	MaxFileBytes = 32 << 20
	// MaxUnpackedBytes bounds the sum of all files inside the archive.
	MaxUnpackedBytes = 256 << 20
	// MaxFiles bounds the number of entries in the archive.
	MaxFiles = 10000
)

// Limits bound what a bundle may hold; DefaultLimits are the package's.
type Limits struct {
	// Archive bounds the compressed archive.
	Archive int64
	// File bounds any one file inside the archive.
	File int64
	// Unpacked bounds the sum of all files inside the archive.
	Unpacked int64
}

// DefaultLimits are MaxArchiveBytes, MaxFileBytes and MaxUnpackedBytes.
var DefaultLimits = Limits{Archive: MaxArchiveBytes, File: MaxFileBytes, Unpacked: MaxUnpackedBytes}

// UnpackedFactor is how many times maxBytes the files of a bundle may
// unpack to under LimitsOf(maxBytes).
const UnpackedFactor = MaxUnpackedBytes / MaxFileBytes

// LimitsOf returns the limits a sidecar's policy.bundle_max_bytes sets:
// the archive and each file at most maxBytes, all files together
// UnpackedFactor times as much. LimitsOf(MaxFileBytes) is DefaultLimits
// with the archive bounded like a file.
func LimitsOf(maxBytes int64) Limits {
	return Limits{Archive: maxBytes, File: maxBytes, Unpacked: UnpackedFactor * maxBytes}
}

// Root is the data root every bundle claims: package svc.authz and its
// helpers live under data.svc.
const Root = "svc"

// DefaultKeyID is the key id written into signatures when none is given.
const DefaultKeyID = "default"

// Signing algorithms accepted for bundles: the same three the service
// accepts for tokens.
const (
	ES256 = "ES256"
	RS256 = "RS256"
	PS256 = "PS256"
)

// Info describes a bundle.
type Info struct {
	// Revision is the manifest's revision.
	Revision string `json:"revision"`
	// Roots are the data roots the manifest claims, sorted.
	Roots []string `json:"roots"`
	// CreatedAt is the creation time recorded in the manifest metadata;
	// zero when the bundle does not record one.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Policies lists the Rego files of the bundle, sorted.
	Policies []string `json:"policies"`
	// DataFiles lists the data files (data.json, data.yaml) of the
	// bundle, sorted.
	DataFiles []string `json:"data_files"`
	// Signature describes the bundle's signature; nil when the bundle is
	// not signed.
	Signature *Signature `json:"signature,omitempty"`
	// Verified is true when the signature was checked against a key and
	// every file's digest matched.
	Verified bool `json:"verified"`
}

// Signature describes the signature of a bundle as the signature itself
// claims it. Only Verify establishes that the claims hold.
type Signature struct {
	// Alg is the JWS algorithm of the signature, e.g. "ES256".
	Alg string `json:"alg"`
	// KeyID names the signing key (the JWS kid, or the legacy keyid
	// claim).
	KeyID string `json:"key_id"`
	// Files is the number of files whose digests the signature lists.
	Files int `json:"files"`
}

// ErrMalformed matches, with errors.Is, the error of input that is not a
// bundle at all: not a gzipped tar, over the size limits, or with a
// manifest that does not decode.
var ErrMalformed = errors.New("malformed bundle")

// ErrTooLarge matches, with errors.Is, the error of a bundle over its
// Limits: the archive, a file or the unpacked total. Such an error also
// matches ErrMalformed.
var ErrTooLarge = errors.New("bundle too large")

// tooLargeError is a bundle over its limits.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string        { return e.msg }
func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge || target == ErrMalformed }

// malformedError keeps the message of its cause and matches ErrMalformed.
type malformedError struct{ err error }

func (e *malformedError) Error() string        { return e.err.Error() }
func (e *malformedError) Unwrap() error        { return e.err }
func (e *malformedError) Is(target error) bool { return target == ErrMalformed }

// ErrUnsigned is the reason a bundle without a signature fails
// verification.
var ErrUnsigned = errors.New("bundle is not signed")

// VerificationError is a bundle that could be read but whose signature
// does not hold: it is unsigned, signed by another key or with another
// algorithm, or a file does not match its signed digest.
type VerificationError struct {
	// Err says why.
	Err error
}

// Error implements error.
func (e *VerificationError) Error() string { return "signature invalid: " + e.Err.Error() }

// Unwrap returns the reason.
func (e *VerificationError) Unwrap() error { return e.Err }

// Reason is the reason alone, without the "signature invalid" prefix.
func (e *VerificationError) Reason() string { return e.Err.Error() }

// VerifyOptions says which key must have signed a bundle.
type VerifyOptions struct {
	// PublicKeyPEM is the PEM public key (PKIX "PUBLIC KEY", PKCS#1 "RSA
	// PUBLIC KEY") or certificate that must have signed the bundle. It
	// is required: options without a key reject every bundle rather than
	// accept unverified ones.
	PublicKeyPEM []byte
	// KeyID, when set, must equal the key id the signature names.
	KeyID string
	// Alg, when set, is the only algorithm accepted. When empty it
	// follows from the key: ES256 for a P-256 key; RS256 or PS256, as
	// the signature declares, for an RSA key. The algorithm is never
	// taken from the signature alone.
	Alg string
}
