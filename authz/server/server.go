// Package server is the server side of svc's own decision API, over the
// decision engine: the svc.authz.v1 gRPC service (Server.Register), its
// local HTTP JSON mirror (Server.RegisterHTTP), and LocalAuthorizer, the
// authz.Authorizer that decides in-process on an embedded engine so that
// the authz middleware runs without a sidecar.
//
// The client and the middleware are in package authz, which does not link
// the engine; this package does, and svc-sidecar imports it.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/authz"
	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/reason"
)

// Decider is the decision engine as this package uses it. *engine.Engine
// implements it; Server and LocalAuthorizer are built on one.
type Decider interface {
	// Decide answers one request: under engine.ScopeToken a token
	// decision with a stable reason code for every outcome, including a
	// rejection; under engine.ScopeAuthorize the token decision, the
	// input completed (user from the verified claims, tenant from the
	// configuration) and the policy's decision. An error means the engine
	// could not decide (reason.PolicyError).
	Decide(ctx context.Context, req engine.Request) (engine.Result, error)
}

var _ Decider = (*engine.Engine)(nil)

// Sources recorded with each decision (engine.Request.Source).
const (
	sourceGRPC = "grpc"
	sourceHTTP = "http"
	sourceSDK  = "sdk"
)

// validate asks d for the token decision of cred, asked through source.
func validate(ctx context.Context, d Decider, source string, cred engine.Credential) engine.TokenDecision {
	res, _ := d.Decide(ctx, engine.Request{Scope: engine.ScopeToken, Credential: cred, Source: source})
	return res.Token
}

// DefaultMaxBodyBytes bounds a request body of the local HTTP API.
const DefaultMaxBodyBytes = 1 << 20

// Options configures a Server. Every field is optional.
type Options struct {
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body of the local HTTP API; larger
	// bodies get 413. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Server serves the svc.authz.v1 AuthzService over gRPC (Register) and as
// a local HTTP JSON API (RegisterHTTP), answering from a Decider. Denials
// and invalid tokens are responses with allowed=false, never errors.
type Server struct {
	authzv1.UnimplementedAuthzServiceServer

	d       Decider
	log     *slog.Logger
	maxBody int64
}

var _ authzv1.AuthzServiceServer = (*Server)(nil)

// New returns a Server answering from d.
func New(d Decider, opts Options) (*Server, error) {
	if d == nil {
		return nil, errors.New("authz/server: a decider is required")
	}
	s := &Server{d: d, log: opts.Logger, maxBody: opts.MaxBodyBytes}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	return s, nil
}

// Register registers the AuthzService on a gRPC server.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	authzv1.RegisterAuthzServiceServer(g, s)
}

// ValidateToken implements authzv1.AuthzServiceServer.
func (s *Server) ValidateToken(ctx context.Context, req *authzv1.ValidateTokenRequest) (*authzv1.ValidateTokenResponse, error) {
	return s.validateToken(ctx, sourceGRPC, req), nil
}

// Authorize implements authzv1.AuthzServiceServer.
func (s *Server) Authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	resp, fail := s.authorize(ctx, sourceGRPC, req)
	if fail != nil {
		return nil, fail.grpcStatus().Err()
	}
	return resp, nil
}

func (s *Server) validateToken(ctx context.Context, source string, req *authzv1.ValidateTokenRequest) *authzv1.ValidateTokenResponse {
	return tokenDecisionOf(validate(ctx, s.d, source, engine.CredentialOf(req.GetToken())), false).Proto()
}

func (s *Server) authorize(ctx context.Context, source string, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, *apiError) {
	d, fail := s.decide(ctx, source, req, engine.CredentialOf(req.GetToken()))
	if fail != nil {
		return nil, fail
	}
	return d.Proto(), nil
}

// decide is authorize's decision on cred (the request's token, or the
// HTTP request's credential headers), asked through source, before it
// becomes an AuthorizeResponse.
func (s *Server) decide(ctx context.Context, source string, req *authzv1.AuthorizeRequest, cred engine.Credential) (authz.Decision, *apiError) {
	areq := authz.AuthorizeRequestFromProto(req)
	in, err := inputOf(areq)
	if err != nil {
		return authz.Decision{}, apiErrorOf(err, reason.InputInvalid)
	}
	res, err := s.d.Decide(ctx, engine.Request{Credential: cred, Input: in, Source: source})
	if err != nil {
		fail := apiErrorOf(err, reason.PolicyError)
		// The wrapped engine error is left out: evaluation errors may
		// quote input values, and claim values never go to logs.
		s.log.ErrorContext(ctx, "no decision", "reason", fail.code, "detail", fail.msg,
			"decision_id", res.Decision.DecisionID, "action", in.Action)
		return authz.Decision{}, fail
	}
	return decisionOf(res, false), nil
}

// apiError is a request the server could not decide, with the reason code
// and a message safe to return to the caller.
type apiError struct {
	code reason.Code
	msg  string
}

// apiErrorOf takes the code and the caller-safe message of a
// *reason.Error, or def and a generic message for any other error.
func apiErrorOf(err error, def reason.Code) *apiError {
	var re *reason.Error
	if errors.As(err, &re) {
		return &apiError{code: re.Code, msg: re.Msg}
	}
	return &apiError{code: def, msg: "no decision could be reached"}
}

func (e *apiError) Error() string { return string(e.code) + ": " + e.msg }

// edgeStatus is the gRPC code and HTTP status of an apiError of each code
// but the engine's own failures: InvalidArgument and 400 for a malformed
// request; FailedPrecondition and 422 for a well-formed one the policy
// cannot answer.
var edgeStatus = map[reason.Code]struct {
	grpc codes.Code
	http int
}{
	reason.InputInvalid:    {codes.InvalidArgument, http.StatusBadRequest},
	reason.PlanUnsupported: {codes.FailedPrecondition, http.StatusUnprocessableEntity},
}

// grpcCode is Internal for an engine that answered but could not decide
// (policy-error: an evaluation error or timeout). Unavailable is left to
// what it means to clients, a sidecar that cannot be reached, the one
// case a fail-open client lets through: an evaluation error must be a
// denial in every fail mode.
func (e *apiError) grpcCode() codes.Code {
	if s, ok := edgeStatus[e.code]; ok {
		return s.grpc
	}
	return codes.Internal
}

// httpStatus is 500 when the engine could not decide, never 503
// (unreachable), for the same reason.
func (e *apiError) httpStatus() int {
	if s, ok := edgeStatus[e.code]; ok {
		return s.http
	}
	return http.StatusInternalServerError
}

func (e *apiError) grpcStatus() *status.Status {
	st := status.New(e.grpcCode(), e.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: string(e.code), Domain: authz.ErrorDomain})
	if err != nil {
		return st
	}
	return withInfo
}
