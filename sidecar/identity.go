package sidecar

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// PathIdentityJWKS publishes the public keys of the identity tokens
// (x-svc-identity) on the HTTP listener, open to every caller like
// /healthz: upstreams fetch it to verify the tokens. It is distinct from
// the sign-in gateway's session keys.
const PathIdentityJWKS = "/.well-known/jwks.json"

// newIdentity makes the minter of [identity_token], or nil without it.
// A key file that cannot be read or parsed refuses the start.
func (s *Server) newIdentity() error {
	m, err := idtoken.FromConfig(s.deps.Engine.Config(), s.log)
	if err != nil || m == nil {
		return err
	}
	s.identity = m
	if t := s.deps.Telemetry; t != nil {
		if err := identityMetrics(t.MeterProvider().Meter("github.com/svc-dev/svc/sidecar"), m); err != nil {
			return fmt.Errorf("identity token metrics: %w", err)
		}
	}
	return nil
}

// identityMetrics observes the minter's counts: tokens by outcome
// (minted, reused, failed) and refused changes of the key file.
func identityMetrics(meter metric.Meter, m *idtoken.Minter) error {
	tokens, err := meter.Int64ObservableCounter("svc.identity_token.tokens",
		metric.WithDescription("Identity tokens handed to upstreams, by outcome: minted (signed), reused (served again while more than half of its lifetime was left) or failed (not signed; the request went without one)."))
	if err != nil {
		return err
	}
	refusals, err := meter.Int64ObservableCounter("svc.identity_token.key_refusals",
		metric.WithDescription("Changes of identity_token.signing_key_file refused; the previous keys stayed in force."))
	if err != nil {
		return err
	}
	minted := metric.WithAttributes(attribute.String("outcome", "minted"))
	reused := metric.WithAttributes(attribute.String("outcome", "reused"))
	failed := metric.WithAttributes(attribute.String("outcome", "failed"))
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := m.Status()
		o.ObserveInt64(tokens, st.Minted, minted)
		o.ObserveInt64(tokens, st.Reused, reused)
		o.ObserveInt64(tokens, st.Failures, failed)
		o.ObserveInt64(refusals, st.Refusals)
		return nil
	}, tokens, refusals)
	return err
}

// serveIdentityJWKS answers PathIdentityJWKS: the identity tokens' keys,
// or 404 without [identity_token].
func (s *Server) serveIdentityJWKS(w http.ResponseWriter, _ *http.Request) {
	if s.identity == nil {
		wire.WriteError(w, http.StatusNotFound, wire.Indented, string(reason.NotFound),
			"identity tokens are off: identity_token.signing_key_file is not set")
		return
	}
	doc, err := s.identity.JWKS()
	if err != nil {
		s.log.Error("identity token key set not rendered", "err", err)
		wire.WriteError(w, http.StatusInternalServerError, wire.Indented, string(reason.Internal), "the key set could not be rendered")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/jwk-set+json")
	// Short: a rotated key must reach verifiers within a token's lifetime.
	h.Set("Cache-Control", "public, max-age=60")
	_, _ = w.Write(doc)
}

// identityStatus is the status of the identity tokens, nil without them.
func (s *Server) identityStatus() *wire.IdentityTokenStatus {
	if s.identity == nil {
		return nil
	}
	st := s.identity.Status()
	return &st
}
