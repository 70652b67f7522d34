package svc.authz

# Loaded by `opa test`, never by the engine: if it were, this second
# value for allow would conflict with the real one.
allow := "from a test file"
