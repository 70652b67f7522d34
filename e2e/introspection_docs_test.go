package e2e

import (
	"regexp"
	"testing"
)

// TestIntrospectionDocsBlock runs the "local provider" block of
// docs/introspection.md as written: oidc-provider issues an opaque token,
// and a sidecar that introspects it allows it. Only the fixed ports,
// /tmp and bin/ are swapped.
func TestIntrospectionDocsBlock(t *testing.T) {
	idp, out := runLocalProviderBlock(t, "introspection.md", "## Try it with a local provider", "9410", "50072", "7721", "/tmp/svc-introspect")
	answersInOrder(t, "the docs/introspection.md block", out,
		`opaque token: 4\d characters`,
		`"allowed":true,"reason":"policy-allow".*"subject":"orders-job","tenant_id":"acme"`,
		`"allowed":false.*"reason":"token-inactive"`,
		`"introspection":\{"url":"`+regexp.QuoteMeta("http://"+idp+"/token/introspection")+`","shared":false,"cache_entries":2,"calls":2,"failures":0\}`,
	)
}
