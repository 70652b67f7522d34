package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// printHelp writes the full help of svc-sidecar: the flags, where the
// configuration comes from, the default listen addresses, every SVC_*
// variable of engine/config (so that the list cannot drift) and the other
// variables the sidecar reads: SVC_ENV, OTEL_* and GOGC.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	var defaults config.Config
	defaults.SetDefaults()
	fmt.Fprintf(w, `Usage: svc-sidecar [--config <path>] [--version]
       svc-sidecar [--config <path>] saml metadata|test-assertion [flags]

svc-sidecar answers authentication and authorization questions: Envoy
ext_authz and svc.authz.v1 over gRPC, and a local HTTP API (JSON API, proxy
check mode for nginx and Caddy, status, admin endpoints, Prometheus metrics).

The saml subcommands are those of core saml (the same flags and output):
  metadata         print the SP metadata XML of the [sdk.saml] configuration
  test-assertion   sign a SAMLResponse with a local test IdP, for the ACS
  See 'svc-sidecar saml <command> --help'.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, `
Configuration file:
  --config <path>   a .toml, .yaml or .yml file
  otherwise         %s in the working directory, when it exists
  otherwise         the defaults: development mode (no identity source: no
                    sdk.jwks_url, no [sdk.saml]; every bearer accepted as
                    "anonymous"), the embedded default policy
  Every key is documented in svc.example.toml and in docs/configuration.md.
  Errors name the key and where it was set.

Listens on (defaults):
`, defaultConfigFile)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  gRPC\t%s\tsdk.sidecar_addr (SVC_SIDECAR_ADDR): Envoy ext_authz, svc.authz.v1, health, reflection\n", defaults.SDK.SidecarAddr)
	fmt.Fprintf(tw, "  HTTP\t%s\tsidecar.http_addr (SVC_HTTP_ADDR): /v1/..., /check, /healthz, /readyz, /metrics\n", defaults.Sidecar.HTTPAddr)
	fmt.Fprintf(tw, "  SAML\t%s\tsidecar.saml_addr (SVC_SAML_ADDR): with [sdk.saml] only\n", defaults.Sidecar.SAMLAddr)
	_ = tw.Flush()
	fmt.Fprintf(w, `  The gRPC and HTTP addresses are host:port or unix:///path/to.sock (mode
  sidecar.socket_mode). With sidecar.tls_cert_file and tls_key_file the
  listeners serve TLS; with sidecar.tls_client_ca_file, mutual TLS.
`)
	fmt.Fprintf(w, "\nEnvironment (each SVC_* variable overrides its key of the file):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range config.EnvVars() {
		key := v.Key
		if v.EnvOnly {
			key = "(environment only)" // no file key: key material never sits in a file
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, key, v.Help)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nOther variables:\n")
	fmt.Fprintf(w, "  %s=%s\n%s", samlgw.DevEnvVar, samlgw.DevEnvValue, wrapText("turns off SAML signature verification, for an identity provider "+
		"that does not sign; accepted only in "+config.LocalTrialRule()+"; in any other configuration, with [sdk.saml] or "+
		"without, the sidecar refuses to start (and a SIGHUP keeps the running configuration), naming the listener or setting", "    ", 80))
	fmt.Fprintf(w, "  %s, %s, ...\n    OpenTelemetry export of traces and metrics (OTLP); unset, nothing is exported\n",
		telemetry.EnvEndpoint, telemetry.EnvSDKDisabled)
	fmt.Fprintf(w, "  GOGC\n    when set, the sidecar leaves the garbage collector's tuning to it\n")
	fmt.Fprintf(w, `
Signals: SIGTERM or SIGINT drain in-flight requests (sidecar.drain_timeout)
and exit 0. SIGHUP reads the configuration file again: an invalid one is
logged and changes nothing, an unchanged one reloads the policies, a changed
one is applied by a new image of this process that inherits the listening
sockets (as core sidecar restart). Exit codes: 0 clean stop, 1 the configuration or a listener
failed (the message names the setting), 2 a usage error.
`)
}

// wrapText breaks s into lines of at most width columns (a longer word
// stands alone), each starting with indent.
func wrapText(s, indent string, width int) string {
	var b, line strings.Builder
	for _, word := range strings.Fields(s) {
		if line.Len() > 0 && len(indent)+line.Len()+1+len(word) > width {
			b.WriteString(indent + line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(word)
	}
	if line.Len() > 0 {
		b.WriteString(indent + line.String() + "\n")
	}
	return b.String()
}
