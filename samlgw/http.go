package samlgw

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/refusalpage"
	"github.com/svc-dev/svc/internal/signinmux"
	"github.com/svc-dev/svc/reason"
)

// Paths below the prefix.
const (
	PathLogin    = "/login"
	PathACS      = "/acs"
	PathMetadata = "/metadata"
	PathJWKS     = "/jwks.json"
	PathLogout   = "/logout"
)

// Handler serves the endpoints under the configured path prefix.
func (g *Gateway) Handler() http.Handler {
	p := g.cfg.PathPrefix
	// Unknown paths and methods get a refusal like every other one: JSON,
	// or the HTML page for a browser (answerWriter).
	miss := func(w http.ResponseWriter, r *http.Request, allow string) {
		if allow != "" {
			w.Header().Set("Allow", allow)
			writeRefusal(w, refuse(reason.SAMLMethodNotAllowed, "%s takes %s", r.URL.Path, allow))
			return
		}
		writeRefusal(w, refuse(reason.SAMLNotFound, "no SAML endpoint here; the endpoints are %s/login, /acs, /metadata, /jwks.json and /logout", p))
	}
	mux := signinmux.Handler(p, miss,
		signinmux.Route{Method: http.MethodGet, Path: PathLogin, Serve: g.serveLogin},
		signinmux.Route{Method: http.MethodPost, Path: PathACS, Serve: g.serveACS},
		signinmux.Route{Method: http.MethodGet, Path: PathMetadata, Serve: g.serveMetadata},
		signinmux.Route{Method: http.MethodGet, Path: PathJWKS, Serve: g.serveJWKS},
		signinmux.Route{Method: http.MethodGet, Path: PathLogout, Serve: g.serveLogout},
		signinmux.Route{Method: http.MethodPost, Path: PathLogout, Serve: g.serveLogout},
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(&answerWriter{ResponseWriter: w, r: r, g: g}, r)
	})
}

