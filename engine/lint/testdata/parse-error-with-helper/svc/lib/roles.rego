package svc.lib.roles

admin(role) if role == "admin"
