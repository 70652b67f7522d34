package svc.authz

default allow := false

# The resource's id as the prefix of a known string: no plan condition expresses it.
allow if startswith(concat("", [input.user.id, "-home"]), input.resource.id)
