package envoy

import (
	"net"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"

	"github.com/svc-dev/svc/engine/config"
)

// The shipped Envoy configs send the SAML endpoints to the sidecar's SAML
// listener, with ext_authz disabled on that route only and the client
// named in X-Real-IP.
func TestShippedEnvoySAMLRoute(t *testing.T) {
	for _, path := range []string{"deploy/envoy/envoy.yaml", "deploy/envoy/envoy-http.yaml", "deploy/demo/envoy.yaml"} {
		t.Run(path, func(t *testing.T) {
			s := inspectEnvoy(t, path)
			var saml *routev3.Route
			var routes []*routev3.Route
			for _, vh := range s.hcm.GetRouteConfig().GetVirtualHosts() {
				routes = append(routes, vh.GetRoutes()...)
			}
			for i, r := range routes {
				if r.GetMatch().GetPrefix() == config.DefaultSAMLPathPrefix+"/" {
					saml = r
					for _, earlier := range routes[:i] {
						if p := earlier.GetMatch().GetPrefix(); p == "/" || p == "/auth/" {
							t.Errorf("a route with prefix %q shadows the SAML route", p)
						}
					}
				}
			}
			if saml == nil {
				t.Fatalf("no route for %s/", config.DefaultSAMLPathPrefix)
			}
			cluster := saml.GetRoute().GetCluster()
			_, wantPort, _ := net.SplitHostPort(config.DefaultSAMLAddr)
			if _, port, _ := net.SplitHostPort(s.clusters[cluster]); port != wantPort {
				t.Errorf("SAML route goes to %s (%s), want the SAML listener's port %s", cluster, s.clusters[cluster], wantPort)
			}
			// The ACS keeps its budgets per client: Envoy names it, over
			// whatever the client sent (sidecar.trusted_proxies).
			var realIP bool
			for _, h := range saml.GetRequestHeadersToAdd() {
				if strings.EqualFold(h.GetHeader().GetKey(), "x-real-ip") {
					realIP = h.GetHeader().GetValue() == "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%" &&
						h.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
				}
			}
			if !realIP {
				t.Error("the SAML route does not set X-Real-IP to %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%, overwriting the client's")
			}
			pr := unpack(t, saml.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"], &extauthzv3.ExtAuthzPerRoute{})
			if !pr.GetDisabled() {
				t.Error("ext_authz is not disabled on the SAML route")
			}
			// OpenID Connect sign-in goes to the same listener, unchecked.
			var oidc *routev3.Route
			for _, r := range routes {
				if r.GetMatch().GetPrefix() == config.DefaultOIDCPathPrefix+"/" {
					oidc = r
				}
			}
			if oidc == nil || oidc.GetRoute().GetCluster() != cluster ||
				!unpack(t, oidc.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"], &extauthzv3.ExtAuthzPerRoute{}).GetDisabled() {
				t.Errorf("route for %s/: %v, want the sign-in listener's cluster %s without ext_authz", config.DefaultOIDCPathPrefix, oidc, cluster)
			}
			// Every other route is still authorized.
			for _, r := range routes {
				if r == saml || r == oidc || r.GetMatch().GetPath() == "/healthz" {
					continue
				}
				if cfg := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]; cfg != nil {
					if unpack(t, cfg, &extauthzv3.ExtAuthzPerRoute{}).GetDisabled() {
						t.Errorf("ext_authz disabled on %v", r.GetMatch())
					}
				}
			}
		})
	}
}