// refusal is the body of every 4xx/5xx answer.
type refusal struct {
	Error   Code   `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	if rf, ok := v.(refusal); ok && writePage(w, status, rf) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeRefusal(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: reason.SAMLMalformed, Msg: "request refused"}
	}
	writeJSON(w, status(e.Code), refusal{Error: e.Code, Message: e.Msg})
}

func (g *Gateway) serviceProvider() *saml.ServiceProvider {
	return serviceProvider(g.cfg.EntityID, g.acsURL, g.spKey, g.spCert)
}

func serviceProvider(entityID string, acs *url.URL, key crypto.Signer, cert *x509.Certificate) *saml.ServiceProvider {
	sp := &saml.ServiceProvider{
		EntityID:          entityID,
		AcsURL:            *acs,
		AuthnNameIDFormat: saml.EmailAddressNameIDFormat,
	}
	if key != nil {
		sp.Key, sp.Certificate = key, cert
		sp.SignatureMethod = dsig.RSASHA256SignatureMethod
		if _, ok := key.(*ecdsa.PrivateKey); ok {
			sp.SignatureMethod = dsig.ECDSASHA256SignatureMethod
		}
	}
	return sp
}

// SPMetadata renders the SP metadata of a configuration without running a
// gateway (`core saml metadata`): it reads the SP key pair, nothing else.
func SPMetadata(s config.SAML) ([]byte, error) {
	acs, err := url.Parse(s.ACSURL)
	if err != nil {
		return nil, fmt.Errorf("sdk.saml.acs_url: %w", err)
	}
	key, cert, err := loadSPKeyPair(s)
	if err != nil {
		return nil, err
	}
	return MetadataXML(serviceProvider(s.EntityID, acs, key, cert))
}

// serveLogin starts SP-initiated sign-on: an AuthnRequest to the IdP over
// HTTP-Redirect, signed when an SP key is configured. Its id carries an
// HMAC and an expiry (requestIDs), so the response's InResponseTo can be
// checked without keeping state for anonymous callers, and the request
// cookie binds it to this browser (binding.go); return_to travels as
// RelayState.
func (g *Gateway) serveLogin(w http.ResponseWriter, r *http.Request) {
	returnTo, ok := g.returnTo(r.URL.Query().Get("return_to"))
	if !ok {
		writeRefusal(w, refuse(reason.SAMLBadReturnTo, "return_to must be a relative path on this site, such as /app"))
		return
	}
	idp := g.meta.current()
	if idp == nil {
		writeRefusal(w, refuse(reason.SAMLIDPUnavailable, "the identity provider's metadata is not loaded yet"))
		return
	}
	if idp.SSOURL == "" {
		writeRefusal(w, refuse(reason.SAMLIDPUnavailable, "the identity provider's metadata names no HTTP-Redirect sign-on service"))
		return
	}
	sp := g.serviceProvider()
	req, err := sp.MakeAuthenticationRequest(idp.SSOURL, saml.HTTPRedirectBinding, saml.HTTPPostBinding)
	if err != nil {
		g.log.Error("AuthnRequest could not be built", "err", err)
		writeJSON(w, http.StatusInternalServerError, refusal{Error: reason.SAMLInternal, Message: "the sign-on request could not be built"})
		return
	}
	if req.ID, err = g.v.requests.mint(r.Context()); err != nil {
		g.log.Error("request id could not be minted", "err", err)
		writeRefusal(w, &Error{Code: reason.SAMLStoreUnavailable, Msg: "request key unavailable", Err: err})
		return
	}
	// crewjam/saml appends RelayState to the query as given: escaped here,
	// a return_to with a query of its own arrives whole and adds no
	// parameter of its own to the redirect.
	to, err := req.Redirect(url.QueryEscape(returnTo), sp)
	if err != nil {
		g.log.Error("AuthnRequest could not be encoded", "err", err)
		writeJSON(w, http.StatusInternalServerError, refusal{Error: reason.SAMLInternal, Message: "the sign-on request could not be built"})
		return
	}
	g.bindRequest(w, r, req.ID)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to.String(), http.StatusFound)
}

// tokenAnswer is the ACS answer to a client that accepts JSON.
type tokenAnswer struct {
	Token     string    `json:"token"`
	TokenType string    `json:"token_type"`
	ExpiresAt time.Time `json:"expires_at"`
}

// serveACS validates a SAMLResponse and issues a token.
func (g *Gateway) serveACS(w http.ResponseWriter, r *http.Request) {
	start := g.now()
	id, token, exp, err := g.consume(w, r)
	g.record(r.Context(), start, id, err)
	if err != nil {
		if CodeOf(err) == reason.SAMLBusy {
			w.Header().Set("Retry-After", retryAfterHeader)
		}
		writeRefusal(w, err)
		return
	}
	if id.InResponseTo != "" {
		g.unbindRequest(w, r, id.InResponseTo)
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, tokenAnswer{Token: token, TokenType: "Bearer", ExpiresAt: exp.UTC()})
		return
	}
	relay, ok := g.returnTo(r.PostFormValue("RelayState"))
	if !ok {
		relay = g.defaultReturnTo()
	}
	g.setSessionCookie(w, token, exp)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, relay, http.StatusSeeOther)
}

func (g *Gateway) consume(w http.ResponseWriter, r *http.Request) (*Identity, string, time.Time, error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return nil, "", time.Time{}, refuse(reason.SAMLMalformed, "the ACS takes a form post (application/x-www-form-urlencoded) with a SAMLResponse field")
	}
	// Refused before its body is read when a bound refuses it: a flood's
	// excess costs no reading, decoding or parsing.
	p := g.admission(r)
	if err := g.acs.vacancy(p); err != nil {
		return nil, "", time.Time{}, err
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, "", time.Time{}, refuse(reason.SAMLTooLarge, "the request body is over %d bytes", MaxBodyBytes)
		}
		return nil, "", time.Time{}, refuse(reason.SAMLMalformed, "the form cannot be read")
	}
	raw := r.PostForm.Get("SAMLResponse")
	if raw == "" {
		return nil, "", time.Time{}, refuse(reason.SAMLMalformed, "no SAMLResponse field")
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(raw), ""))
	if err != nil {
		return nil, "", time.Time{}, refuse(reason.SAMLMalformed, "SAMLResponse is not base64")
	}
	idp := g.meta.current()
	if idp == nil {
		return nil, "", time.Time{}, refuse(reason.SAMLIDPUnavailable, "the identity provider's metadata is not loaded yet")
	}
	// The work a response costs is bounded in its shape (scanTokens),
	// in time and in how many run at once: the checks share the CPU.
	ctx, done, err := g.acs.enter(r.Context(), p)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	defer done()
	id, err := g.v.validate(ctx, data, idp)
	if err != nil {
		return nil, "", time.Time{}, inLane(p, err)
	}
	// After validate, which has spent the response: one posted by a
	// browser that did not start the sign-on is refused for good.
	if err := g.checkBound(r, id); err != nil {
		return id, "", time.Time{}, err
	}
	token, exp, err := g.issuer.Issue(g.claims(id))
	if err != nil {
		return id, "", time.Time{}, &Error{Code: reason.SAMLInternal, Msg: "the token could not be issued", Err: err}
	}
	return id, token, exp, nil
}

// claims are the JWT claims of an identity: sub, email, roles, tenant_id
// and every other attribute (one value as a string, several as a list).
func (g *Gateway) claims(id *Identity) map[string]any {
	c := map[string]any{"sub": id.NameID, "tenant_id": id.Tenant}
	if id.Email != "" {
		c["email"] = id.Email
	}
	roles := id.Roles
	if roles == nil {
		roles = []string{}
	}
	c["roles"] = roles
	for k, vs := range id.Attributes {
		if len(vs) == 1 {
			c[k] = vs[0]
		} else {
			c[k] = vs
		}
	}
	return c
}

// record logs, audits and counts one ACS outcome; never the assertion.
func (g *Gateway) record(ctx context.Context, start time.Time, id *Identity, err error) {
	var code Code
	msg := ""
	if err != nil {
		code = CodeOf(err)
		var e *Error
		if errors.As(err, &e) {
			msg = e.Msg
		}
	}
	g.count(ctx, code)
	if code == reason.SAMLBusy {
		g.countBusy(ctx, err)
	}
	decisionID := policy.NewDecisionID()
	rec := audit.Record{
		Time: start.UTC(), DecisionID: decisionID, Action: "saml:acs",
		Resource: audit.Resource{Type: "saml"}, Allow: err == nil, DenyReasons: []string{},
		Reason: string(reason.SAMLAccepted), LatencyUS: g.now().Sub(start).Microseconds(), Source: "saml",
	}
	if id != nil {
		rec.Tenant, rec.UserID = id.Tenant, id.NameID
	}
	if err != nil {
		rec.Reason = string(code)
		rec.DenyReasons = []string{string(code)}
		lvl := g.log.Warn
		if code == reason.SAMLStoreUnavailable || code == reason.SAMLInternal {
			lvl = g.log.Error
		}
		args := []any{"reason", string(code), "message", msg, "decision_id", decisionID}
		if e := errors.Unwrap(err); e != nil {
			args = append(args, "err", e.Error())
		}
		// A flood's saml-busy answers would be a line each: one a while,
		// with how many were not logged.
		if code != reason.SAMLBusy {
			lvl("SAML response refused", args...)
		} else if n, ok := g.acs.logTurn(start); ok {
			lvl("SAML response refused", append(args, "busy_not_logged", n)...)
		}
	} else {
		if g.v.skipSignature {
			g.log.Warn("SVC_ENV=development: SAML assertion accepted WITHOUT signature verification", "decision_id", decisionID, "tenant", id.Tenant)
		} else {
			g.log.Info("SAML sign-on", "decision_id", decisionID, "tenant", id.Tenant)
		}
	}
	if g.audit != nil {
		g.audit.Log(rec)
	}
}

// wantsJSON: the client asks for JSON over HTML (refusalpage.WantsJSON).
func wantsJSON(r *http.Request) bool {
	return refusalpage.WantsJSON(r.Header.Get("Accept"))
}

// Metadata returns the SP metadata document: entity id, the HTTP-POST ACS
// URL, NameID format emailAddress, and the SP certificate when configured.
func (g *Gateway) Metadata() ([]byte, error) {
	return MetadataXML(g.serviceProvider())
}

// MetadataXML renders sp's metadata with the HTTP-POST ACS only.
func MetadataXML(sp *saml.ServiceProvider) ([]byte, error) {
	md := sp.Metadata()
	for i := range md.SPSSODescriptors {
		d := &md.SPSSODescriptors[i]
		var acs []saml.IndexedEndpoint
		for _, e := range d.AssertionConsumerServices {
			if e.Binding == saml.HTTPPostBinding {
				acs = append(acs, e)
			}
		}
		d.AssertionConsumerServices = acs
	}
	out, err := xml.MarshalIndent(md, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), out...), nil
}

func (g *Gateway) serveMetadata(w http.ResponseWriter, r *http.Request) {
	out, err := g.Metadata()
	if err != nil {
		g.log.Error("SP metadata could not be rendered", "err", err)
		writeJSON(w, http.StatusInternalServerError, refusal{Error: reason.SAMLInternal, Message: "metadata could not be rendered"})
		return
	}
	if refusalpage.PrefersHTML(r.Header.Get("Accept")) {
		// A browser shows XML inline; it would download the SAML type.
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.Header().Set("Content-Disposition", "inline")
	} else {
		w.Header().Set("Content-Type", "application/samlmetadata+xml")
	}
	_, _ = w.Write(out)
}

func (g *Gateway) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	out, err := g.issuer.JWKS()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, refusal{Error: reason.SAMLInternal, Message: "keys could not be rendered"})
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(out)
}

// serveLogout clears the session cookie (clearSessionCookie) and sends
// the browser to return_to (or default_return_to); a JSON client gets 204.
func (g *Gateway) serveLogout(w http.ResponseWriter, r *http.Request) {
	g.clearSessionCookie(w)
	w.Header().Set("Cache-Control", "no-store")
	if wantsJSON(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	to, ok := g.returnTo(r.URL.Query().Get("return_to"))
	if !ok {
		to = g.defaultReturnTo()
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
