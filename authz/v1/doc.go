// Package authzv1 is the generated Go code of svc.authz.v1 (authz.proto):
// the messages and the AuthzService client and server stubs. It is written
// by `make generate`; edit authz.proto, never the .pb.go files.
package authzv1
