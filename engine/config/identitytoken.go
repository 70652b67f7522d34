package config

import "time"

// DefaultIdentityTokenTTL is the lifetime of an identity token.
const DefaultIdentityTokenTTL = 5 * time.Minute

// MaxIdentityTokenTTL bounds identity_token.ttl: the token is a proof of
// one decision, not a session.
const MaxIdentityTokenTTL = time.Hour

// IdentityToken is the [identity_token] table: a signed JWT naming the
// caller of every allowed request, handed to the upstream in
// x-svc-identity so that it can verify who the sidecar let through.
type IdentityToken struct {
	// SigningKeyFile is a PEM file of EC P-256 keys (ES256): the first,
	// private, signs; every key of the file is published at
	// /.well-known/jwks.json. Setting it turns identity tokens on. The
	// sidecar re-reads it when it changes and on SIGHUP; a signing key
	// replaced stays published until the last token it signed has
	// expired. Env SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE.
	SigningKeyFile string `toml:"signing_key_file" yaml:"signing_key_file"`
	// TTL is the lifetime of a token (Go duration, at most 1h). A token is
	// reused for the same credential and audience while more than half
	// of it is left. Default "5m". Env SVC_IDENTITY_TOKEN_TTL.
	TTL Duration `toml:"ttl" yaml:"ttl"`
}

// Enabled reports whether identity tokens are minted.
func (t IdentityToken) Enabled() bool { return t.SigningKeyFile != "" }

func (t *IdentityToken) setDefaults() {
	setDuration(&t.TTL, DefaultIdentityTokenTTL)
}

func (v *validator) identityToken() {
	t := v.c.IdentityToken
	if t.TTL.Duration <= 0 || t.TTL.Duration > MaxIdentityTokenTTL {
		v.fail("identity_token.ttl", "must be positive and at most %s, got %q", MaxIdentityTokenTTL, t.TTL.String())
	}
}
