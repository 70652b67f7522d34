package svc.authz

default allow := false

allow if {
	input.request.method == "GET"
	input.request.canonical_path == "/api/orders"
}

allow if input.action in {"invoices:read", "invoices:list"}

allow if glob.match("/api/public/*", ["/"], input.request.canonical_path)

allow if {
	startswith(input.request.canonical_path, "/api/reports/")
	"reporter" in input.user.roles
}

allow if {
	x := input.action
	x == "users:read"
}

allow if input.user.role == "admin"

# Beside the six rules above, which the index selects, these two are
# evaluated for every query.
allow if {
	[service, verb] := split(input.action, ":")
	service == "users"
	verb == "list"
}

allow if regex.match(`^/api/v[0-9]+/health$`, input.request.canonical_path)

deny_reasons := set() if {
	allow == true
} else := {"policy-denied"}

# Eight rules none of which the index can use.
explained contains "a" if lower(input.action) == "a"

explained contains "b" if lower(input.action) == "b"

explained contains "c" if lower(input.action) == "c"

explained contains "d" if lower(input.action) == "d"

explained contains "e" if lower(input.action) == "e"

explained contains "f" if lower(input.action) == "f"

explained contains "g" if lower(input.action) == "g"

explained contains "h" if count(input.user.roles) == 0
