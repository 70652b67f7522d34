//go:build vtprotobuf

package sidecar

import authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

// Built with -tags vtprotobuf, the ext_authz answer has the generated
// marshaling the codec looks for.
var _ vtMessage = (*authv3.CheckResponse)(nil)
