package svc.lib.strings

# A helper package under svc, in a subdirectory: allowed.
lower_action := lower(input.action)
