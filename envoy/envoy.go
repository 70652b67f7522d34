// Package envoy puts svc's decisions behind proxies: Envoy's external
// authorization API (envoy.service.auth.v3.Authorization/Check, gRPC) and an
// HTTP check mode for proxies that forward a subrequest (Envoy's
// http_service, nginx auth_request, Caddy forward_auth).
//
// The package only translates. A Mapper turns a proxied request into the
// bearer token and the policy input (context extensions, then the route
// table, then a default mapping); CheckResponse and the HTTP check handler
// render the engine's Result as the proxy's answer. The decision itself is
// always the Authorizer's, in practice an *engine.Engine.
package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/signincookie"
	"github.com/svc-dev/svc/reason"
)

// Authorizer decides one request: it verifies the credential, completes
// the input from the verified identity and evaluates the policy.
// *engine.Engine implements it.
//
// The Server asks with the source, the request's headers and query left
// for the Completer, and the canonical path its Mapper computed
// (engine.Request.Canonical): the Authorizer must apply the path rules
// of the configuration the Server was built from (envoy.routes_case_sensitive,
// envoy.format_suffixes), as an engine built from the same one does.
//
// An invalid token or a rate-limited tenant is a Result, not an error; an
// error means no decision could be made, and is answered as a denial with
// reason policy-error.
type Authorizer interface {
	Decide(ctx context.Context, req engine.Request) (engine.Result, error)
}

var _ Authorizer = (*engine.Engine)(nil)

// Sources recorded with each decision (engine.Request.Source).
const (
	SourceEnvoy     = "envoy"
	SourceHTTPCheck = "http-check"
)

// Deps are the collaborators of a Server. Every field is optional.
type Deps struct {
	// Logger receives one debug line per decision and a warning per
	// decision the engine could not make; default slog.Default(). Tokens,
	// paths and headers are never logged.
	Logger *slog.Logger
	// Identity, when set, mints the x-svc-identity token of every allowed
	// request (identity_token); *idtoken.Minter implements it.
	Identity IdentityTokens
}

// IdentityTokens mints the signed identity token an allowed request
// carries upstream, for the credential it presented.
type IdentityTokens interface {
	Token(credential string, c idtoken.Claims) (string, error)
}

var _ IdentityTokens = (*idtoken.Minter)(nil)

// SessionRenewal renews browser sessions near their expiry;
// *oidcgw.Gateway implements it.
type SessionRenewal interface {
	// RenewSession is asked about a valid session token within the
	// renewal window, with the request's Cookie header and the token's
	// verified claims. It returns the Set-Cookie value that delivers the
	// renewed session ("" when there is none yet), or the one that clears
	// the session: its provider refused to renew it (the request keeps
	// the answer it was decided and audited with; the session's later
	// requests are refused where they are decided).
	RenewSession(ctx context.Context, cookies string, claims map[string]any) (setCookie string)
}

// Server answers Envoy's ext_authz Check over gRPC and the HTTP check mode,
// with the same mapping and the same responses. It is safe for concurrent
// use.
type Server struct {
	mapper     *Mapper
	az         Authorizer
	checkProxy string // sidecar.check_proxy
	// trusted are the peers whose X-Forwarded-Client-Cert an HTTP check
	// reads (sidecar.trusted_proxies).
	trusted  []netip.Prefix
	signIn   signIn // where browsers sign in ([sdk.saml])
	log      *slog.Logger
	identity IdentityTokens // nil: no x-svc-identity
	// renew renews sessions within renewWindow of their expiry; nil
	// without (SetSessionRenewal).
	renew       SessionRenewal
	renewWindow time.Duration

	// checkInfo and checkUnary are what checkHandler hands the
	// interceptors on every call, made once (the generated handler
	// allocates both per call). Interceptors only read them.
	checkInfo  grpc.UnaryServerInfo
	checkUnary grpc.UnaryHandler
}

var _ authv3.AuthorizationServer = (*Server)(nil)

