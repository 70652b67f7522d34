package helpers

ok if input.action == "orders:read"
