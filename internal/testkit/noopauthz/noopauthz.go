// Package noopauthz is an Envoy ext_authz server that allows every Check
// and does nothing else: the baseline the sidecar's throughput is
// compared with.
package noopauthz

import (
	"context"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// Server answers every Check with OK.
type Server struct {
	authv3.UnimplementedAuthorizationServer
}

// Check allows the request.
func (Server) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{
		Status:       &status.Status{Code: int32(code.Code_OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}},
	}, nil
}
