# METADATA
# title: ABAC on the resource owner
# description: |
#   Users act on their own resources: the owner of a resource is the user id
#   in its path (/api/users/{owner}/...). The owner may read and change it,
#   once their e-mail address is verified (claim email_verified); auditors
#   read everything of the tenant, admins do everything. allow decides;
#   deny_reasons explains every denial.
package svc.authz

# ---------------------------------------------------------------------------
# Tables to adapt
# ---------------------------------------------------------------------------

# owner_path finds the owner in the request's canonical path (dot
# segments resolved, "//" merged, lower-cased unless
# envoy.routes_case_sensitive, format suffix cut): its first group is the
# owner's user id. The path as sent would name the owner of
# "/api/users/alice/../bob/doc" alice. Owners are compared as the
# canonical path spells them: with case-folded routes, ids holding
# upper-case letters own nothing, so set envoy.routes_case_sensitive
# when user ids are case-sensitive.
owner_path := `^/api/users/([^/]+)(/|$)`

# owner_verbs are what owners may do with their own resources.
owner_verbs := {"read", "create", "update", "delete"}

# read_verbs need no verified e-mail address.
read_verbs := {"read"}

# tenant_roles act on every user's resources in the tenant, owner or not.
tenant_roles := {
	"auditor": {"read"},
	"admin": {"*"},
}

# ---------------------------------------------------------------------------
# Decision
# ---------------------------------------------------------------------------

default allow := false

# The owner, on their own resource.
allow if {
	same_tenant(input.user.tenant_id)
	input.user.id != ""
	owner == input.user.id
	owner_verbs[verb]
	verified_for(verb)
}

# A tenant-wide role.
allow if {
	same_tenant(input.user.tenant_id)
	some role in roles
	some v in [verb, "*"]
	tenant_roles[role][v]
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

explained contains "action-malformed" if not verb

explained contains "owner-unknown" if {
	not owner
	not tenant_granted
}

explained contains reason if {
	owner != input.user.id
	not tenant_granted
	reason := sprintf("not-owner: %s belongs to another user", [input.action])
}

explained contains "email-unverified" if {
	owner == input.user.id
	owner_verbs[verb]
	not verified_for(verb)
	not tenant_granted
}

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

# verb is the verb of a well-formed "<resource>:<verb>" action.
verb := split(input.action, ":")[1] if regex.match(`^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`, input.action)

# owner is the user id in the request path, when there is one.
owner := regex.find_all_string_submatch_n(owner_path, input.request.canonical_path, 1)[0][1]

roles contains role if {
	some role in array.concat([r | r := input.user.role], [r | some r in input.user.roles])
	is_string(role)
	role != ""
}

tenant_granted if {
	some role in roles
	some v in [verb, "*"]
	tenant_roles[role][v]
}

verified_for(v) if read_verbs[v]

verified_for(_) if input.user.claims.email_verified == true

user_tenant := input.user.tenant_id if input.user.tenant_id != ""

same_tenant(tenant) if {
	tenant != ""
	input.resource.tenant == tenant
	input.tenant.id == tenant
}
