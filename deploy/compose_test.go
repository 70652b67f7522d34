package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/svc-dev/svc/demo/traffic"
	"github.com/svc-dev/svc/engine/config"
)

// loadCompose loads a compose file as `docker compose up` does, with the
// loader docker compose itself uses: schema validation (an unknown key is
// an error), interpolation, normalization and the consistency checks
// (depends_on, network_mode: service:... name existing services). It also
// requires every bind-mounted file and every build's Dockerfile to exist,
// which the loader leaves to the engine.
func loadCompose(file string) (*types.Project, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{},
	}
	p, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("svc-demo-test", true)
		o.ResolvePaths = true
	})
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				errs = append(errs, fmt.Errorf("service %s mounts %s: %w", name, v.Source, err))
			}
		}
		if s.Build != nil {
			df := s.Build.Dockerfile
			if !filepath.IsAbs(df) {
				df = filepath.Join(s.Build.Context, df)
			}
			if err := checkDockerfile(df, s.Build.Context); err != nil {
				errs = append(errs, fmt.Errorf("service %s build: %w", name, err))
			}
		}
	}
	return p, errors.Join(errs...)
}

var copyLine = regexp.MustCompile(`(?m)^COPY\s+(?:--\S+\s+)*(.+)\s+\S+\s*$`)

// checkDockerfile requires the Dockerfile and the sources of its COPY
// lines from the build context to exist.
func checkDockerfile(path, context string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, m := range copyLine.FindAllStringSubmatch(string(raw), -1) {
		if strings.Contains(m[0], "--from=") {
			continue
		}
		for _, src := range strings.Fields(m[1]) {
			if src == "." {
				continue
			}
			if _, err := os.Stat(filepath.Join(context, src)); err != nil {
				return fmt.Errorf("%s copies %s: %w", filepath.Base(path), src, err)
			}
		}
	}
	return nil
}

