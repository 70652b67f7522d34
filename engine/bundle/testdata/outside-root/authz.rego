package svc.authz

import data.helpers

default allow := false

allow if helpers.ok

deny_reasons contains "not-ok" if not allow
