package deploy

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	istionetworkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/svc-dev/svc/engine/config"
)

// build runs kustomize on dir as `kubectl apply -k` would and decodes
// every resource of the result strictly.
func build(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []object
	for _, r := range m.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeManifest(doc)
		if err != nil {
			t.Fatalf("%s: %s/%s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		objs = append(objs, o)
	}
	return objs
}

func find[T any](t *testing.T, objs []object, kind string) []T {
	t.Helper()
	var out []T
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o.Value.(T))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s", kind)
	}
	return out
}

// pod is what the checks read from the one Deployment of a variant.
type pod struct {
	deploy  *appsv1.Deployment
	app     corev1.Container
	sidecar corev1.Container
	cfg     config.Config
}

func inspectPod(t *testing.T, objs []object) pod {
	t.Helper()
	deps := find[*appsv1.Deployment](t, objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, got %d", len(deps))
	}
	p := pod{deploy: deps[0]}
	spec := p.deploy.Spec.Template.Spec
	if len(spec.Containers) != 2 {
		t.Fatalf("want the application and the sidecar, got %d containers", len(spec.Containers))
	}
	for _, c := range spec.Containers {
		if c.Image == "svc-sidecar:0.1.0" {
			p.sidecar = c
		} else {
			p.app = c
		}
	}
	if p.sidecar.Name == "" {
		t.Fatal("no container runs the svc-sidecar image")
	}

	// The sidecar's svc.toml comes from the generated ConfigMap mounted
	// where --config points.
	var cmName string
	for _, v := range spec.Volumes {
		for _, m := range p.sidecar.VolumeMounts {
			if m.Name == v.Name && v.ConfigMap != nil && slices.Contains(p.sidecar.Args, path.Join(m.MountPath, "svc.toml")) {
				cmName = v.ConfigMap.Name
			}
		}
	}
	var toml string
	for _, cm := range find[*corev1.ConfigMap](t, objs, "ConfigMap") {
		if cm.Name == cmName {
			toml = cm.Data["svc.toml"]
		}
	}
	if toml == "" {
		t.Fatalf("the sidecar's --config %v is no svc.toml of a ConfigMap in the build (volume names %q)", p.sidecar.Args, cmName)
	}
	cfg, err := config.Parse([]byte(toml), config.FormatTOML, "ConfigMap "+cmName+" svc.toml")
	if err != nil {
		t.Fatalf("svc.toml: %v", err)
	}
	p.cfg = cfg
	return p
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, name)
	return 0
}

func addrPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// checkPod holds what every variant promises: production settings, probes
// on the sidecar's health endpoints, limits, a locked-down runtime, and
// keys from a Secret.
func checkPod(t *testing.T, objs []object) pod {
	t.Helper()
	p := inspectPod(t, objs)
	spec := p.deploy.Spec.Template.Spec

	if p.cfg.SDK.FailMode != config.FailClosed || p.cfg.SDK.JWKSURL == "" {
		t.Errorf("svc.toml: fail_mode %q, jwks_url %q: want the production settings", p.cfg.SDK.FailMode, p.cfg.SDK.JWKSURL)
	}
	if got, want := containerPort(t, p.sidecar, "grpc"), addrPort(t, p.cfg.SDK.SidecarAddr); got != want {
		t.Errorf("sidecar grpc port %d, svc.toml sidecar_addr %s", got, p.cfg.SDK.SidecarAddr)
	}
	httpPort := containerPort(t, p.sidecar, "svc-http")
	if want := addrPort(t, p.cfg.Sidecar.HTTPAddr); httpPort != want {
		t.Errorf("sidecar svc-http port %d, svc.toml http_addr %s", httpPort, p.cfg.Sidecar.HTTPAddr)
	}
	if host, _, _ := net.SplitHostPort(p.cfg.Sidecar.HTTPAddr); net.ParseIP(host).IsLoopback() {
		t.Errorf("http_addr %s is loopback: the kubelet's probes cannot reach it", p.cfg.Sidecar.HTTPAddr)
	}
	probes := map[string]*corev1.Probe{"readiness": p.sidecar.ReadinessProbe, "liveness": p.sidecar.LivenessProbe, "startup": p.sidecar.StartupProbe}
	wantPath := map[string]string{"readiness": "/readyz", "liveness": "/healthz", "startup": "/readyz"}
	for name, pr := range probes {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("sidecar has no HTTP %s probe", name)
			continue
		}
		if pr.HTTPGet.Path != wantPath[name] || pr.HTTPGet.Port.StrVal != "svc-http" {
			t.Errorf("sidecar %s probe GET %s on %s, want %s on svc-http", name, pr.HTTPGet.Path, pr.HTTPGet.Port.String(), wantPath[name])
		}
	}
	if p.app.ReadinessProbe == nil || p.app.LivenessProbe == nil {
		t.Errorf("application container %s lacks probes", p.app.Name)
	}

	// The admin token file is an item of a Secret volume.
	keyDir, keyFile := filepath.Split(p.cfg.Sidecar.AdminTokenFile)
	var fromSecret bool
	for _, m := range p.sidecar.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil || filepath.Clean(m.MountPath) != filepath.Clean(keyDir) {
				continue
			}
			for _, it := range v.Secret.Items {
				fromSecret = fromSecret || it.Path == keyFile
			}
		}
	}
	if !fromSecret {
		t.Errorf("admin_token_file %s is not an item of a mounted Secret", p.cfg.Sidecar.AdminTokenFile)
	}

	// The root filesystem is read-only: what the sidecar keeps across a
	// restart goes to a writable volume, or rollback protection would be
	// lost without a word.
	if p.cfg.Sidecar.StateDir == "" {
		t.Error("svc.toml sets no sidecar.state_dir: with a read-only root nothing survives a restart")
	}
	var stateMounted bool
	for _, m := range p.sidecar.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil && !m.ReadOnly && filepath.Clean(m.MountPath) == filepath.Clean(p.cfg.Sidecar.StateDir) {
				stateMounted = true
			}
		}
	}
	if !stateMounted {
		t.Errorf("sidecar.state_dir %s is not a writable emptyDir mount of the sidecar", p.cfg.Sidecar.StateDir)
	}

	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("pod does not run as a non-root user")
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: root filesystem is writable", c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s may escalate privileges", c.Name)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s keeps its capabilities", c.Name)
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[res]; !ok {
				t.Errorf("container %s: no %s request", c.Name, res)
			}
			if _, ok := c.Resources.Limits[res]; !ok {
				t.Errorf("container %s: no %s limit", c.Name, res)
			}
		}
	}

	// The Service selects the pod and targets the application's port.
	labels := p.deploy.Spec.Template.Labels
	svcs := find[*corev1.Service](t, objs, "Service")
	for _, s := range svcs {
		if len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s selects nothing", s.Name)
		}
		for k, v := range s.Spec.Selector {
			if labels[k] != v {
				t.Errorf("Service %s selects %s=%s, the pod has %q", s.Name, k, v, labels[k])
			}
		}
		for _, sp := range s.Spec.Ports {
			containerPort(t, p.app, sp.TargetPort.StrVal)
		}
	}
	return p
}

func TestKubernetesBase(t *testing.T) {
	objs := build(t, "kubernetes/base")
	p := checkPod(t, objs)
	// Without a mesh, the application asks the sidecar itself.
	if i := slices.Index(p.app.Args, "--sidecar"); i < 0 || p.app.Args[i+1] != p.cfg.SDK.SidecarAddr {
		t.Errorf("application args %q do not name the sidecar at %s", p.app.Args, p.cfg.SDK.SidecarAddr)
	}
}

