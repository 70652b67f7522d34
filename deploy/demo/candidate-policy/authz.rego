# METADATA
# title: Candidate policy of the local mesh demo
# description: |
#   The change under review: invoices hold payment details, so only billing
#   staff and admins may see them. Viewers and editors keep every other
#   read they have today. Everything else decides as the default policy
#   does for the demo's roles (viewer, editor, billing, admin) and plans.
#
#   Try it on live traffic before enforcing it:
#     core policy dry-run deploy/demo/candidate-policy --duration 1m
#   The demo's traffic generator reads invoices as a viewer every few
#   seconds, so the report shows those reads as simulated denies with the
#   reason "restricted-resource: invoices".
package svc.authz

# grants maps a role to "<resource>:<verb>" patterns; "*" stands for any
# resource or verb.
grants := {
	"viewer": {"*:read"},
	"editor": {"*:read", "*:create", "*:update"},
	"billing": {"invoices:*", "reports:read", "reports:export", "home:read"},
	"admin": {"*:*"},
}

# restricted lists resources only some roles may touch, whatever their
# grants say.
restricted := {"invoices": {"billing", "admin"}}

# plan_needed gives the lowest plan that includes a gated action.
plan_needed := {"reports:export": 2, "audit:read": 2, "webhooks:create": 1}

plan_level := {"free": 0, "team": 1, "enterprise": 2}

default allow := false

allow if count(problems) == 0

deny_reasons := problems

caller_roles contains r if {
	r := input.user.role
	is_string(r)
	r != ""
}

caller_roles contains r if {
	some r in input.user.roles
	is_string(r)
	r != ""
}

parts := split(input.action, ":") if regex.match(`^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`, input.action)

permitted if {
	some role in caller_roles
	some pattern in grants[role]
	[res, verb] := split(pattern, ":")
	res in {"*", parts[0]}
	verb in {"*", parts[1]}
}

problems contains "tenant-missing" if object.get(input.user, "tenant_id", "") == ""

problems contains "tenant-mismatch" if {
	tenant := object.get(input.user, "tenant_id", "")
	tenant != ""
	not {tenant} == {input.resource.tenant, input.tenant.id}
}

problems contains "action-malformed" if not parts

problems contains "no-role" if count(caller_roles) == 0

problems contains msg if {
	parts
	count(caller_roles) > 0
	not permitted
	msg := sprintf("role-forbidden: %s cannot %s", [concat(",", sort(caller_roles)), input.action])
}

problems contains msg if {
	parts
	permitted
	allowed_roles := restricted[parts[0]]
	count(caller_roles & allowed_roles) == 0
	msg := sprintf("restricted-resource: %s", [parts[0]])
}

problems contains msg if {
	needed := plan_needed[input.action]
	not object.get(plan_level, object.get(input.tenant, "plan", ""), -1) >= needed
	msg := sprintf("plan-required: %s", [[p | some p, l in plan_level; l == needed][0]])
}
