# A policy that reads input through nested and variable paths, for the
# decision cache's tests: a header found with a variable key, a claim that
# names which field of the resource to check, and a claim whose exact JSON
# form ends up in a reason.
package svc.authz

default allow := false

allow if {
	allow_header
	level >= 2
	input.resource[input.user.claims.field] == "ok"
}

# allow_header holds when some header x-allow-* says yes: the key is a
# variable, so the whole header map decides.
allow_header if {
	some name, value in input.request.headers
	startswith(name, "x-allow-")
	lower(value) == "yes"
}

level := input.user.claims.level if is_number(input.user.claims.level)

else := 0

deny_reasons := set() if allow

else := {r | some r in explained}

explained contains "no-allow-header" if not allow_header

explained contains sprintf("level-too-low: %s", [json.marshal(input.user.claims.level)]) if level < 2

explained contains "field-not-ok" if not input.resource[input.user.claims.field] == "ok"

explained contains concat(" ", ["method", input.request.method]) if input.request.method != "GET"
