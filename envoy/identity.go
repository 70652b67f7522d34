package envoy

import (
	"context"
	"log/slog"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/reason"
)

// envoyAudience is the upstream of a Check: the destination's principal
// (the upstream's identity in a mesh, such as a SPIFFE ID) when Envoy
// reports one, else the request's host.
func envoyAudience(req *authv3.CheckRequest, pr proxyRequest) string {
	if p := req.GetAttributes().GetDestination().GetPrincipal(); p != "" {
		return p
	}
	return pr.host
}

// identityToken mints the x-svc-identity token of an allowed decision,
// or returns "" when it has none: development mode's anonymous caller is
// nobody to vouch for, and a token that cannot be signed is left out (an
// upstream that requires one refuses the request) and logged.
func (s *Server) identityToken(ctx context.Context, cred engine.Credential, res engine.Result, aud string) string {
	if res.Token.Reason == reason.DevAnonymous {
		return ""
	}
	subject, tenant := caller(res)
	presented := cred.APIKey
	if presented == "" {
		presented = cred.Bearer
	}
	tok, err := s.identity.Token(presented, idtoken.Claims{
		Subject:    subject,
		TenantID:   tenant,
		Roles:      res.Input.User.Roles,
		Kind:       res.Token.Kind,
		Audience:   aud,
		DecisionID: res.Decision.DecisionID,
	})
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "identity token not signed; the request goes upstream without one",
			slog.String("decision_id", res.Decision.DecisionID), slog.String("err", err.Error()))
		return ""
	}
	return tok
}