func TestKubernetesIstio(t *testing.T) {
	objs := build(t, "kubernetes/istio")
	p := checkPod(t, objs)
	if slices.Contains(p.app.Args, "--sidecar") || !slices.Contains(p.app.Args, "--trust-proxy-headers") {
		t.Errorf("behind istio-proxy the application trusts the sidecar's headers; args %q", p.app.Args)
	}
	ns := find[*corev1.Namespace](t, objs, "Namespace")[0]
	if ns.Labels["istio-injection"] != "enabled" {
		t.Errorf("namespace %s does not enable sidecar injection", ns.Name)
	}
	for _, o := range objs {
		if o.Kind != "Namespace" && o.Namespace != ns.Name {
			t.Errorf("%s %s is in namespace %q, want %s", o.Kind, o.Name, o.Namespace, ns.Name)
		}
	}

	mesh := loadMeshConfig(t, "kubernetes/istio/mesh-config.yaml")
	providers := map[string]*meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationGrpcProvider{}
	for _, ep := range mesh.GetExtensionProviders() {
		if g := ep.GetEnvoyExtAuthzGrpc(); g != nil {
			providers[ep.GetName()] = g
		}
	}

	policies := find[*istiosecurityv1.AuthorizationPolicy](t, objs, "AuthorizationPolicy")
	labels := p.deploy.Spec.Template.Labels
	for _, ap := range policies {
		if ap.Spec.GetAction().String() != "CUSTOM" {
			t.Errorf("AuthorizationPolicy %s action %s, want CUSTOM", ap.Name, ap.Spec.GetAction())
		}
		for k, v := range ap.Spec.GetSelector().GetMatchLabels() {
			if labels[k] != v {
				t.Errorf("AuthorizationPolicy %s selects %s=%s, the pod has %q", ap.Name, k, v, labels[k])
			}
		}
		if len(ap.Spec.GetSelector().GetMatchLabels()) == 0 {
			t.Errorf("AuthorizationPolicy %s applies to the whole namespace", ap.Name)
		}
		g := providers[ap.Spec.GetProvider().GetName()]
		if g == nil {
			t.Fatalf("AuthorizationPolicy %s names provider %q, mesh-config.yaml has no envoyExtAuthzGrpc of that name", ap.Name, ap.Spec.GetProvider().GetName())
		}
		if g.GetFailOpen() || g.GetStatusOnError() != "503" {
			t.Errorf("provider %s: failOpen %v statusOnError %q, want closed with 503 as sdk.fail_mode=closed", ap.Spec.GetProvider().GetName(), g.GetFailOpen(), g.GetStatusOnError())
		}
		// The provider's service is a ServiceEntry on the pod's loopback,
		// at the port the sidecar listens on.
		var resolved bool
		for _, se := range find[*istionetworkingv1.ServiceEntry](t, objs, "ServiceEntry") {
			if !slices.Contains(se.Spec.GetHosts(), g.GetService()) {
				continue
			}
			resolved = true
			host, _, _ := net.SplitHostPort(p.cfg.SDK.SidecarAddr)
			if eps := se.Spec.GetEndpoints(); len(eps) != 1 || eps[0].GetAddress() != host {
				t.Errorf("ServiceEntry %s endpoints %v, want the sidecar's address %s", se.Name, eps, host)
			}
			var portOK bool
			for _, sp := range se.Spec.GetPorts() {
				portOK = portOK || (int32(sp.GetNumber()) == addrPort(t, p.cfg.SDK.SidecarAddr) && sp.GetProtocol() == "GRPC")
			}
			if !portOK || int32(g.GetPort()) != addrPort(t, p.cfg.SDK.SidecarAddr) {
				t.Errorf("provider port %d / ServiceEntry ports %v, the sidecar listens on %s", g.GetPort(), se.Spec.GetPorts(), p.cfg.SDK.SidecarAddr)
			}
		}
		if !resolved {
			t.Errorf("no ServiceEntry has the provider's service %q", g.GetService())
		}
	}
}

// loadMeshConfig decodes the meshConfig block of istiod values strictly
// into Istio's MeshConfig.
func loadMeshConfig(t *testing.T, file string) *meshv1alpha1.MeshConfig {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := decodeMeshValues(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return mesh
}

func decodeMeshValues(raw []byte) (*meshv1alpha1.MeshConfig, error) {
	var values struct {
		MeshConfig any `json:"meshConfig"`
	}
	if err := yaml.UnmarshalStrict(raw, &values); err != nil {
		return nil, err
	}
	js, err := yaml.Marshal(values.MeshConfig)
	if err != nil {
		return nil, err
	}
	if js, err = yaml.YAMLToJSON(js); err != nil {
		return nil, err
	}
	var mesh meshv1alpha1.MeshConfig
	if err := protojson.Unmarshal(js, &mesh); err != nil {
		return nil, err
	}
	return &mesh, nil
}

// TestStrictDecoding proves the decoders above refuse what Kubernetes or
// istiod would refuse or silently ignore.
func TestStrictDecoding(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"deployment unknown field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n        imagePullPolicyy: Always\n", "imagePullPolicyy"},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n", "already set"},
		{"authorization policy unknown spec field", "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: x}\nspec:\n  action: CUSTOM\n  providr: {name: svc-sidecar}\n", "providr"},
		{"authorization policy bad enum", "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: x}\nspec:\n  action: CUSTOMISED\n", "CUSTOMISED"},
		{"service entry unknown spec field", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: x}\nspec:\n  hosts: [a.local]\n  resolutoin: STATIC\n", "resolutoin"},
		{"unknown kind", "apiVersion: v1\nkind: Pdo\nmetadata: {name: x}\n", "unknown kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeManifest([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	t.Run("mesh config unknown field", func(t *testing.T) {
		_, err := decodeMeshValues([]byte("meshConfig:\n  extensionProviders:\n  - name: x\n    envoyExtAuthzGrpc: {service: a, port: 1, failOpn: true}\n"))
		if err == nil || !strings.Contains(err.Error(), "failOpn") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("mesh values unknown top-level key", func(t *testing.T) {
		if _, err := decodeMeshValues([]byte("meshConfg: {}\n")); err == nil {
			t.Fatal("accepted")
		}
	})
}
