package authz

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/reason"
)

// transport carries the two calls of a Client to the sidecar: gRPC
// (svc.authz.v1) or the local HTTP JSON API. Both report failures as gRPC
// status errors so that the Client classifies them once.
type transport interface {
	validateToken(ctx context.Context, req *authzv1.ValidateTokenRequest) (*authzv1.ValidateTokenResponse, error)
	authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error)
	planResources(ctx context.Context, req *authzv1.PlanResourcesRequest) (*authzv1.PlanResourcesResponse, error)
	close() error
}

// grpcTransport calls svc.authz.v1 over one reused gRPC connection.
type grpcTransport struct {
	conn *grpc.ClientConn
	rpc  authzv1.AuthzServiceClient
}

func (g grpcTransport) validateToken(ctx context.Context, req *authzv1.ValidateTokenRequest) (*authzv1.ValidateTokenResponse, error) {
	return g.rpc.ValidateToken(ctx, req)
}

func (g grpcTransport) authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	return g.rpc.Authorize(ctx, req)
}

func (g grpcTransport) planResources(ctx context.Context, req *authzv1.PlanResourcesRequest) (*authzv1.PlanResourcesResponse, error) {
	return g.rpc.PlanResources(ctx, req)
}

func (g grpcTransport) close() error { return g.conn.Close() }

// maxHTTPAnswer bounds the body of an answer of the HTTP API; a decision is
// a few kilobytes.
const maxHTTPAnswer = 4 << 20

// httpTransport calls the local HTTP JSON API (POST /v1/validate-token,
// POST /v1/authorize, protojson bodies) over pooled keep-alive connections.
type httpTransport struct {
	base string
	hc   *http.Client
}

// newHTTPTransport returns the transport of the sidecar whose HTTP API is
// at rawURL ("http://127.0.0.1:7700", or https with tlsConfig).
func newHTTPTransport(rawURL string, tlsConfig *tls.Config) (*httpTransport, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("sidecar URL %q must be http://host:port or https://host:port", rawURL)
	}
	tr := &http.Transport{
		// A sidecar is local: never reach it through an HTTP proxy of the
		// environment.
		Proxy:               nil,
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   tlsConfig != nil,
	}
	return &httpTransport{
		base: strings.TrimRight(u.String(), "/"),
		hc: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}, nil
}

func (h *httpTransport) validateToken(ctx context.Context, req *authzv1.ValidateTokenRequest) (*authzv1.ValidateTokenResponse, error) {
	out := &authzv1.ValidateTokenResponse{}
	return out, h.call(ctx, PathValidateToken, req, out)
}

func (h *httpTransport) authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	out := &authzv1.AuthorizeResponse{}
	return out, h.call(ctx, PathAuthorize, req, out)
}

func (h *httpTransport) planResources(ctx context.Context, req *authzv1.PlanResourcesRequest) (*authzv1.PlanResourcesResponse, error) {
	out := &authzv1.PlanResourcesResponse{}
	return out, h.call(ctx, PathPlanResources, req, out)
}

func (h *httpTransport) close() error {
	h.hc.CloseIdleConnections()
	return nil
}

var jsonAnswer = protojson.UnmarshalOptions{DiscardUnknown: true}

func (h *httpTransport) call(ctx context.Context, path string, in, out proto.Message) error {
	body, err := protojson.Marshal(in)
	if err != nil {
		return status.Error(codes.InvalidArgument, "request could not be encoded")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(body))
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "request could not be built: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := h.hc.Do(req)
	if err != nil {
		return transportStatus(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPAnswer))
	if err != nil {
		return transportStatus(ctx, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := jsonAnswer.Unmarshal(data, out); err != nil {
			return status.Errorf(codes.Internal, "the answer of %s is not a %s", h.base+path, out.ProtoReflect().Descriptor().Name())
		}
		return nil
	case resp.StatusCode == http.StatusInternalServerError:
		// The sidecar answered and could not decide: never fail open.
		return answerStatus(codes.Internal, resp.StatusCode, data, reason.PolicyError)
	case resp.StatusCode >= 500:
		return answerStatus(codes.Unavailable, resp.StatusCode, data, reason.Unavailable)
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusRequestEntityTooLarge:
		return answerStatus(codes.InvalidArgument, resp.StatusCode, data, reason.InputInvalid)
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return answerStatus(codes.FailedPrecondition, resp.StatusCode, data, reason.PlanUnsupported)
	}
	// 404, 405, a redirect: the URL does not lead to the sidecar's API.
	return status.Errorf(codes.Unimplemented, "%s answered %d: no svc HTTP API there", h.base+path, resp.StatusCode)
}

// transportStatus maps a failed exchange: the deadline (ours or the
// caller's) to DeadlineExceeded, the caller's cancellation to Canceled,
// anything else (refused, reset, DNS) to Unavailable.
func transportStatus(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "no answer from the sidecar in time")
	case ctx.Err() != nil:
		return status.Error(codes.Canceled, ctx.Err().Error())
	}
	return status.Errorf(codes.Unavailable, "sidecar unreachable: %v", err)
}

// answerStatus turns an error answer {"error":{"code","message"}} into a
// status carrying its reason code as the gRPC server would.
func answerStatus(c codes.Code, httpStatus int, data []byte, def reason.Code) error {
	var body ErrorBody
	rc, msg := def, fmt.Sprintf("sidecar answered %d", httpStatus)
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		rc = reason.Code(body.Error.Code)
		if body.Error.Message != "" {
			msg = body.Error.Message
		}
	}
	st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: string(rc), Domain: ErrorDomain})
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}
