package svc.authz.helpers

is_admin if input.user.role = = "admin"
