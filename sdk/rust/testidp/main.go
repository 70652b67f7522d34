// Command testidp is the identity provider of the Rust crate's tests: it
// generates an RSA key, serves its JWKS on a loopback port and signs RS256
// tokens. It prints {"jwks_url": ...} on its first line, then reads one
// JSON claim set per line on stdin and prints one token per line. It
// exits when stdin closes.
package main

import (
	"bufio"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
)

const kid = "testidp-1"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testidp:", err)
		os.Exit(1)
	}
}

func run() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "{\"jwks_url\":\"http://%s/jwks.json\"}\n", ln.Addr())
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		tok, err := sign(key, in.Bytes())
		if err != nil {
			return err
		}
		fmt.Fprintln(out, tok)
		out.Flush()
	}
	return in.Err()
}

// sign returns an RS256 JWT of the claim set given as JSON.
func sign(key *rsa.PrivateKey, claims []byte) (string, error) {
	if !json.Valid(claims) {
		return "", fmt.Errorf("claims are not JSON: %q", claims)
	}
	head := b64([]byte(`{"alg":"RS256","typ":"JWT","kid":"` + kid + `"}`))
	input := head + "." + b64(claims)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return input + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
