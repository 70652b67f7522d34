package config

import (
	"strings"

	"github.com/svc-dev/svc/plan"
)

// ListFilter is the [list_filter] table: how resource plans
// (PlanResources) render as SQL.
type ListFilter struct {
	// Columns maps a plan field ("id", "tenant", "attributes.<name>") to
	// the column that holds it, e.g. {"attributes.owner": "owner_id",
	// "tenant": "tenant_id"}; a column may be qualified by its table
	// ("orders.owner_id"). A field not named is the column of the same
	// name: id, tenant, and the attribute's own name. A table, so set
	// in the file only.
	Columns plan.Columns `toml:"columns" yaml:"columns"`
}

func (v *validator) listFilter() {
	if err := v.c.ListFilter.Columns.Validate(); err != nil {
		v.fail("list_filter.columns", "%s", strings.TrimPrefix(err.Error(), "plan: "))
	}
}
