package authz

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/reason"
)

// DefaultTimeout bounds one decision call of a Client: a sidecar that does
// not answer in time is treated as unreachable.
const DefaultTimeout = time.Second

// minConnectTimeout is gRPC's own default bound of one connection
// attempt, kept for clients whose timeout is shorter.
const minConnectTimeout = 20 * time.Second

// failOpenLogEvery spaces the warnings of a fail-open client so that an
// outage of the sidecar does not flood the application's log.
const failOpenLogEvery = 10 * time.Second

// ClientOptions configures a Client. Every field is optional.
type ClientOptions struct {
	// FailMode is FailOpen (default) or FailClosed: what ValidateToken and
	// Authorize return when the sidecar is unreachable.
	FailMode string
	// Timeout bounds each call, connecting included; default
	// DefaultTimeout. The sidecar counts as unreachable only when the
	// connection is refused or the timeout has passed, never sooner. A
	// shorter deadline on the caller's context wins.
	Timeout time.Duration
	// TLS, when set, secures the connection. Without it the connection is
	// plaintext, which is meant for a sidecar on loopback or a Unix
	// socket: bearer tokens travel on it.
	TLS *tls.Config
	// DialOptions are appended to the client's own (transport
	// credentials); use them for interceptors or OTel stats handlers.
	DialOptions []grpc.DialOption
	// Logger receives fail-open warnings, and a fail-open client's notice
	// at construction; default slog.Default().
	Logger *slog.Logger
	// ConfigFile is read for the [sdk] keys sidecar_addr and fail_mode
	// when the address or FailMode is left empty and the SVC_SIDECAR_ADDR
	// or SVC_FAIL_MODE variable is unset, and for the session cookie and
	// the sign-in gateways' URLs ([sdk.session], [sdk.saml], [sdk.oidc]:
	// SessionCookie, SessionCookiePrefixedOnly); default DefaultConfigFile ("svc.toml" in the working
	// directory). A missing file is no error; "-" reads none.
	ConfigFile string
	// LookupEnv reads the environment; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Client is the Go SDK of the sidecar: it asks for token and authorization
// decisions over one reused gRPC connection (svc.authz.v1), or over pooled
// keep-alive connections to the local HTTP JSON API when given an http://
// or https:// URL, and applies the fail mode when the sidecar cannot be
// reached. It is safe for concurrent use.
type Client struct {
	t        transport
	target   string
	failMode string
	cookie   string
	// prefixedOnly is clientConfig.prefixedOnly.
	prefixedOnly bool
	timeout      time.Duration
	log          *slog.Logger
	lastWarn     atomic.Int64
}

var _ Authorizer = (*Client)(nil)

// NewClient returns a Client of the sidecar at addr: host:port or
// another gRPC target ("[::1]:50051", "unix:///run/svc.sock") for the gRPC
// API, or the URL of the local HTTP API ("http://127.0.0.1:7700"). An
// empty addr is taken from SVC_SIDECAR_ADDR, then from sdk.sidecar_addr of
// svc.toml in the working directory (opts.ConfigFile), then
// "[::1]:50051"; an empty opts.FailMode likewise from SVC_FAIL_MODE and
// sdk.fail_mode, then "open". It does not connect: connections are made
// on first use and re-made after failures.
func NewClient(addr string, opts ClientOptions) (*Client, error) {
	file := opts.ConfigFile
	switch file {
	case "":
		file = DefaultConfigFile
	case "-":
		file = ""
	}
	cc, err := clientDefaults(addr, opts.FailMode, opts.LookupEnv, file)
	if err != nil {
		return nil, fmt.Errorf("authz: new client: %w", err)
	}
	addr = cc.addr
	mode, err := checkFailMode(cc.mode)
	if err != nil {
		return nil, fmt.Errorf("authz: new client: %w", err)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("authz: new client: negative timeout %s", opts.Timeout)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	var t transport
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		ht, err := newHTTPTransport(addr, opts.TLS)
		if err != nil {
			return nil, fmt.Errorf("authz: new client: %w", err)
		}
		t = ht
	} else {
		creds := insecure.NewCredentials()
		if opts.TLS != nil {
			creds = credentials.NewTLS(opts.TLS)
		}
		// gRPC gives up connecting after MinConnectTimeout (20 s by
		// default) and fails the call then: a longer timeout must not end
		// sooner than it says.
		params := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: max(timeout, minConnectTimeout)}
		dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithConnectParams(params)}, opts.DialOptions...)
		conn, err := grpc.NewClient(addr, dial...)
		if err != nil {
			return nil, fmt.Errorf("authz: new client for %q: %w", addr, err)
		}
		t = grpcTransport{conn: conn, rpc: authzv1.NewAuthzServiceClient(conn)}
	}
	c := &Client{
		t:            t,
		target:       addr,
		failMode:     mode,
		cookie:       cc.cookie,
		prefixedOnly: cc.prefixedOnly,
		timeout:      timeout,
		log:          opts.Logger,
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if mode == FailOpen {
		c.log.Warn(FailOpenNotice, "sidecar", addr, "fail_mode", FailOpen)
	}
	return c, nil
}

// FailOpenNotice is the warning a fail-open Client logs once, when it is
// made: what fail-open means and how to turn it off.
const FailOpenNotice = "authz: fail_mode=open: requests are allowed when the sidecar is unreachable; " +
	"set SVC_FAIL_MODE=closed (or sdk.fail_mode, ClientOptions.FailMode) to deny them instead"

// FailMode returns the client's fail mode, FailOpen or FailClosed.
func (c *Client) FailMode() string { return c.failMode }

