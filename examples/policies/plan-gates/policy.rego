# METADATA
# title: Plan gates on routes
# description: |
#   Every signed-in user of the tenant may use the API, except the routes
#   that the tenant's plan does not include. Gates match the request the
#   proxy forwarded (input.request: method and canonical_path); a request
#   without one is gated by its action. allow decides; deny_reasons
#   explains.
package svc.authz

# ---------------------------------------------------------------------------
# Tables to adapt
# ---------------------------------------------------------------------------

# route_gates lists the routes only some plans include: a path prefix (a
# whole segment: "/api/reports" gates "/api/reports/7" but not
# "/api/reportsx"), the methods it gates ("*" for all) and the lowest plan
# that includes it. When several gates match, every one must be met.
# Prefixes are written as input.request.canonical_path spells paths: in
# lower case (unless envoy.routes_case_sensitive is set) and without a
# format suffix, so that "/API/reports/Export.json" meets the export gate
# as the upstream's router does.
route_gates := [
	{"prefix": "/api/reports/export", "methods": {"*"}, "plan": "enterprise"},
	{"prefix": "/api/audit", "methods": {"*"}, "plan": "enterprise"},
	{"prefix": "/api/webhooks", "methods": {"POST", "PUT", "PATCH", "DELETE"}, "plan": "team"},
	{"prefix": "/api/sso", "methods": {"*"}, "plan": "enterprise"},
]

# action_gates gate the same features for callers that send no request
# (an application calling Authorize with only an action).
action_gates := {
	"reports:export": "enterprise",
	"audit:read": "enterprise",
	"webhooks:create": "team",
	"webhooks:update": "team",
	"webhooks:delete": "team",
}

# plan_rank orders the plans: a plan includes what the plans below it do.
# A tenant whose plan is missing or unknown gets no gated route.
plan_rank := {"free": 0, "team": 1, "enterprise": 2}

# ---------------------------------------------------------------------------
# Decision
# ---------------------------------------------------------------------------

default allow := false

allow if {
	tenant := input.user.tenant_id
	tenant != ""
	input.resource.tenant == tenant
	input.tenant.id == tenant
	count(missing_plans) == 0
}

deny_reasons := set() if {
	allow
} else := explained if {
	count(explained) > 0
} else := {"policy-denied"}

# ---------------------------------------------------------------------------
# Reasons
# ---------------------------------------------------------------------------

explained contains "tenant-missing" if not user_tenant

explained contains "tenant-mismatch" if {
	tenant := user_tenant
	not same_tenant(tenant)
}

explained contains reason if {
	some plan in missing_plans
	reason := concat(" ", ["plan-required:", plan])
}

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

# request_path is the path the gates compare: the canonical one, which
# every spelling an upstream serves as the same route shares (case,
# format suffix, percent-escapes, "//", "x/../"). input.request.path is
# the path as sent, and comparing it would let "/api/reports/Export"
# past the export gate.
request_path := input.request.canonical_path

# required_plans are the plans the gates matching this request ask for.
required_plans contains gate.plan if {
	is_string(request_path)
	some gate in route_gates
	route_matches(gate.prefix, request_path)
	method_matches(gate.methods)
}

required_plans contains plan if {
	not request_path
	plan := action_gates[input.action]
}

missing_plans contains plan if {
	some plan in required_plans
	not plan_includes(plan)
}

route_matches(prefix, path) if path == prefix

route_matches(prefix, path) if startswith(path, concat("", [prefix, "/"]))

method_matches(methods) if methods["*"]

method_matches(methods) if methods[upper(input.request.method)]

plan_includes(required) if plan_rank[input.tenant.plan] >= plan_rank[required]

user_tenant := input.user.tenant_id if input.user.tenant_id != ""

same_tenant(tenant) if {
	input.resource.tenant == tenant
	input.tenant.id == tenant
}
