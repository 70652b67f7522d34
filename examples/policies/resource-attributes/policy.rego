# METADATA
# title: ABAC on resource attributes
# description: |
#   The application sends what it knows about the resource as
#   input.resource.attributes (owner, status, department). The owner of an
#   order may read and update it; an archived order is read-only, for its
#   owner too; members of the order's department may read it; admins do
#   everything except change an archived order. allow decides; deny_reasons
#   explains every denial.
package svc.authz

# ---------------------------------------------------------------------------
# Tables to adapt
# ---------------------------------------------------------------------------

# resource_types are the resources this policy decides on.
resource_types := {"orders"}

# owner_verbs are what owners may do with their own resources.
owner_verbs := {"read", "update"}

# read_verbs change nothing: an archived resource allows only these.
read_verbs := {"read"}

# department_verbs are what members of the resource's department may do.
department_verbs := {"read"}

# admin_roles act on every resource of the tenant.
admin_roles := {"admin"}

# ---------------------------------------------------------------------------
# Decision
# ---------------------------------------------------------------------------

default allow := false

# The owner, on their own resource.
allow if {
	applicable
	owner == input.user.id
	owner_verbs[verb]
	writable_for(verb)
}

# A member of the resource's department.
allow if {
	applicable
	department_verbs[verb]
	department_member
}

# An admin of the tenant.
allow if {
	applicable
	admin
	writable_for(verb)
}

deny_reasons := set() if {
	allow
} else := explained if {
	count(explained) > 0
} else := {"policy-denied"}

# ---------------------------------------------------------------------------
# Reasons
# ---------------------------------------------------------------------------

explained contains "tenant-mismatch" if not same_tenant

explained contains "action-malformed" if not verb

explained contains "resource-type-unknown" if {
	verb
	not resource_types[resource_type]
}

explained contains "owner-unknown" if {
	not owner
	not admin
	not department_member
}

explained contains reason if {
	owner != input.user.id
	not admin
	not department_granted
	reason := sprintf("not-owner: %s belongs to another user", [input.action])
}

explained contains reason if {
	owner == input.user.id
	verb
	not owner_verbs[verb]
	reason := sprintf("verb-forbidden: owners cannot %s", [input.action])
}

explained contains "archived-read-only" if {
	archived
	verb
	not read_verbs[verb]
}

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

attrs := input.resource.attributes

# verb is the verb of a well-formed "<resource>:<verb>" action.
verb := split(input.action, ":")[1] if regex.match(`^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`, input.action)

resource_type := split(input.action, ":")[0]

applicable if {
	same_tenant
	resource_types[resource_type]
}

# owner is the owner attribute, when it is set and not empty. Written as
# comparisons only, so that a resource plan can turn it into SQL
# (`core policy plan-resources`): a type check such as is_string has no
# column equivalent.
owner := attrs.owner if attrs.owner != ""

archived if attrs.status == "archived"

writable_for(v) if read_verbs[v]

writable_for(v) if {
	not read_verbs[v]
	not archived
}

department_member if {
	attrs.department != ""
	input.user.claims.department == attrs.department
}

department_granted if {
	department_member
	department_verbs[verb]
}

admin if {
	some role in array.concat([r | r := input.user.role], [r | some r in input.user.roles])
	admin_roles[role]
}

same_tenant if {
	input.user.tenant_id != ""
	input.resource.tenant == input.user.tenant_id
	input.tenant.id == input.user.tenant_id
}
