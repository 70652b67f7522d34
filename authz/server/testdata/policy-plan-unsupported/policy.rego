package svc.authz

default allow := false

# A prefix test on the resource's id: no plan condition expresses it.
allow if startswith(input.resource.id, concat("", [input.user.id, "-"]))