func TestComposeLoaderRefuses(t *testing.T) {
	tests := []struct{ file, wantErr string }{
		{"unknown-key.yml", "services.app.enviroment"},
		{"missing-mount.yml", "no-such-file.yaml"},
		{"undefined-depends-on.yml", "depends on undefined service"},
		{"undefined-network-service.yml", `undefined service "proxy"`},
		{"missing-copy-source.yml", "copies no-such-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := loadCompose(filepath.Join("testdata", "compose", tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// composeEnv is a service's environment as plain strings.
func composeEnv(s types.ServiceConfig) map[string]string {
	env := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

// mountOf returns the host file mounted at target in service s.
func mountOf(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source
		}
	}
	t.Fatalf("service %s mounts nothing at %s", s.Name, target)
	return ""
}

func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestComposeDemo(t *testing.T) {
	p, err := loadCompose("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"envoy", "sidecar", "oidc", "saml-idp", "orders", "billing", "traffic", "otel-collector", "jaeger"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Published ports stay on the host's loopback.
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("service %s publishes %d on %q, want 127.0.0.1", name, port.Target, port.HostIP)
			}
		}
	}

	// The sidecar, in production mode, shares Envoy's network namespace
	// with the OpenID provider, whose JWKS it reads on loopback.
	sidecar := p.Services["sidecar"]
	env := composeEnv(sidecar)
	if sidecar.NetworkMode != "service:envoy" || p.Services["oidc"].NetworkMode != "service:envoy" {
		t.Errorf("sidecar and oidc network_mode %q, %q: want service:envoy", sidecar.NetworkMode, p.Services["oidc"].NetworkMode)
	}
	if env["SVC_FAIL_MODE"] != "closed" {
		t.Errorf("SVC_FAIL_MODE=%q, want closed", env["SVC_FAIL_MODE"])
	}
	if !strings.HasPrefix(env["OTEL_EXPORTER_OTLP_ENDPOINT"], "http://otel-collector:") {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%q, want the collector", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	}
	cfg, err := config.Load(mountOf(t, sidecar, "/etc/svc/svc.toml"), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatalf("the sidecar's configuration: %v", err)
	}
	if cfg.SDK.FailMode != config.FailClosed || cfg.SDK.JWKSURL == "" {
		t.Errorf("sidecar fail_mode %s jwks_url %q: not production mode", cfg.SDK.FailMode, cfg.SDK.JWKSURL)
	}
	if cfg.Sidecar.AdminTokenFile != "" {
		mountOf(t, sidecar, cfg.Sidecar.AdminTokenFile)
	}
	if sidecar.Build == nil || filepath.Base(sidecar.Build.Dockerfile) != "Dockerfile" || filepath.Clean(sidecar.Build.Context) != filepath.Clean(mustAbs(t, "..")) {
		t.Errorf("the sidecar is not built from the repository's Dockerfile: %+v", sidecar.Build)
	}
	// The HTTP API is published for core on the host.
	checkPublished(t, p.Services["envoy"], cfg.Sidecar.HTTPAddr)

	// The OpenID provider: the sidecar's JWKS URL, issuer and audience are
	// those of its configuration, and its port is published for the
	// documented curl.
	idpFile := mountOf(t, p.Services["oidc"], composeEnv(p.Services["oidc"])["IDP_CONFIG_FILE"])
	var idp struct {
		Host     string `json:"host"`
		Port     int    `json:"port"`
		Issuer   string `json:"issuer"`
		Resource string `json:"resource"`
	}
	raw, err := os.ReadFile(idpFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &idp); err != nil {
		t.Fatal(err)
	}
	if want := "http://127.0.0.1:" + strconv.Itoa(idp.Port) + "/jwks"; cfg.SDK.JWKSURL != want {
		t.Errorf("sidecar jwks_url %s, the provider serves %s", cfg.SDK.JWKSURL, want)
	}
	if cfg.JWT.Issuer != idp.Issuer || !slices.Contains(cfg.JWT.Audiences, idp.Resource) {
		t.Errorf("sidecar issuer %q audiences %q, provider issuer %q resource %q", cfg.JWT.Issuer, cfg.JWT.Audiences, idp.Issuer, idp.Resource)
	}
	checkPublished(t, p.Services["envoy"], net.JoinHostPort(idp.Host, strconv.Itoa(idp.Port)))
	checkComposeOIDC(t, p, cfg, idpFile)

	// SAML: the sidecar's gateway and the IdP know each other's metadata,
	// in the shared namespace; the IdP and the browser's way in through
	// Envoy are published.
	saml := p.Services["saml-idp"]
	samlEnv := composeEnv(saml)
	if saml.NetworkMode != "service:envoy" {
		t.Errorf("saml-idp network_mode %q, want service:envoy", saml.NetworkMode)
	}
	if cfg.SDK.SAML == nil {
		t.Fatal("the sidecar has no [sdk.saml]")
	}
	if want := "http://127.0.0.1:" + samlEnv["SAMLIDP_PORT"] + "/metadata"; cfg.SDK.SAML.IDPMetadataURL != want {
		t.Errorf("sidecar reads IdP metadata at %s, the IdP serves %s", cfg.SDK.SAML.IDPMetadataURL, want)
	}
	if want := "http://" + cfg.Sidecar.SAMLAddr + cfg.SDK.SAML.PathPrefix + "/metadata"; samlEnv["SAMLIDP_SP_METADATA"] != want {
		t.Errorf("IdP reads SP metadata at %s, the gateway serves %s", samlEnv["SAMLIDP_SP_METADATA"], want)
	}
	if want := "http://localhost:8080" + cfg.SDK.SAML.PathPrefix + "/acs"; cfg.SDK.SAML.ACSURL != want {
		t.Errorf("acs_url %s, want Envoy's %s", cfg.SDK.SAML.ACSURL, want)
	}
	checkPublished(t, p.Services["envoy"], "0.0.0.0:"+samlEnv["SAMLIDP_PORT"])
	usersFile := mountOf(t, saml, samlEnv["SAMLIDP_USERS_FILE"])
	var samlUsers map[string]demoUser
	if raw, err := os.ReadFile(usersFile); err != nil || yaml.Unmarshal(raw, &samlUsers) != nil {
		t.Fatalf("%s: %v", usersFile, err)
	}
	if samlUsers[samlEnv["SAMLIDP_DEFAULT_USER"]].Tenant != cfg.SDK.TenantID {
		t.Errorf("the IdP's default user %q is not of tenant %s", samlEnv["SAMLIDP_DEFAULT_USER"], cfg.SDK.TenantID)
	}

	// Envoy routes to the demo services where they listen, and traces to
	// the collector.
	envoyFile := mountOf(t, p.Services["envoy"], "/etc/envoy/envoy.yaml")
	dns := envoyDNSClusters(t, envoyFile)
	for _, svc := range []string{"orders", "billing"} {
		if got, want := dns[svc], listenPort(t, p.Services[svc]); got != want {
			t.Errorf("Envoy dials %s:%s, the service listens on %s", svc, got, want)
		}
	}
	if dns["otel-collector"] == "" {
		t.Error("Envoy does not trace to otel-collector")
	}
	checkPublished(t, p.Services["envoy"], "0.0.0.0:8080")
	checkPublished(t, p.Services["jaeger"], "0.0.0.0:16686")

	// The traffic generator reads the provider's clients and goes through
	// Envoy.
	tr := p.Services["traffic"]
	args := []string(tr.Command)
	if got := mountOf(t, tr, flag(args, "--idp-config")); got != idpFile {
		t.Errorf("traffic reads %s, the provider %s", got, idpFile)
	}
	c, err := traffic.LoadIDPConfig(idpFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traffic.New(traffic.Config{Target: flag(args, "--target"), TokenURL: flag(args, "--token-url"), IDP: c}, nil); err != nil {
		t.Errorf("traffic: %v", err)
	}
	if !strings.HasPrefix(flag(args, "--target"), "http://envoy:8080") {
		t.Errorf("traffic targets %s, not Envoy", flag(args, "--target"))
	}
}

// idpClient is a client of the demo's OpenID provider configuration.
type idpClient struct {
	ID           string   `json:"client_id"`
	Secret       string   `json:"client_secret"`
	RedirectURIs []string `json:"redirect_uris"`
}

// demoUser is a person of deploy/demo/saml-users.json.
type demoUser struct {
	Tenant string `json:"tenant"`
}

// checkComposeOIDC checks the demo's OpenID Connect sign-in: the sidecar's
// [sdk.oidc] names the provider of idpFile, a client registered there for
// the authorization code flow with the redirect URL behind Envoy, and the
// client's secret in a mounted file; the provider's people, mounted beside
// its configuration, are of the sidecar's tenant.
func checkComposeOIDC(t *testing.T, p *types.Project, cfg config.Config, idpFile string) {
	t.Helper()
	o := cfg.SDK.OIDC
	if o == nil {
		t.Fatal("the sidecar has no [sdk.oidc]")
	}
	raw, err := os.ReadFile(idpFile)
	if err != nil {
		t.Fatal(err)
	}
	var idp struct {
		Issuer    string      `json:"issuer"`
		UsersFile string      `json:"users_file"`
		Clients   []idpClient `json:"clients"`
	}
	if err := yaml.Unmarshal(raw, &idp); err != nil {
		t.Fatal(err)
	}
	if o.IssuerURL != idp.Issuer {
		t.Errorf("sdk.oidc.issuer_url %s, the provider's issuer %s", o.IssuerURL, idp.Issuer)
	}
	if want := "http://localhost:8080" + o.PathPrefix + "/callback"; o.RedirectURL != want {
		t.Errorf("sdk.oidc.redirect_url %s, want Envoy's %s", o.RedirectURL, want)
	}
	i := slices.IndexFunc(idp.Clients, func(c idpClient) bool { return c.ID == o.ClientID })
	if i < 0 {
		t.Fatalf("the provider has no client %q", o.ClientID)
	}
	c := idp.Clients[i]
	if !slices.Contains(c.RedirectURIs, o.RedirectURL) {
		t.Errorf("client %s redirects to %q, not to %s", c.ID, c.RedirectURIs, o.RedirectURL)
	}
	if o.ClientSecretFile == "" {
		t.Fatal("sdk.oidc has no client_secret_file")
	}
	secret, err := os.ReadFile(mountOf(t, p.Services["sidecar"], o.ClientSecretFile))
	if err != nil || strings.TrimSpace(string(secret)) != c.Secret {
		t.Errorf("the sidecar's client secret file does not hold client %s's secret (%v)", c.ID, err)
	}
	if idp.UsersFile == "" {
		t.Fatal("the provider has no users_file: no one signs in")
	}
	oidc := p.Services["oidc"]
	dir := filepath.Dir(composeEnv(oidc)["IDP_CONFIG_FILE"])
	users, err := os.ReadFile(mountOf(t, oidc, filepath.Join(dir, idp.UsersFile)))
	if err != nil {
		t.Fatal(err)
	}
	var people map[string]demoUser
	if err := yaml.Unmarshal(users, &people); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(people)), func(u demoUser) bool { return u.Tenant == cfg.SDK.TenantID }) {
		t.Errorf("no user of the provider is of tenant %s", cfg.SDK.TenantID)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkPublished requires the container port of addr to be published by s.
func checkPublished(t *testing.T, s types.ServiceConfig, addr string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	for _, p := range s.Ports {
		if p.Target == uint32(n) {
			return
		}
	}
	t.Errorf("service %s does not publish port %s", s.Name, port)
}

// listenPort is the port of a demo service's --addr.
func listenPort(t *testing.T, s types.ServiceConfig) string {
	t.Helper()
	_, port, err := net.SplitHostPort(flag(s.Command, "--addr"))
	if err != nil {
		t.Fatalf("service %s: %v", s.Name, err)
	}
	return port
}

// envoyDNSClusters maps the host names of an Envoy bootstrap's clusters
// to their ports.
func envoyDNSClusters(t *testing.T, file string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		StaticResources struct {
			Clusters []struct {
				LoadAssignment struct {
					Endpoints []struct {
						LbEndpoints []struct {
							Endpoint struct {
								Address struct {
									SocketAddress struct {
										Address   string `json:"address"`
										PortValue int    `json:"port_value"`
									} `json:"socket_address"`
								} `json:"address"`
							} `json:"endpoint"`
						} `json:"lb_endpoints"`
					} `json:"endpoints"`
				} `json:"load_assignment"`
			} `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := yaml.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range b.StaticResources.Clusters {
		for _, e := range c.LoadAssignment.Endpoints {
			for _, lb := range e.LbEndpoints {
				sa := lb.Endpoint.Address.SocketAddress
				out[sa.Address] = strconv.Itoa(sa.PortValue)
			}
		}
	}
	return out
}

// TestComposeNginxStandIn checks that deploy/demo/nginx.conf, the front
// proxy of the demo without Docker, dials the demo's processes where
// docker-compose.yml has them listen, on loopback, and listens where Envoy
// is published.
func TestComposeNginxStandIn(t *testing.T) {
	p, err := loadCompose("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	sidecar := p.Services["sidecar"]
	env := composeEnv(sidecar)
	cfg, err := config.Load(mountOf(t, sidecar, "/etc/svc/svc.toml"), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("demo/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	port := func(addr string) string {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	wants := []string{
		"listen 127.0.0.1:8080;",
		"proxy_pass http://127.0.0.1:" + port(cfg.Sidecar.HTTPAddr) + "/check;",
		"proxy_pass http://127.0.0.1:" + port(cfg.Sidecar.SAMLAddr) + ";",
		"proxy_pass http://127.0.0.1:" + listenPort(t, p.Services["orders"]) + ";",
		"proxy_pass http://127.0.0.1:" + listenPort(t, p.Services["billing"]) + ";",
	}
	for _, want := range wants {
		if !strings.Contains(string(raw), want) {
			t.Errorf("deploy/demo/nginx.conf has no %q", want)
		}
	}
	for _, loc := range []string{"location /auth/oidc/ {", "location /auth/saml/ {", "location /orders {", "location /invoices {"} {
		if !strings.Contains(string(raw), loc) {
			t.Errorf("deploy/demo/nginx.conf has no %q, a route of deploy/demo/envoy.yaml", loc)
		}
	}
}

// TestComposeTelemetry checks the demo's trace path: Envoy and the sidecar
// export OTLP over gRPC to the port the collector receives on, and the
// collector's trace pipeline exports to the Jaeger service.
func TestComposeTelemetry(t *testing.T) {
	p, err := loadCompose("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	col := p.Services["otel-collector"]
	var cfgPath string
	for _, arg := range col.Command {
		if v, ok := strings.CutPrefix(arg, "--config="); ok {
			cfgPath = v
		}
	}
	raw, err := os.ReadFile(mountOf(t, col, cfgPath))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					GRPC struct {
						Endpoint string `json:"endpoint"`
					} `json:"grpc"`
				} `json:"protocols"`
			} `json:"otlp"`
		} `json:"receivers"`
		Exporters map[string]struct {
			Endpoint string `json:"endpoint"`
		} `json:"exporters"`
		Service struct {
			Pipelines map[string]struct {
				Receivers []string `json:"receivers"`
				Exporters []string `json:"exporters"`
			} `json:"pipelines"`
		} `json:"service"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(c.Receivers.OTLP.Protocols.GRPC.Endpoint)
	if err != nil {
		t.Fatalf("collector OTLP gRPC receiver %q: %v", c.Receivers.OTLP.Protocols.GRPC.Endpoint, err)
	}
	if got := envoyDNSClusters(t, mountOf(t, p.Services["envoy"], "/etc/envoy/envoy.yaml"))["otel-collector"]; got != port {
		t.Errorf("Envoy traces to otel-collector:%s, the collector receives on %s", got, port)
	}
	if got, want := composeEnv(p.Services["sidecar"])["OTEL_EXPORTER_OTLP_ENDPOINT"], "http://otel-collector:"+port; got != want {
		t.Errorf("sidecar OTEL_EXPORTER_OTLP_ENDPOINT=%q, want %q", got, want)
	}
	traces := c.Service.Pipelines["traces"]
	if !slices.Contains(traces.Receivers, "otlp") {
		t.Errorf("the collector's traces pipeline does not receive otlp: %v", traces.Receivers)
	}
	toJaeger := false
	for _, name := range traces.Exporters {
		host, _, err := net.SplitHostPort(c.Exporters[name].Endpoint)
		if err == nil && host == "jaeger" {
			toJaeger = true
		}
	}
	if _, ok := p.Services["jaeger"]; !ok || !toJaeger {
		t.Errorf("the collector's traces pipeline exports %v, none to the jaeger service", traces.Exporters)
	}
}
