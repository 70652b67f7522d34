// Package e2e holds the end-to-end tests of svc. They build the real
// binaries (svc-sidecar) and drive them as processes over loopback against
// real peers: an OpenID provider issuing JWTs (npm oidc-provider), nginx
// auth_request and Caddy forward_auth from the system, gRPC clients built
// from go-control-plane's ext_authz types, the Go SDK and its middleware,
// an OTLP receiver, and headless Chromium (driven by chromedp) for what a
// person sees signing in with SAML. The package harness runs the processes.
//
// Run them with:
//
//	./scripts/install-test-deps.sh   # nginx, caddy, chromium, npm ci in e2e/
//	go test -race -count=1 ./e2e/...
//
// A test whose external peer is missing is skipped, unless the CI
// environment variable is set: then it fails. With E2E_VERBOSE set, the
// output of every process (sidecar, provider, proxies) is written to the
// test log even when the test passes.
package e2e
