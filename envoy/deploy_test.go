package envoy

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"

	"github.com/svc-dev/svc/engine/config"
)

// repoRoot is where the shipped deployment files live.
const repoRoot = ".."

// loadBootstrap reads an Envoy YAML file into the v3 bootstrap proto,
// failing on unknown fields, and validates it and every typed_config in it
// with the generated validators, as Envoy does when it loads the file.
func loadBootstrap(t *testing.T, path string) *bootstrapv3.Bootstrap {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	validateTyped(t, path, b.ProtoReflect())
	return &b
}

// validateTyped walks m and validates the message packed in every Any,
// which the bootstrap's own validation does not look into.
func validateTyped(t *testing.T, path string, m protoreflect.Message) {
	t.Helper()
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("%s: %s: %v", path, a.GetTypeUrl(), err)
		}
		if v, ok := inner.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				t.Fatalf("%s: %s: %v", path, a.GetTypeUrl(), err)
			}
		}
		validateTyped(t, path, inner.ProtoReflect())
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				validateTyped(t, path, v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				validateTyped(t, path, mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			validateTyped(t, path, v.Message())
		}
		return true
	})
}

func unpack[T proto.Message](t *testing.T, a *anypb.Any, into T) T {
	t.Helper()
	if err := a.UnmarshalTo(into); err != nil {
		t.Fatalf("unpack %s: %v", a.GetTypeUrl(), err)
	}
	return into
}

// shippedEnvoy is what the tests look at in a shipped Envoy file.
type shippedEnvoy struct {
	hcm      *hcmv3.HttpConnectionManager
	extAuthz *extauthzv3.ExtAuthz
	perRoute []*extauthzv3.ExtAuthzPerRoute
	clusters map[string]string // name → host:port of its one endpoint
}

func inspectEnvoy(t *testing.T, path string) shippedEnvoy {
	t.Helper()
	b := loadBootstrap(t, path)
	var s shippedEnvoy
	s.clusters = map[string]string{}
	for _, c := range b.GetStaticResources().GetClusters() {
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		s.clusters[c.GetName()] = net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
	}
	listeners := b.GetStaticResources().GetListeners()
	if len(listeners) != 1 {
		t.Fatalf("%s: want one listener, got %d", path, len(listeners))
	}
	if port := listeners[0].GetAddress().GetSocketAddress().GetPortValue(); port != 8080 {
		t.Errorf("%s: listener port %d, want 8080", path, port)
	}
	filters := listeners[0].GetFilterChains()[0].GetFilters()
	s.hcm = unpack(t, filters[0].GetTypedConfig(), &hcmv3.HttpConnectionManager{})
	for _, f := range s.hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.ext_authz" {
			s.extAuthz = unpack(t, f.GetTypedConfig(), &extauthzv3.ExtAuthz{})
		}
	}
	if s.extAuthz == nil {
		t.Fatalf("%s: no ext_authz filter", path)
	}
	if last := s.hcm.GetHttpFilters()[len(s.hcm.GetHttpFilters())-1]; last.GetName() != "envoy.filters.http.router" {
		t.Errorf("%s: last http filter is %s, want the router", path, last.GetName())
	}
	for _, vh := range s.hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if c := r.GetRoute().GetCluster(); c != "" && s.clusters[c] == "" {
				t.Errorf("%s: route to unknown cluster %q", path, c)
			}
			if a, ok := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]; ok {
				s.perRoute = append(s.perRoute, unpack(t, a, &extauthzv3.ExtAuthzPerRoute{}))
			}
		}
	}
	if !s.hcm.GetNormalizePath().GetValue() || !s.hcm.GetMergeSlashes() {
		t.Errorf("%s: paths must be normalized before the check", path)
	}
	return s
}

var documentedFailMode = regexp.MustCompile(`# Matches sdk\.fail_mode = "(open|closed)"`)

// checkFailMode requires failure_mode_allow to match the fail mode the
// file documents next to it.
func checkFailMode(t *testing.T, path string, ea *extauthzv3.ExtAuthz) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	m := documentedFailMode.FindAllStringSubmatch(string(raw), -1)
	if len(m) != 1 {
		t.Fatalf("%s: want one %q comment, got %d", path, documentedFailMode, len(m))
	}
	if want := m[0][1] == config.FailOpen; ea.GetFailureModeAllow() != want {
		t.Errorf("%s: failure_mode_allow = %v, but the file documents fail_mode %s", path, ea.GetFailureModeAllow(), m[0][1])
	}
}

