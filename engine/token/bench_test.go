package token_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/svc-dev/svc/engine/token"
)

// benchTokens returns one token per algorithm, signed by the keys the
// fixture's JWKS publishes.
func benchTokens() map[string]string {
	k := keys()
	return map[string]string{
		"RS256": signClaims(hdr("RS256", "rs", nil), claims(), k.rsaRS),
		"ES256": signClaims(hdr("ES256", "ec", nil), claims(), k.ec),
		"PS256": signClaims(hdr("PS256", "ps", nil), claims(), k.rsaPS),
	}
}

var benchAlgs = []string{"RS256", "ES256", "PS256"}

// BenchmarkValidateToken measures Verify on a cached token and, with the
// cache disabled, the full verification of each algorithm. Compare the
// uncached figures with BenchmarkBareVerify of the same algorithm.
func BenchmarkValidateToken(b *testing.B) {
	toks := benchTokens()
	ctx := context.Background()
	b.Run("cached", func(b *testing.B) {
		f := newFixture(b, nil)
		if _, err := f.v.Verify(ctx, toks["RS256"]); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := f.v.Verify(ctx, toks["RS256"]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached-parallel", func(b *testing.B) {
		f := newFixture(b, nil)
		if _, err := f.v.Verify(ctx, toks["RS256"]); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := f.v.Verify(ctx, toks["RS256"]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	for _, alg := range benchAlgs {
		b.Run("uncached/"+alg, func(b *testing.B) {
			f := newFixture(b, func(o *token.Options) { o.CacheSize = -1 })
			if _, err := f.v.Verify(ctx, toks[alg]); err != nil {
				b.Fatal(err)
			}
			bare := newBareVerifier(b, alg, toks[alg])
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := f.v.Verify(ctx, toks[alg]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(interleavedRatio(b, func() {
				if _, err := f.v.Verify(ctx, toks[alg]); err != nil {
					b.Fatal(err)
				}
			}, bare), "x-bare")
		})
	}
}

// interleavedRatio times b.N calls of each function in alternating runs of
// ten and returns the ratio of their totals: on a shared machine, load then
// skews both sides alike.
func interleavedRatio(b *testing.B, fn, bare func()) float64 {
	var tFn, tBare time.Duration
	for done := 0; done < max(b.N, 100); done += 10 {
		start := time.Now()
		for range 10 {
			fn()
		}
		mid := time.Now()
		for range 10 {
			bare()
		}
		tFn += mid.Sub(start)
		tBare += time.Since(mid)
	}
	return float64(tFn) / float64(tBare)
}

// BenchmarkBareVerify is the floor: only the signature check of the same
// token with the same key, straight on crypto/rsa and crypto/ecdsa (the
// signing input hashed, the signature base64url-decoded).
func BenchmarkBareVerify(b *testing.B) {
	toks := benchTokens()
	for _, alg := range benchAlgs {
		b.Run(alg, func(b *testing.B) {
			bare := newBareVerifier(b, alg, toks[alg])
			b.ReportAllocs()
			for b.Loop() {
				bare()
			}
		})
	}
}

// newBareVerifier returns a function doing only the signature check of tok.
func newBareVerifier(b *testing.B, alg, tok string) func() {
	k := keys()
	dot := strings.LastIndexByte(tok, '.')
	input, sig64 := tok[:dot], tok[dot+1:]
	return func() {
		sig, err := base64.RawURLEncoding.DecodeString(sig64)
		if err != nil {
			b.Fatal(err)
		}
		digest := sha256.Sum256([]byte(input))
		switch alg {
		case "RS256":
			err = rsa.VerifyPKCS1v15(&k.rsaRS.PublicKey, crypto.SHA256, digest[:], sig)
		case "PS256":
			err = rsa.VerifyPSS(&k.rsaPS.PublicKey, crypto.SHA256, digest[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		case "ES256":
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			if !ecdsa.Verify(&k.ec.PublicKey, digest[:], r, s) {
				b.Fatal("ecdsa verify failed")
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheFootprint verifies b.N distinct tokens into the cache and
// reports the heap each cached entry holds (claims, payload, index).
func BenchmarkCacheFootprint(b *testing.B) {
	k := keys()
	toks := make([]string, b.N)
	for i := range toks {
		toks[i] = signClaims(hdr("ES256", "ec", nil), with(map[string]any{"jti": strconv.Itoa(i)}), k.ec)
	}
	f := newFixture(b, func(o *token.Options) { o.CacheSize = b.N + 1 })
	ctx := context.Background()
	if _, err := f.v.Verify(ctx, toks[0]); err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.v.Verify(ctx, toks[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/entry")
	runtime.KeepAlive(f)
}

// BenchmarkCachedMany verifies 1000 users' cached tokens in turn from
// parallel callers, as a sidecar serving many users does: the cache's
// map, locks and expiry checks with entries that are not all in the
// processor's caches.
func BenchmarkCachedMany(b *testing.B) {
	k := keys()
	toks := make([]string, 1000)
	for i := range toks {
		toks[i] = signClaims(hdr("ES256", "ec", nil), with(map[string]any{"sub": "user-" + strconv.Itoa(i)}), k.ec)
	}
	f := newFixture(b, func(o *token.Options) { o.CacheSize = 4096 })
	ctx := context.Background()
	for _, tok := range toks {
		if _, err := f.v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			i = (i + 1) % len(toks)
			if _, err := f.v.Verify(ctx, toks[i]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if st := f.v.CacheStats(); st.Misses != uint64(len(toks)) {
		b.Fatalf("%d misses, want %d: not every call was a hit", st.Misses, len(toks))
	}
}

// BenchmarkTokenDigest measures the key of the verified-token cache,
// which every decision on a token computes, hit or miss: "digest" is
// digestOf of an RS256 token with the hash chosen for this CPU (named in
// the log), "blake2b" and "sha256" the two it chooses from. SHA-256 takes
// about half BLAKE2b-256's time with the CPU's SHA-256 instructions and
// more than twice without them.
func BenchmarkTokenDigest(b *testing.B) {
	tok := benchTokens()["RS256"]
	b.Logf("digest hash on this CPU: %s", token.DigestHashName())
	b.Run("digest", func(b *testing.B) {
		b.SetBytes(int64(len(tok)))
		for b.Loop() {
			digestSink = token.DigestOf(tok)
		}
	})
	raw := []byte(tok)
	b.Run("blake2b", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			shaSink = blake2b.Sum256(raw)
		}
	})
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			shaSink = sha256.Sum256(raw)
		}
	})
}

var (
	digestSink = token.DigestOf("")
	shaSink    [32]byte
)
