package authz

import (
	"net/http"
	"strings"

	"github.com/svc-dev/svc/wire"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/reason"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the reason code that
// accompanies every error status of the svc.authz.v1 service.
const ErrorDomain = "svc.authz.v1"

// Paths of the local HTTP JSON API. Bodies are the protojson form of the
// svc.authz.v1 messages; responses use the proto field names
// ("deny_reasons", "decision_id") and list every field.
const (
	PathValidateToken = "/v1/validate-token"
	PathAuthorize     = "/v1/authorize"
	PathPlanResources = "/v1/plan-resources"
)

// ErrorBody is the JSON body of every error response of the local HTTP
// API (package wire).
type ErrorBody = wire.ErrorBody

// ErrorDetail is the error of an ErrorBody: a stable reason code and a
// message that never holds a token, a key or a claim value.
type ErrorDetail = wire.ErrorDetail

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header (scheme case-insensitive, RFC 9110), or "".
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
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