// New creates a Server from the configuration's tenant (sdk.tenant_id),
// route table (sidecar.routes), proxy of the HTTP check
// (sidecar.check_proxy, default auto), trust of forwarding headers
// (sidecar.trust_forwarded_for), case sensitivity of the route table
// (envoy.routes_case_sensitive), the format suffixes it cuts
// (envoy.format_suffixes) and the proxies whose X-Forwarded-Client-Cert
// an HTTP check reads (sidecar.trusted_proxies).
func New(cfg config.Config, az Authorizer, deps Deps) (*Server, error) {
	if az == nil {
		return nil, fmt.Errorf("envoy: nil authorizer")
	}
	m, err := NewMapper(cfg.SDK.TenantID, cfg.Sidecar.Routes)
	if err != nil {
		return nil, fmt.Errorf("envoy: %w", err)
	}
	if cfg.SDK.SAML != nil {
		m.WithSessionCookie(cfg.SDK.SAML.CookieName, signincookie.PrefixedOnly(cfg))
	} else if cfg.SDK.OIDC != nil {
		m.WithSessionCookie(cfg.SDK.Session.CookieName, signincookie.PrefixedOnly(cfg))
	}
	m.trustForwardedFor = cfg.Sidecar.TrustForwardedFor
	m.WithCaseSensitiveRoutes(cfg.Envoy.RoutesCaseSensitive).WithFormatSuffixes(cfg.Envoy.Formats())
	checkProxy := cfg.Sidecar.CheckProxy
	switch checkProxy {
	case "":
		checkProxy = config.CheckProxyAuto
	case config.CheckProxyAuto, config.CheckProxyNginx, config.CheckProxyForwarded, config.CheckProxyEnvoy:
	default:
		return nil, fmt.Errorf("envoy: sidecar.check_proxy must be %q, %q, %q or %q, got %q",
			config.CheckProxyAuto, config.CheckProxyNginx, config.CheckProxyForwarded, config.CheckProxyEnvoy, checkProxy)
	}
	trusted, err := config.ParseTrustedProxies(cfg.Sidecar.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("envoy: sidecar.trusted_proxies: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{mapper: m, az: az, checkProxy: checkProxy, trusted: trusted, signIn: newSignIn(cfg), log: log, identity: deps.Identity}
	s.checkInfo = grpc.UnaryServerInfo{Server: s, FullMethod: authv3.Authorization_Check_FullMethodName}
	s.checkUnary = func(ctx context.Context, req any) (any, error) {
		return s.answer(ctx, req.(*authv3.CheckRequest)), nil
	}
	return s, nil
}

// SetSessionRenewal makes the checks renew a session token (the sign-in
// gateway's) within window of its expiry through r, and deliver the
// renewed session with their answer: a Set-Cookie header to the client
// (Envoy's response_headers_to_add; X-Svc-Set-Cookie for nginx, whose
// shipped configuration adds it). Caddy's forward_auth cannot hand a
// header of an allowed check to the client, so its checks do not renew:
// an expired session is refreshed through the login. Call it before the
// Server serves.
func (s *Server) SetSessionRenewal(r SessionRenewal, window time.Duration) {
	s.renew, s.renewWindow = r, window
}

// Mapper returns the Server's request mapping.
func (s *Server) Mapper() *Mapper { return s.mapper }

// Register adds the Authorization service to g. Over gRPC, Check
// replies with a *CheckAnswer: a proto.Message equal to what Check
// returns, which the sidecar's codec encodes without building it.
func (s *Server) Register(g *grpc.Server) {
	g.RegisterService(&authorizationService, s)
}

// Check implements authv3.AuthorizationServer. It never returns an error:
// a request it cannot map is denied with HTTP 400 (reason input-invalid),
// and a decision the engine cannot make is denied with HTTP 500 (reason
// policy-error), whatever sdk.fail_mode says. Failing open is Envoy's own
// failure_mode_allow, which applies only when the call fails (the sidecar
// cannot be reached or does not answer in time), never to an answer of
// Check.
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return s.answer(ctx, req).Response(), nil
}

// answer decides req, as Check does.
func (s *Server) answer(ctx context.Context, req *authv3.CheckRequest) *CheckAnswer {
	pr, err := proxyRequestFromCheck(req)
	if err != nil {
		return &CheckAnswer{v: s.present(s.refuse(ctx, SourceEnvoy, pr, err), pr, "")}
	}
	blk := new(checkAnswer)
	v, tenant, ok := s.authorize(ctx, SourceEnvoy, pr, &blk.mapped, envoyAudience(req, pr))
	a := &blk.answer
	a.v = s.present(v, pr, tenant)
	if ok && a.v.allow {
		a.remove = spoofedHeaders(pr.headers, a.v.identity != "")
	}
	return a
}

// checkAnswer holds, in one allocation, the policy input's request (and
// what mapping builds for it) and the answer. The messages of a
// CheckResponse (okBlock, larger than both) are allocated only when
// somebody asks for the Response: the codec writes an allowed answer
// straight from its verdict.
type checkAnswer struct {
	mapped mappedRequest
	answer CheckAnswer
}

// authorize maps pr into blk and asks the Authorizer for a decision
// asked through source; ok is false when the request could not be
// mapped. The headers and query of the input's request are built only if
// the Authorizer asks for them (blk.CompleteRequest). aud is the upstream
// the identity token of an allowed request is for; tenant is the
// request's (input.resource.tenant).
func (s *Server) authorize(ctx context.Context, source string, pr proxyRequest, blk *mappedRequest, aud string) (v verdict, tenant string, ok bool) {
	cred, in, err := s.mapper.mapRequestInto(pr, blk, true)
	if err != nil {
		return s.refuse(ctx, source, pr, err), "", false
	}
	res, err := s.az.Decide(ctx, engine.Request{
		Credential: cred,
		Input:      in,
		Source:     source,
		Completer:  blk,
		// The mapping computed the canonical path from the path it
		// cleaned, with the rules of the route table.
		Canonical: true,
	})
	v = decide(res, err)
	if v.allow && s.renew != nil && res.Token.Kind == engine.KindSession && pr.renews {
		s.renewSession(ctx, pr, res.Token.Claims, &v)
	}
	if v.allow && s.identity != nil {
		v.identity = s.identityToken(ctx, cred, res, aud)
	}
	if err != nil {
		// The code only: the wrapped engine error (an OPA evaluation
		// error, say) can quote input values, which stay out of logs.
		s.log.LogAttrs(ctx, slog.LevelWarn, "no decision; denied",
			slog.String("reason", string(reason.Of(err, reason.PolicyError))),
			slog.String("decision_id", res.Decision.DecisionID),
			slog.String("trace_id", traceID(ctx)),
			slog.String("action", in.Action))
	} else if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.LogAttrs(ctx, slog.LevelDebug, "checked",
			slog.Bool("allow", v.allow),
			slog.Int("status", v.status),
			slog.String("reason", string(v.reason)),
			slog.String("decision_id", res.Decision.DecisionID),
			slog.String("trace_id", traceID(ctx)),
			slog.String("action", in.Action))
	}
	return v, in.Resource.Tenant, true
}

