package svc.helpers

is_admin if input.user.role == "admin"
