package authz

import (
	"errors"

	"github.com/svc-dev/svc/reason"
)

// ErrUnavailable is matched (errors.Is) by every error that means no
// decision could be obtained: the sidecar was unreachable or too slow, or
// the engine could not decide.
var ErrUnavailable = errors.New("decision service unavailable")

// UnavailableError reports that no decision could be obtained. A Client in
// FailClosed mode returns it; the middleware answers 503 for it.
type UnavailableError struct {
	// Op is the operation that failed: "validate-token" or "authorize".
	Op string
	// Reason is reason.Unavailable when the decision service could not be
	// reached in time, or the code it answered with (reason.PolicyError
	// when the engine could not decide, reason.DecisionLogUnavailable when
	// its decision log refused to take the decision). The middleware
	// applies the fail mode to reason.Unavailable only: any other code is
	// an answer, refused 503 in both modes.
	Reason reason.Code
	// Err is the underlying transport or engine error.
	Err error
}

// Error implements error. The text never holds a token or a claim value.
func (e *UnavailableError) Error() string {
	s := "authz: " + e.Op + ": " + string(e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable, so that
// errors.Is(err, authz.ErrUnavailable) holds for every UnavailableError.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