// renewSession asks for a renewed session when the session token of an
// allowed request expires within the renewal window; the check answers
// with it (v.setCookie). A session whose provider refused to renew it
// ends: the answer, decided and audited while the session was valid,
// stands and clears the session cookie, so that the browser signs in
// again. A token outside the window costs a map lookup and a clock read.
func (s *Server) renewSession(ctx context.Context, pr proxyRequest, claims map[string]any, v *verdict) {
	n, ok := claims["exp"].(json.Number)
	if !ok {
		return
	}
	exp, err := n.Int64()
	if err != nil || time.Until(time.Unix(exp, 0)) > s.renewWindow {
		return
	}
	v.setCookie = headerSafe(s.renew.RenewSession(ctx, pr.headers["cookie"], claims))
}

// refuse is the verdict on a request asked through source that could
// not be read into a policy input (err, carrying its reason code): the
// engine records the refusal under a decision id, as it does every
// answer, and the verdict is 400 with that code and id; 503
// decision-log-unavailable when the decision log cannot take the record
// and decision_log.overflow says deny. The record's input holds the
// request's method and target as the proxy named them, if it did.
func (s *Server) refuse(ctx context.Context, source string, pr proxyRequest, err error) verdict {
	var in engine.Input
	if pr.method != "" || pr.target != "" {
		in.Request = &policy.Request{Method: strings.ToUpper(pr.method), Path: pr.target}
	}
	res, logErr := s.az.Decide(ctx, engine.Request{Input: in, Source: source, Refused: err})
	s.logInvalid(ctx, err, res.Decision.DecisionID)
	if logErr != nil {
		return decide(res, logErr)
	}
	return invalidInput(err, res.Decision.DecisionID)
}

// logInvalid logs a refused request by its code and the reason's own
// message, written to be safe; never the request's values.
func (s *Server) logInvalid(ctx context.Context, err error, decisionID string) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	msg := ""
	var re *reason.Error
	if errors.As(err, &re) {
		msg = re.Msg
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "check request refused",
		slog.String("reason", string(reason.Of(err, reason.InputInvalid))),
		slog.String("detail", msg),
		slog.String("decision_id", decisionID),
		slog.String("trace_id", traceID(ctx)))
}

func traceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}