// SessionCookie returns the name of the sign-in gateways' session cookie
// in this deployment: SVC_SESSION_COOKIE_NAME, else SVC_SAML_COOKIE_NAME,
// else sdk.session.cookie_name of the configuration file, else
// sdk.saml.cookie_name, else DefaultSessionCookie when the deployment has
// a gateway (SAML: [sdk.saml] or SVC_SAML_ENTITY_ID; OpenID Connect:
// SVC_OIDC_ISSUER_URL, sdk.oidc.issuer_url or [[sdk.oidc.providers]]);
// "" when it has none. The Middleware takes a token from it when its
// options name no cookie.
func (c *Client) SessionCookie() string { return c.cookie }

// SessionCookiePrefixedOnly reports whether only "__Host-" +
// SessionCookie() counts: the gateways' public URLs are known and on each
// the gateway names every cookie with that prefix (the SAML ACS URL,
// SVC_SAML_ACS_URL else sdk.saml.acs_url; each OpenID Connect provider's
// redirect_url, SVC_OIDC_REDIRECT_URL else sdk.oidc.redirect_url, the
// default of every [[sdk.oidc.providers]] entry), so an unprefixed
// session cookie can only be one a sibling subdomain tossed in.
// Middleware follows it when its options name no cookie.
func (c *Client) SessionCookiePrefixedOnly() bool { return c.prefixedOnly }

// Target returns the sidecar address or URL the client talks to.
func (c *Client) Target() string { return c.target }

// ValidateToken asks the sidecar to verify token. An invalid token is a
// decision with Allowed=false and its reason, in both fail modes. When the
// sidecar is unreachable it returns, in FailOpen mode, Allowed=true with
// nil claims and reason "fail-open"; in FailClosed mode an
// *UnavailableError. Any other error (a cancelled context, a request the
// sidecar rejects) is returned as is.
func (c *Client) ValidateToken(ctx context.Context, token string) (TokenDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.t.validateToken(ctx, &authzv1.ValidateTokenRequest{Token: token})
	if err != nil {
		if err = c.callError(ctx, "validate-token", err); errors.Is(err, errFailOpen) {
			return failOpenToken(), nil
		}
		return TokenDecision{Reason: reason.Of(err, reason.Unavailable)}, err
	}
	return TokenDecisionFromProto(resp), nil
}

// Authorize asks the sidecar whether the bearer of req.Token may perform
// req.Action on req.Resource. Denials and invalid tokens are decisions
// with Allowed=false, in both fail modes. When the sidecar is unreachable
// it returns, in FailOpen mode, Allowed=true with reason "fail-open"; in
// FailClosed mode an *UnavailableError. A sidecar that answers but cannot
// or will not decide (policy-error, decision-log-unavailable) is an
// *UnavailableError with its reason in both modes. A request the
// sidecar rejects as malformed, or resource attributes out of bounds or
// not JSON (not sent at all), is a *reason.Error with code
// reason.InputInvalid.
func (c *Client) Authorize(ctx context.Context, req AuthorizeRequest) (Decision, error) {
	msg, err := req.ProtoChecked()
	if err != nil {
		// Not sent: the sidecar would reject it alike.
		return Decision{Reason: reason.InputInvalid, DenyReasons: []string{}}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.t.authorize(ctx, msg)
	if err != nil {
		if err = c.callError(ctx, "authorize", err); errors.Is(err, errFailOpen) {
			return failOpenDecision(), nil
		}
		return Decision{Reason: reason.Of(err, reason.Unavailable), DenyReasons: []string{}}, err
	}
	return DecisionFromProto(resp), nil
}

// Close releases the connections.
func (c *Client) Close() error { return c.t.close() }

// errFailOpen tells a method to answer with its fail-open decision.
var errFailOpen = errors.New("fail open")

// callError classifies the error of a call. Unreachable (Unavailable,
// DeadlineExceeded, which covers a refused connection and a sidecar that
// is too slow) becomes errFailOpen or an *UnavailableError by fail mode.
// A sidecar that answered Internal (policy-error) gets an
// *UnavailableError in both modes.
// A context the caller itself ended is not the sidecar's failure and is
// returned as is.
func (c *Client) callError(ctx context.Context, op string, err error) error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Canceled:
		if ctx.Err() != nil {
			return fmt.Errorf("authz: %s: %w", op, ctx.Err())
		}
	case codes.Unavailable, codes.DeadlineExceeded:
		rc := reasonOfStatus(st, reason.Unavailable)
		if c.failMode == FailOpen {
			c.warnFailOpen(op, rc, st.Code())
			return errFailOpen
		}
		return &UnavailableError{Op: op, Reason: rc, Err: err}
	case codes.InvalidArgument:
		return reason.Wrap(reasonOfStatus(st, reason.InputInvalid), err, "%s: sidecar rejected the request", op)
	case codes.FailedPrecondition:
		return reason.Wrap(reasonOfStatus(st, reason.PlanUnsupported), err, "%s: the policy cannot answer it", op)
	case codes.Internal:
		// The sidecar answered but could not decide (policy-error): a
		// denial in both fail modes, never a fail-open pass.
		return &UnavailableError{Op: op, Reason: reasonOfStatus(st, reason.PolicyError), Err: err}
	}
	return fmt.Errorf("authz: %s: %w", op, err)
}

func (c *Client) warnFailOpen(op string, rc reason.Code, code codes.Code) {
	now := time.Now().UnixNano()
	last := c.lastWarn.Load()
	if now-last < int64(failOpenLogEvery) || !c.lastWarn.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn("decision service unavailable; allowing by fail_mode=open",
		"op", op, "reason", rc, "grpc_code", code.String(), "fail_mode", FailOpen)
}
