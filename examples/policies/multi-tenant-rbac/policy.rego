# METADATA
# title: Multi-tenant RBAC with a support role
# description: |
#   Tenant roles act inside their own tenant only. Platform support staff
#   (role "support", from the platform's own tenant) may read any tenant's
#   resources while they work a ticket (claim support_ticket), and never
#   change anything. allow decides; deny_reasons explains every denial.
package svc.authz

# ---------------------------------------------------------------------------
# Tables to adapt
# ---------------------------------------------------------------------------

# role_permissions maps a tenant role to the resources it may act on and,
# for each, the verbs. "*" matches any resource or verb.
role_permissions := {
	"member": {"*": {"read"}, "comments": {"create"}},
	"manager": {"*": {"read", "create", "update"}},
	"owner": {"*": {"*"}},
}

# support_tenant is the platform's own tenant: the tenant_id in the tokens
# of support staff.
support_tenant := "platform"

# support_verbs are the verbs support may use in a customer's tenant.
support_verbs := {"read"}

# ---------------------------------------------------------------------------
# Decision
# ---------------------------------------------------------------------------

default allow := false

# A tenant's own users: caller, resource and deployment share one tenant.
allow if {
	tenant := input.user.tenant_id
	tenant != ""
	input.resource.tenant == tenant
	input.tenant.id == tenant
	[resource, verb] := parsed_action
	some role in roles
	some r in ["*", resource]
	some v in [verb, "*"]
	role_permissions[role][r][v]
}

# Support staff working a ticket, in any tenant, read only.
allow if {
	support_session
	input.resource.tenant == input.tenant.id
	[_, verb] := parsed_action
	support_verbs[verb]
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

explained contains "action-malformed" if not parsed_action

explained contains "no-role" if count(roles) == 0

# Another tenant's resource, and not support staff.
explained contains "tenant-mismatch" if {
	tenant := user_tenant
	not same_tenant(tenant)
	not is_support
}

explained contains reason if {
	same_tenant(user_tenant)
	[resource, verb] := parsed_action
	count(roles) > 0
	not granted(resource, verb)
	reason := sprintf("role-forbidden: %s cannot %s", [concat(",", sort(roles)), input.action])
}

explained contains "support-ticket-required" if {
	is_support
	not same_tenant(user_tenant)
	not support_ticket
}

explained contains reason if {
	is_support
	not same_tenant(user_tenant)
	[_, verb] := parsed_action
	not support_verbs[verb]
	reason := sprintf("support-read-only: support cannot %s", [input.action])
}

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

parsed_action := split(input.action, ":") if regex.match(`^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`, input.action)

# roles is the set of the caller's non-empty roles (user.role and user.roles).
roles contains role if {
	some role in array.concat([r | r := input.user.role], [r | some r in input.user.roles])
	is_string(role)
	role != ""
}

user_tenant := input.user.tenant_id if input.user.tenant_id != ""

same_tenant(tenant) if {
	input.resource.tenant == tenant
	input.tenant.id == tenant
}

granted(resource, verb) if {
	some role in roles
	some r in ["*", resource]
	some v in [verb, "*"]
	role_permissions[role][r][v]
}

is_support if {
	input.user.tenant_id == support_tenant
	"support" in roles
}

support_ticket if {
	is_string(input.user.claims.support_ticket)
	input.user.claims.support_ticket != ""
}

support_session if {
	is_support
	support_ticket
}
