package ratelimit

import (
	"crypto/tls"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/secretfile"
	"github.com/svc-dev/svc/internal/tlsfiles"
)

// RedisClient is a client of the Redis of r (rate_limit.redis_addr), as
// every part of the sidecar that keeps state there connects to it:
// RedisClientOptions' timeouts, over TLS with rate_limit.redis_tls
// (verified for the address's host against the system's authorities or
// those of rate_limit.redis_tls_ca_file), authenticated as
// rate_limit.redis_username with the password of
// rate_limit.redis_password_file. It reads those files; errors name the
// setting, never the password. The caller closes the client.
func RedisClient(r config.RateLimit) (*redis.Client, error) {
	opts, err := RedisOptionsFor(r)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}

// RedisOptionsFor is the go-redis options of RedisClient.
func RedisOptionsFor(r config.RateLimit) (*redis.Options, error) {
	opts := RedisClientOptions(r.RedisAddr, r.RedisTimeout.Duration)
	if r.RedisPasswordFile != "" {
		pw, err := secretfile.Read("rate_limit.redis_password_file", r.RedisPasswordFile)
		if err != nil {
			return nil, err
		}
		opts.Username, opts.Password = r.RedisUsername, pw
	}
	if r.RedisTLS {
		host, _, err := net.SplitHostPort(r.RedisAddr)
		if err != nil {
			host = r.RedisAddr
		}
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
		if r.RedisTLSCAFile != "" {
			if opts.TLSConfig.RootCAs, err = tlsfiles.CAPool("rate_limit.redis_tls_ca_file", r.RedisTLSCAFile); err != nil {
				return nil, err
			}
		}
	}
	return opts, nil
}
