package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/internal/secretfile"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/internal/tlsfiles"
)

// A Redis as managed services run it: TLS only, its certificate from a
// private CA, an ACL user with a password. RedisClient reaches it with
// [rate_limit]'s settings, and the budgets are shared through it; a
// wrong password, or a CA that did not issue the certificate, fails the
// calls (and so the limiter's fallback decides).
func TestRedisClientTLSAndACL(t *testing.T) {
	ca := testkit.NewCA(t, "redis-ca")
	server := ca.Server(t)
	addr := redistest.StartWith(t, redistest.Options{User: "svc-sidecar", Password: "s3cret-pw", TLS: &server, Roots: ca.Pool()})
	rl := config.RateLimit{
		RedisAddr: addr, RedisTimeout: config.Duration{Duration: 5 * time.Second},
		RedisTLS: true, RedisTLSCAFile: testkit.TempFile(t, "ca.pem", ca.PEM),
		RedisUsername: "svc-sidecar", RedisPasswordFile: testkit.TempFile(t, "pw", []byte("s3cret-pw\n")),
	}
	c, err := ratelimit.RedisClient(rl)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	budgets := func(string) int { return 2 }
	lim := ratelimit.NewRedis(c, budgets, ratelimit.RedisOptions{Prefix: "tls", Timeout: 5 * time.Second})
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		ok, _, err := lim.Allow(ctx, "acme")
		if err != nil || ok != want {
			t.Fatalf("check %d: allowed %v, %v; want %v", i, ok, err, want)
		}
	}

	fails := func(name string, rl config.RateLimit) {
		t.Helper()
		c, err := ratelimit.RedisClient(rl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer c.Close()
		if err := c.Ping(ctx).Err(); err == nil {
			t.Errorf("%s: PING answered", name)
		}
	}
	wrong := rl
	wrong.RedisPasswordFile = testkit.TempFile(t, "wrong", []byte("guess"))
	fails("a wrong password", wrong)
	other := rl
	other.RedisTLSCAFile = testkit.TempFile(t, "other.pem", testkit.NewCA(t, "other").PEM)
	fails("a CA that did not issue the certificate", other)
	plain := rl
	plain.RedisTLS, plain.RedisTLSCAFile = false, ""
	fails("plain TCP to a TLS port", plain)
}

// The files are read when the client is made; an error names the
// setting and never holds the password.
func TestRedisClientFiles(t *testing.T) {
	base := config.RateLimit{RedisAddr: "127.0.0.1:6379", RedisTLS: true}
	for _, tc := range []struct {
		name string
		set  func(*config.RateLimit)
		key  string
	}{
		{"missing password file", func(r *config.RateLimit) { r.RedisPasswordFile = "/nonexistent/pw" }, "rate_limit.redis_password_file"},
		{"empty password file", func(r *config.RateLimit) { r.RedisPasswordFile = testkit.TempFile(t, "pw", []byte("\n")) }, "rate_limit.redis_password_file"},
		{"missing CA file", func(r *config.RateLimit) { r.RedisTLSCAFile = "/nonexistent/ca.pem" }, "rate_limit.redis_tls_ca_file"},
		{"CA file without PEM", func(r *config.RateLimit) { r.RedisTLSCAFile = testkit.TempFile(t, "ca.pem", []byte("s3cret")) }, "rate_limit.redis_tls_ca_file"},
	} {
		rl := base
		tc.set(&rl)
		_, err := ratelimit.RedisClient(rl)
		var se *secretfile.Error
		var fe *tlsfiles.FileError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.name)
		case !(errors.As(err, &se) && se.Key == tc.key) && !(errors.As(err, &fe) && fe.Key == tc.key):
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.key)
		case strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error holds the file's content: %v", tc.name, err)
		}
	}
}
