package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/fixture"
	"github.com/svc-dev/svc/plan"
)

// planFlags are the flags of `policy plan-resources`.
type planFlags struct {
	action, resourceType, dialect, input, columns string
}

func (a *app) policyPlanCommand() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan-resources <policy-dir>",
		Short: "Print the resource plan of the policy: which resources a caller may act on",
		Long: `Partially evaluates the policy in <policy-dir> for a caller (--input, the
policy input without resource) performing --action on resources of
--resource-type, the resource's id, tenant and attributes left unknown, and
prints the plan the sidecar's PlanResources answers: always_allowed,
always_denied, or conditional with its condition and its SQL WHERE clause
with bind parameters in --dialect:

  core policy plan-resources examples/policies/resource-attributes --action orders:read \
    --input '{"user":{"id":"alice","roles":["member"],"tenant_id":"acme","claims":{}},"tenant":{"id":"acme","plan":"team"}}'

--columns names columns as list_filter.columns does ("field=column,…").
--output json prints {kind, condition, sql: {where, params},
policy_revision}. A policy construct a plan cannot express exits 1 with
plan-unsupported, naming the rule and line.`,
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error { return a.runPlan(cmd, argv[0], f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.action, "action", "", "the action, `resource:verb` (required)")
	fl.StringVar(&f.resourceType, "resource-type", "", "the `type` of the resources listed (default: the action's resource)")
	fl.StringVar(&f.dialect, "dialect", string(plan.Postgres), "SQL `dialect`: postgres, sqlite or mysql")
	fl.StringVar(&f.input, "input", "{}", "the caller's input without resource: inline `json`, or @path to read a file")
	fl.StringVar(&f.columns, "columns", "", "columns of the fields, `field=column,…` (as list_filter.columns)")
	return cmd
}

// planOutput is the JSON of `policy plan-resources`.
type planOutput struct {
	Kind      plan.Kind       `json:"kind"`
	Condition *plan.Condition `json:"condition,omitempty"`
	SQL       plan.SQL        `json:"sql"`
	Revision  string          `json:"policy_revision"`
}

func (a *app) runPlan(cmd *cobra.Command, dir string, f planFlags) error {
	a.useJSON()
	if f.action == "" {
		return usageError("--action is required")
	}
	dialect, err := plan.ParseDialect(f.dialect)
	if err != nil {
		return usageError("invalid --dialect %q: want postgres, sqlite or mysql", f.dialect)
	}
	cols, err := parseColumns(f.columns)
	if err != nil {
		return err
	}
	if err := checkPolicyDir(dir); err != nil {
		return err
	}
	name, raw, err := readInput("input", f.input)
	if err != nil {
		return err
	}
	decoded, err := fixture.DecodeJSON(name, raw)
	if err != nil {
		return inputError(err)
	}
	input, ok := decoded.(map[string]any)
	if !ok {
		return inputError(fmt.Errorf("%s: the input must be a JSON object", name))
	}
	if _, has := input["resource"]; has {
		return usageError("the input holds resource, which is what the plan leaves open: leave it out and give --resource-type")
	}
	typ := f.resourceType
	if typ == "" {
		typ, _, _ = strings.Cut(f.action, ":")
	}
	set, err := a.loadPolicy(dir)
	if err != nil {
		return err
	}
	p, _, err := fixture.CheckPlan(cmd.Context(), set, input, f.action, typ, nil)
	if err != nil {
		return checkFailed(err, false)
	}
	sql, err := plan.Render(p.Kind, p.Condition, dialect, cols)
	if err != nil {
		return checkFailed(err, false)
	}
	out := planOutput{Kind: p.Kind, Condition: p.Condition, SQL: sql, Revision: p.Revision}
	if a.json {
		return a.writeJSON(out)
	}
	fmt.Fprintf(a.stdout, "kind: %s\n", out.Kind)
	if out.Condition != nil {
		fmt.Fprintf(a.stdout, "condition: %s\n", out.Condition)
	}
	params, _ := json.Marshal(out.SQL.Params)
	fmt.Fprintf(a.stdout, "where: %s\nparams: %s\n", out.SQL.Where, params)
	return nil
}

// parseColumns reads --columns.
func parseColumns(s string) (plan.Columns, error) {
	cols := plan.Columns{}
	if s == "" {
		return cols, nil
	}
	for _, pair := range strings.Split(s, ",") {
		field, col, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, usageError("invalid --columns %q: want field=column pairs separated by commas", pair)
		}
		cols[strings.TrimSpace(field)] = strings.TrimSpace(col)
	}
	if err := cols.Validate(); err != nil {
		return nil, usageError("invalid --columns: %v", err)
	}
	return cols, nil
}
