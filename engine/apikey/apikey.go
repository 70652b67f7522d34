// Package apikey reads the API-key file (api_keys.file) and verifies the
// keys callers present.
//
// A key is "svck_<id>_<secret>": id is 12 characters of lower-case
// base32 (RFC 4648, no padding), secret 32 random bytes in base64url
// without padding. The file never holds a key, only the SHA-256 of the
// whole key with the id, tenant, subject and roles it stands for: a
// leaked file gives no caller a key. Keys are looked up by id and the
// hash compared in constant time.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"io"
	"strings"
)

// Prefix starts every API key; the parser refuses a file that holds it.
const Prefix = "svck_"

const (
	idLen     = 12
	secretLen = 43 // 32 bytes in base64url without padding
	keyLen    = len(Prefix) + idLen + 1 + secretLen
	hashTag   = "sha256:"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Generate returns a new key and its id, drawn from r (crypto/rand.Reader
// when nil).
func Generate(r io.Reader) (id, key string, err error) {
	if r == nil {
		r = rand.Reader
	}
	var buf [7 + 32]byte // 7 bytes make 12 base32 characters (the last 4 bits are padding)
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return "", "", err
	}
	id = idEncoding.EncodeToString(buf[:7])[:idLen]
	secret := base64.RawURLEncoding.EncodeToString(buf[7:])
	return id, Prefix + id + "_" + secret, nil
}

// Split returns the id of key, or ok=false when key is not shaped as
// "svck_<id>_<secret>" with an id and a secret of the right alphabets and
// lengths.
func Split(key string) (id string, ok bool) {
	if len(key) != keyLen || !strings.HasPrefix(key, Prefix) || key[len(Prefix)+idLen] != '_' {
		return "", false
	}
	id = key[len(Prefix) : len(Prefix)+idLen]
	if !ValidID(id) {
		return "", false
	}
	for i := len(Prefix) + idLen + 1; i < len(key); i++ {
		if !isBase64URL(key[i]) {
			return "", false
		}
	}
	// 43 characters carry 258 bits: the last one must leave the two spare
	// bits zero, so that one secret has one spelling.
	if strings.IndexByte(base64Tail, key[len(key)-1]) < 0 {
		return "", false
	}
	return id, true
}

// base64Tail are the base64url characters whose two low bits are zero.
const base64Tail = "AEIMQUYcgkosw048"

// ValidID reports whether id is 12 characters of lower-case base32.
func ValidID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

func isBase64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// Hash is the file's spelling of key's hash: "sha256:" and the hex
// SHA-256 of the whole key.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hashTag + hex.EncodeToString(sum[:])
}

// IsKey reports whether a credential passed where a token may be (the
// token field of the API) is meant as an API key: it starts with Prefix,
// which no JWT does.
func IsKey(credential string) bool { return strings.HasPrefix(credential, Prefix) }
