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

// composeFile is the part of docker-compose.yml the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       yaml.Node         `yaml:"build"`
		NetworkMode string            `yaml:"network_mode"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

func TestShippedCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"envoy", "sidecar", "app"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("no service %q", name)
		}
	}
	for name, svc := range c.Services {
		for _, v := range svc.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if _, err := os.Stat(filepath.Join(repoRoot, host)); err != nil {
				t.Errorf("service %s mounts %s: %v", name, host, err)
			}
		}
		if name != "envoy" && svc.NetworkMode != "service:envoy" {
			t.Errorf("service %s does not share Envoy's network namespace", name)
		}
	}
	if img := c.Services["envoy"].Image; !strings.HasPrefix(img, "envoyproxy/envoy:") {
		t.Errorf("envoy image %q", img)
	}
	var build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	}
	buildNode := c.Services["sidecar"].Build
	if err := buildNode.Decode(&build); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, build.Context, build.Dockerfile)); err != nil {
		t.Errorf("sidecar build: %v", err)
	}

	envoyYAML := inspectEnvoy(t, "deploy/envoy/envoy.yaml")
	var mountsEnvoy bool
	for _, v := range c.Services["envoy"].Volumes {
		mountsEnvoy = mountsEnvoy || strings.HasPrefix(v, "./deploy/envoy/envoy.yaml:")
	}
	if !mountsEnvoy {
		t.Error("envoy does not mount deploy/envoy/envoy.yaml")
	}
	env := c.Services["sidecar"].Environment
	if got := env["SVC_SIDECAR_ADDR"]; got != envoyYAML.clusters["svc_sidecar"] {
		t.Errorf("sidecar listens on %q, Envoy dials %q", got, envoyYAML.clusters["svc_sidecar"])
	}
	if got := env["SVC_HTTP_ADDR"]; got != config.DefaultHTTPAddr {
		t.Errorf("sidecar HTTP on %q, want %s", got, config.DefaultHTTPAddr)
	}
	if got, want := c.Services["app"].Environment["PORT"], port(t, envoyYAML.clusters["app"]); got != want {
		t.Errorf("app listens on %s, Envoy dials port %s", got, want)
	}
}

// TestComposeDemoPolicy runs the demo's setup (development mode, tenant
// "demo", deploy/envoy/demo-policy) on a real engine: the curl lines at
// the top of docker-compose.yml get the answers they promise.
func TestComposeDemoPolicy(t *testing.T) {
	var cfg config.Config
	cfg.SDK.TenantID = "demo"
	cfg.SDK.FailMode = config.FailOpen
	cfg.Policy.Dir = filepath.Join(repoRoot, "deploy", "envoy", "demo-policy")
	cfg.Audit.Destination = config.AuditOff
	s := newTestServer(t, cfg, newTestEngine(t, cfg, nil))
	bearer := map[string]string{"authorization": "Bearer demo"}
	tests := []struct {
		name       string
		method     string
		path       string
		headers    map[string]string
		wantStatus int
		wantReason string
	}{
		{"no token", "GET", "/orders/1", nil, 401, "token-missing"},
		{"read", "GET", "/orders/1", bearer, 200, "policy-allow"},
		{"delete", "DELETE", "/orders/1", bearer, 403, "policy-deny"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.Check(t.Context(), checkReq(tt.method, tt.path, tt.headers, nil))
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(t, resp)
			if got.HTTPStatus != tt.wantStatus || got.Meta["reason"] != tt.wantReason {
				t.Fatalf("got %d %s, want %d %s", got.HTTPStatus, got.Meta["reason"], tt.wantStatus, tt.wantReason)
			}
			if tt.name == "delete" && (got.Body == nil || len(got.Body.DenyReasons) != 1 || got.Body.DenyReasons[0] != "demo-read-only") {
				t.Errorf("deny body %+v", got.Body)
			}
		})
	}
}
