package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// maxNameBytes bounds an action, a resource type and a dialect name.
const maxNameBytes = 1024

// planResult is the answer of PlanResources, in the field names of the
// sidecar's /v1/plan-resources.
type planResult struct {
	Kind           plan.Kind       `json:"kind"`
	Condition      *plan.Condition `json:"condition,omitempty"`
	SQL            plan.SQL        `json:"sql"`
	DecisionID     string          `json:"decision_id,omitempty"`
	Reason         reason.Code     `json:"reason,omitempty"`
	Subject        string          `json:"subject,omitempty"`
	TenantID       string          `json:"tenant_id,omitempty"`
	PolicyRevision string          `json:"policy_revision,omitempty"`
	Message        string          `json:"message,omitempty"`
}

// planJSON answers PlanResources as JSON: which resources of
// resourceType the bearer of token may perform action on, with the SQL in
// dialect ("" is postgres). A refused credential plans always_denied
// with the token's failure as its reason; a policy the plan cannot
// express is the error plan-unsupported.
func planJSON(h uint64, token, action, resourceType, dialect string) []byte {
	in, ok := lookup(h)
	if !ok {
		return errorJSON(EngineClosed, "the engine is closed")
	}
	if action == "" {
		return errorJSON(reason.InputInvalid, "resource plan: no action")
	}
	d, err := plan.ParseDialect(dialect)
	if err != nil {
		return errorJSON(reason.InputInvalid, err.Error())
	}
	res, err := in.eng.PlanResources(context.Background(), engine.CredentialOf(token), action, resourceType, d)
	if err != nil {
		return errorJSON(reason.Of(err, reason.PolicyError), err.Error())
	}
	out := planResult{
		Kind: res.Plan.Kind, SQL: res.Plan.SQL, DecisionID: res.Decision.DecisionID,
		Reason: res.Decision.Reason, PolicyRevision: res.Decision.Revision,
	}
	if out.Kind == plan.Conditional {
		out.Condition = res.Plan.Condition
	}
	if res.Token.Allowed {
		out.Subject, out.TenantID = res.Token.Subject, res.Token.TenantID
	} else {
		out.Reason, out.Message = res.Token.Reason, res.Token.Message
	}
	if out.SQL.Params == nil {
		out.SQL.Params = []any{}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return errorJSON(reason.InputInvalid, "the plan cannot be encoded: "+err.Error())
	}
	return b
}

// svc_plan_resources asks which resources of type resource_type the
// bearer of token (a bearer token or an API key, svck_...) may perform
// action on. It answers the plan as JSON ({"kind", "condition", "sql":
// {"where", "params"}, "decision_id", "reason", ...}, as the sidecar's
// /v1/plan-resources does), or a JSON error document (see answer for buf,
// cap and big). dialect is "postgres" (also when empty), "sqlite" or
// "mysql".
//
//export svc_plan_resources
func svc_plan_resources(h C.uint64_t, token *C.char, tokenLen C.size_t, action *C.char, actionLen C.size_t,
	resourceType *C.char, resourceTypeLen C.size_t, dialect *C.char, dialectLen C.size_t,
	buf *C.char, capacity C.size_t, big **C.char) (n C.size_t) {
	defer recovered("svc_plan_resources", func(doc []byte) { n = answer(doc, buf, capacity, big) })
	var names [3]string
	for i, a := range [...]struct {
		p *C.char
		n C.size_t
	}{{action, actionLen}, {resourceType, resourceTypeLen}, {dialect, dialectLen}} {
		s, err := goString(a.p, a.n, maxNameBytes)
		if err != nil {
			var ae *apiError
			errors.As(err, &ae)
			return answer(errorJSON(ae.Reason, ae.Message), buf, capacity, big)
		}
		names[i] = s
	}
	return answer(planJSON(uint64(h), tokenString(token, tokenLen), names[0], names[1], names[2]), buf, capacity, big)
}
