package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// PlanResources implements authzv1.AuthzServiceServer.
func (s *Server) PlanResources(ctx context.Context, req *authzv1.PlanResourcesRequest) (*authzv1.PlanResourcesResponse, error) {
	resp, fail := s.planResources(ctx, sourceGRPC, req, engine.CredentialOf(req.GetToken()))
	if fail != nil {
		return nil, fail.grpcStatus().Err()
	}
	return resp, nil
}

func (s *Server) httpPlanResources(w http.ResponseWriter, r *http.Request) {
	req := &authzv1.PlanResourcesRequest{}
	if !s.readBody(w, r, req) {
		return
	}
	resp, fail := s.planResources(r.Context(), sourceHTTP, req, credentialOf(r, req.GetToken()))
	if fail != nil {
		writeError(w, fail.httpStatus(), fail.code, fail.msg)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

// planResources is the resource plan of cred for req, asked through
// source.
func (s *Server) planResources(ctx context.Context, source string, req *authzv1.PlanResourcesRequest, cred engine.Credential) (*authzv1.PlanResourcesResponse, *apiError) {
	if req.GetAction() == "" {
		return nil, &apiError{code: reason.InputInvalid, msg: "action is required"}
	}
	dialect, err := plan.ParseDialect(req.GetDialect())
	if err != nil {
		return nil, &apiError{code: reason.InputInvalid, msg: strings.TrimPrefix(err.Error(), "plan: ")}
	}
	res, err := s.d.Decide(ctx, engine.Request{
		Scope: engine.ScopePlan, Credential: cred, Source: source, Dialect: dialect,
		Input: engine.Input{Action: req.GetAction(), Resource: policy.Resource{Type: req.GetResourceType()}},
	})
	if err != nil {
		fail := apiErrorOf(err, reason.PolicyError)
		if fail.code != reason.PlanUnsupported && fail.code != reason.InputInvalid {
			s.log.ErrorContext(ctx, "no resource plan", "reason", fail.code, "detail", fail.msg,
				"decision_id", res.Decision.DecisionID, "action", req.GetAction())
		}
		return nil, fail
	}
	return planResponse(res)
}

// planResponse is res as a PlanResourcesResponse.
func planResponse(res engine.Result) (*authzv1.PlanResourcesResponse, *apiError) {
	resp := &authzv1.PlanResourcesResponse{
		Kind:           string(res.Plan.Kind),
		Reason:         string(res.Decision.Reason),
		DecisionId:     res.Decision.DecisionID,
		PolicyRevision: res.Decision.Revision,
		Sql:            &authzv1.SQLFilter{Where: res.Plan.SQL.Where},
	}
	if res.Token.Allowed {
		resp.Subject, resp.TenantId = res.Token.Subject, res.Token.TenantID
	} else {
		resp.Reason, resp.Message = string(res.Token.Reason), res.Token.Message
	}
	params, err := structpb.NewList(res.Plan.SQL.Params)
	if err != nil {
		return nil, &apiError{code: reason.PolicyError, msg: "the plan's parameters could not be encoded"}
	}
	resp.Sql.Params = params
	if res.Plan.Condition != nil {
		raw, err := json.Marshal(res.Plan.Condition)
		if err != nil {
			return nil, &apiError{code: reason.PolicyError, msg: "the plan's condition could not be encoded"}
		}
		resp.Condition = &structpb.Struct{}
		if err := resp.Condition.UnmarshalJSON(raw); err != nil {
			return nil, &apiError{code: reason.PolicyError, msg: "the plan's condition could not be encoded"}
		}
	}
	return resp, nil
}