func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var actionPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$`)

func TestShippedEnvoyGRPC(t *testing.T) {
	const path = "deploy/envoy/envoy.yaml"
	s := inspectEnvoy(t, path)
	ea := s.extAuthz
	checkFailMode(t, path, ea)
	if ea.GetTransportApiVersion().String() != "V3" {
		t.Errorf("transport_api_version = %s, want V3", ea.GetTransportApiVersion())
	}
	if ea.GetWithRequestBody() != nil {
		t.Error("with_request_body is set: the sidecar never reads the body")
	}
	cluster := ea.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if cluster != "svc_sidecar" {
		t.Fatalf("ext_authz grpc cluster %q, want svc_sidecar", cluster)
	}
	addr := s.clusters[cluster]
	if got, want := port(t, addr), port(t, config.DefaultSidecarAddr); got != want {
		t.Errorf("svc_sidecar port %s, want the sidecar's default %s", got, want)
	}
	if addr != dockerfileSidecarAddr(t) {
		t.Errorf("svc_sidecar dials %s, the image listens on %s", addr, dockerfileSidecarAddr(t))
	}
	var sawAction bool
	for _, pr := range s.perRoute {
		for k, v := range pr.GetCheckSettings().GetContextExtensions() {
			switch k {
			case ExtAction:
				sawAction = true
				if !actionPattern.MatchString(v) {
					t.Errorf("context extension %s = %q is not <resource>:<verb>", k, v)
				}
			case ExtResource, ExtResourceID, ExtTenant:
			default:
				t.Errorf("unknown context extension %q", k)
			}
		}
	}
	if !sawAction {
		t.Errorf("no per-route context extension sets %s", ExtAction)
	}
}

func TestShippedEnvoyHTTPService(t *testing.T) {
	const path = "deploy/envoy/envoy-http.yaml"
	s := inspectEnvoy(t, path)
	ea := s.extAuthz
	checkFailMode(t, path, ea)
	hs := ea.GetHttpService()
	if hs == nil {
		t.Fatal("ext_authz has no http_service")
	}
	if hs.GetPathPrefix() != EnvoyCheckPrefix {
		t.Errorf("path_prefix %q, want %q", hs.GetPathPrefix(), EnvoyCheckPrefix)
	}
	if addr := s.clusters[hs.GetServerUri().GetCluster()]; addr != config.DefaultHTTPAddr {
		t.Errorf("http_service cluster dials %q, want the sidecar's HTTP address %s", addr, config.DefaultHTTPAddr)
	}
	var upstream bool
	for _, p := range hs.GetAuthorizationResponse().GetAllowedUpstreamHeaders().GetPatterns() {
		upstream = upstream || p.GetPrefix() == HeaderPrefix
	}
	if !upstream {
		t.Errorf("allowed_upstream_headers does not pass %s*", HeaderPrefix)
	}
}

// dockerfileSidecarAddr is the gRPC address the shipped image listens on.
func dockerfileSidecarAddr(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENV SVC_SIDECAR_ADDR=(\S+)$`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatal("Dockerfile sets no SVC_SIDECAR_ADDR")
	}
	return m[1]
}

func TestShippedDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM golang:1.26 AS build", "CGO_ENABLED=0", "./cmd/svc-sidecar", "FROM gcr.io/distroless/static", "USER nonroot"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// TestShippedDemoEnvoy checks the local mesh demo's front proxy
// (docker-compose.yml): a valid bootstrap that fails closed, asks the
// sidecar the demo's svc.toml configures, routes SAML sign-in around the
// check, and traces to the collector.
func TestShippedDemoEnvoy(t *testing.T) {
	const path = "deploy/demo/envoy.yaml"
	s := inspectEnvoy(t, path)
	checkFailMode(t, path, s.extAuthz)
	cfg, err := config.Load(filepath.Join(repoRoot, "deploy", "demo", "svc.toml"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SDK.FailMode != config.FailClosed {
		t.Errorf("the demo's svc.toml fails %s", cfg.SDK.FailMode)
	}
	cluster := s.extAuthz.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if addr := s.clusters[cluster]; addr != cfg.SDK.SidecarAddr {
		t.Errorf("ext_authz dials %s (cluster %q), the demo sidecar listens on %s", addr, cluster, cfg.SDK.SidecarAddr)
	}

	var samlRoutes int
	for _, vh := range s.hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			prefix := r.GetMatch().GetPrefix()
			a, hasPerRoute := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]
			disabled := hasPerRoute && unpack(t, a, &extauthzv3.ExtAuthzPerRoute{}).GetDisabled()
			switch {
			case prefix == config.DefaultSAMLPathPrefix+"/":
				samlRoutes++
				if !disabled {
					t.Error("/auth/saml/ is checked by ext_authz: nobody could sign in")
				}
				if addr := s.clusters[r.GetRoute().GetCluster()]; addr != cfg.Sidecar.SAMLAddr {
					t.Errorf("/auth/saml/ goes to %s, want the SAML listener %s", addr, cfg.Sidecar.SAMLAddr)
				}
			case prefix == config.DefaultOIDCPathPrefix+"/":
				// OpenID Connect sign-in: the same listener, unchecked.
				if addr := s.clusters[r.GetRoute().GetCluster()]; !disabled || addr != cfg.Sidecar.SigninAddr {
					t.Errorf("/auth/oidc/ goes to %s (check disabled %v), want the sign-in listener %s unchecked", addr, disabled, cfg.Sidecar.SigninAddr)
				}
			case disabled:
				t.Errorf("route %s skips the check", prefix)
			}
		}
	}
	if samlRoutes != 1 {
		t.Errorf("%d /auth/saml/ routes, want 1", samlRoutes)
	}

	tracer := s.hcm.GetTracing().GetProvider()
	if tracer.GetName() != "envoy.tracers.opentelemetry" {
		t.Fatalf("tracing provider %q, want envoy.tracers.opentelemetry", tracer.GetName())
	}
	otel := unpack(t, tracer.GetTypedConfig(), &tracev3.OpenTelemetryConfig{})
	if c := otel.GetGrpcService().GetEnvoyGrpc().GetClusterName(); !strings.HasPrefix(s.clusters[c], "otel-collector:") {
		t.Errorf("traces go to cluster %q at %q, not to the demo's otel-collector", c, s.clusters[c])
	}
}
