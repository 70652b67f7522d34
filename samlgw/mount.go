package samlgw

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
)

// Engine is what a gateway needs of the decision engine an application
// embeds: its configuration ([sdk.saml]) and its token issuer, which signs
// the tokens the gateway issues and lets that engine verify them.
// *engine.Engine implements it.
type Engine interface {
	Config() config.Config
	Issuer() *issuer.Issuer
}

// Mount registers g's endpoints on mux under the gateway's path prefix
// (sdk.saml.path_prefix, default /auth/saml): every path below it goes to
// g.Handler(), which answers unknown paths and methods itself. It returns
// the pattern registered; like http.ServeMux.Handle, it panics when mux
// already has that pattern.
func Mount(mux *http.ServeMux, g *Gateway) string {
	pattern := g.cfg.PathPrefix + "/"
	mux.Handle(pattern, g.Handler())
	return pattern
}

// Embedded is a Gateway running inside an application, on the engine the
// application embeds: built by Start, its IdP metadata refresh (Run)
// running in the background until Close. It serves the gateway's
// endpoints as an http.Handler; mount it with Mount(mux, e.Gateway) or
// route the path prefix to it.
type Embedded struct {
	*Gateway
	h      http.Handler
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	err    error
}

// Start builds a Gateway from e's [sdk.saml] configuration, signing with
// e's token issuer (deps.Issuer, when nil), and starts its background
// work. The engine then verifies the gateway's tokens locally, so that
// authz.Middleware over server.Local(e) accepts them, from the session
// cookie or as bearer tokens. Close the Embedded before the engine.
func Start(e Engine, deps Deps) (*Embedded, error) {
	if e == nil {
		return nil, errors.New("samlgw: an engine is required")
	}
	if deps.Issuer == nil {
		deps.Issuer = e.Issuer()
	}
	g, err := New(e.Config(), deps)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Embedded{Gateway: g, h: g.Handler(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = g.Run(ctx)
	}()
	return m, nil
}

// ServeHTTP serves the gateway's endpoints (Gateway.Handler).
func (m *Embedded) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.h.ServeHTTP(w, r) }

// PathPrefix is where the endpoints are: sdk.saml.path_prefix.
func (g *Gateway) PathPrefix() string { return g.cfg.PathPrefix }

// CookieName is the session cookie the gateway sets: sdk.saml.cookie_name,
// unprefixed. Wherever its cookies are Secure the gateway names it
// "__Host-" + CookieName; authz.MiddlewareOptions.SessionCookie takes the
// unprefixed name and reads both, the prefixed one first.
func (g *Gateway) CookieName() string { return g.cfg.CookieName }

// Close stops the background work, waits for it to end and releases the
// gateway. It is safe to call more than once.
func (m *Embedded) Close() error {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.err = m.Gateway.Close()
	})
	return m.err
}
