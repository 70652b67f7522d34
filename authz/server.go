package authz

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/reason"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the reason code that
// accompanies every error status of the svc.authz.v1 service.
const ErrorDomain = "svc.authz.v1"

// DefaultMaxBodyBytes bounds a request body of the local HTTP API.
const DefaultMaxBodyBytes = 1 << 20

// ServerOptions configures a Server. Every field is optional.
type ServerOptions struct {
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

// NewServer returns a Server answering from d.
func NewServer(d Decider, opts ServerOptions) (*Server, error) {
	if d == nil {
		return nil, errors.New("authz: server needs a decider")
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
	return s.validateToken(engine.WithSource(ctx, "grpc"), req), nil
}

// Authorize implements authzv1.AuthzServiceServer.
func (s *Server) Authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	resp, fail := s.authorize(engine.WithSource(ctx, "grpc"), req)
	if fail != nil {
		return nil, fail.grpcStatus().Err()
	}
	return resp, nil
}

func (s *Server) validateToken(ctx context.Context, req *authzv1.ValidateTokenRequest) *authzv1.ValidateTokenResponse {
	return tokenResponseOf(s.d.ValidateToken(ctx, req.GetToken()))
}

func (s *Server) authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, *apiError) {
	areq := authorizeRequestOf(req)
	in, err := inputOf(areq)
	if err != nil {
		return nil, apiErrorOf(err, reason.InputInvalid)
	}
	res, err := s.d.Authorize(ctx, areq.Token, in)
	if err != nil {
		fail := apiErrorOf(err, reason.PolicyError)
		// The wrapped engine error is left out: evaluation errors may
		// quote input values, and claim values never go to logs.
		s.log.ErrorContext(ctx, "no decision", "reason", fail.code, "detail", fail.msg,
			"decision_id", res.Decision.DecisionID, "action", in.Action)
		return nil, fail
	}
	return authorizeResponseOf(decisionOf(res, false)), nil
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

// grpcCode is InvalidArgument for a malformed request and Internal for an
// engine that answered but could not decide (policy-error: an evaluation
// error or timeout). Unavailable is left to what it means to clients, a
// sidecar that cannot be reached, the one case a fail-open client lets
// through: an evaluation error must be a denial in every fail mode.
func (e *apiError) grpcCode() codes.Code {
	if e.code == reason.InputInvalid {
		return codes.InvalidArgument
	}
	return codes.Internal
}

// httpStatus is 400 for a malformed request and 500 when the engine could
// not decide, never 503 (unreachable), for the same reason.
func (e *apiError) httpStatus() int {
	if e.code == reason.InputInvalid {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func (e *apiError) grpcStatus() *status.Status {
	st := status.New(e.grpcCode(), e.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: string(e.code), Domain: ErrorDomain})
	if err != nil {
		return st
	}
	return withInfo
}

// reasonOfStatus returns the reason code an error status of this service
// carries in its ErrorInfo detail, or def.
func reasonOfStatus(st *status.Status, def reason.Code) reason.Code {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain && info.GetReason() != "" {
			return reason.Code(info.GetReason())
		}
	}
	return def
}
