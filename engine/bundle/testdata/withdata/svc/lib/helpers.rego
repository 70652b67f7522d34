package svc.lib

is_admin(role) if role in data.svc.lib.admin_roles
