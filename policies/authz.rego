# METADATA
# title: Default svc authorization policy
# description: |
#   Role-based access control with tenant isolation and plan-gated actions.
#   allow decides; deny_reasons explains every denial with stable strings.
#
#   To adapt it, edit the three tables below. To add a condition, add it to
#   allow AND add the matching `explained contains "<reason>" if ...` rule:
#   the fixtures and the engine's tests check that the two agree (every
#   denial has a reason, no allowed request has one).
package svc.authz

# ---------------------------------------------------------------------------
# Tables to adapt
# ---------------------------------------------------------------------------

# role_permissions maps a role to the resources it may act on and, for each
# resource, the verbs it may use. "*" as a resource or a verb matches any.
# A user holding several roles gets the union of their permissions; a role
# missing from this table grants nothing.
role_permissions := {
	# Read-only access to every resource.
	"viewer": {"*": {"read"}},
	# Day-to-day work: read, create and change, but never delete.
	"editor": {"*": {"read", "create", "update"}},
	# Billing staff: invoices in full, reports read and export, home read.
	"billing": {
		"invoices": {"*"},
		"reports": {"read", "export"}, "home": {"read"},
	},
	# Everything, deletes included.
	"admin": {"*": {"*"}},
}

# plan_gates lists the actions only some plans include, with the lowest plan
# that includes them. Actions not listed are available on every plan.
plan_gates := {
	"reports:export": "enterprise",
	"audit:read": "enterprise",
	"webhooks:create": "team",
}

# plan_rank orders the plans: a plan includes everything of the plans ranked
# below it. A tenant whose plan is missing or unknown has no gated action.
plan_rank := {"free": 0, "team": 1, "enterprise": 2}

# ---------------------------------------------------------------------------
# Decision
# ---------------------------------------------------------------------------

default allow := false

# allow is the hot path: a handful of lookups, no helper that is only
# needed to explain a denial.
allow if {
	# Tenant isolation: caller, resource and deployment share one tenant.
	tenant := input.user.tenant_id
	tenant != ""
	input.resource.tenant == tenant
	input.tenant.id == tenant

	# "<resource>:<verb>", both lowercase words; never a wildcard. The
	# pattern is action_pattern, written out to save a rule lookup.
	action := input.action
	regex.match(`^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`, action)
	[resource, verb] := split(action, ":")

	# Some role of the caller grants the verb on the resource. Most grants
	# name a verb on every resource ("*"), so that is tried first.
	some role in roles
	some r in ["*", resource]
	some v in [verb, "*"]
	v in role_permissions[role][r]

	# The tenant's plan includes the action. A function of the action
	# already at hand costs the evaluator less than a rule reading input.
	not plan_gated(action)
}

# deny_reasons is empty when allowed; otherwise it lists every reason found,
# or "policy-denied" should a condition of allow have no reason yet.
deny_reasons := set() if {
	# A comparison, not a bare reference: the evaluator allocates less.
	allow == true
} else := explained if {
	count(explained) > 0
} else := {"policy-denied"}

# ---------------------------------------------------------------------------
# Reasons (evaluated only for denied requests)
# ---------------------------------------------------------------------------

explained contains "tenant-missing" if not user_tenant

explained contains "tenant-mismatch" if {
	tenant := user_tenant
	not same_tenant(tenant)
}

explained contains "action-malformed" if not valid_action

explained contains "no-role" if count(valid_roles) == 0

explained contains reason if {
	valid_action
	[resource, verb] := split(input.action, ":")
	count(valid_roles) > 0
	not granted(resource, verb)
	reason := sprintf("role-forbidden: %s cannot %s", [concat(",", sort(valid_roles)), input.action])
}

explained contains reason if {
	plan_gated(input.action)
	reason := concat(" ", ["plan-required:", plan_gates[input.action]])
}

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

action_pattern := `^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`

# valid_action is a rule of its own so that `not valid_action` also holds
# when input.action is missing: negating the regex.match call inline would
# fail on the missing value instead.
valid_action if regex.match(action_pattern, input.action)

# roles lists the caller's roles: input.user.role and input.user.roles,
# either of which may be missing. Usually role is the first of roles, and
# roles is all there is to read.
roles := input.user.roles if {
	input.user.roles[0] == input.user.role
} else := array.concat(
	[role | role := input.user.role],
	[role | some role in input.user.roles],
)

# valid_roles is the set of the caller's roles that are non-empty strings.
valid_roles contains role if {
	some role in roles
	is_string(role)
	role != ""
}

granted(resource, verb) if {
	some role in roles
	some r in ["*", resource]
	some v in [verb, "*"]
	v in role_permissions[role][r]
}

# plan_gated holds when the tenant's plan does not include action.
plan_gated(action) if {
	required := plan_gates[action]
	not plan_includes(required)
}

# plan_includes is a function rather than an inline comparison so that an
# unknown plan (no rank) counts as not including the action.
plan_includes(required) if plan_rank[input.tenant.plan] >= plan_rank[required]

user_tenant := input.user.tenant_id if input.user.tenant_id != ""

same_tenant(tenant) if {
	input.resource.tenant == tenant
	input.tenant.id == tenant
}
