package telemetry

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/internal/testkit"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		raw      string
		insecure bool
		want     target
		wantErr  string
	}{
		{"host_port_tls", "collector:4317", false, target{hostport: "collector:4317"}, ""},
		{"host_port_insecure", "collector:4317", true, target{hostport: "collector:4317", insecure: true}, ""},
		{"ipv6_host_port", "[::1]:4317", true, target{hostport: "[::1]:4317", insecure: true}, ""},
		{"http_url", "http://collector:4317", false, target{url: "http://collector:4317", hostport: "collector:4317", insecure: true}, ""},
		{"https_url_wins_over_insecure", "https://collector:4317", true, target{url: "https://collector:4317", hostport: "collector:4317"}, ""},
		{"url_default_port", "http://collector", false, target{url: "http://collector:4317", hostport: "collector:4317", insecure: true}, ""},
		{"url_path_ignored", "HTTP://collector:4317/v1/traces", false, target{url: "http://collector:4317", hostport: "collector:4317", insecure: true}, ""},
		{"spaces_trimmed", " http://collector:4317 ", false, target{url: "http://collector:4317", hostport: "collector:4317", insecure: true}, ""},
		{"no_port", "collector", false, target{}, "want host:port"},
		{"no_host", ":4317", false, target{}, "want host:port"},
		{"bad_port", "collector:otlp", false, target{}, "port must be a number"},
		{"url_bad_port", "http://collector:99999", false, target{}, "port must be a number"},
		{"grpc_scheme", "grpc://collector:4317", false, target{}, `scheme "grpc"`},
		{"url_no_host", "http:///x", false, target{}, "has no host"},
		{"credentials_not_echoed", "https://user:pw@:4317", false, target{}, "has no host"},
		{"credentials_without_scheme", "user:pw@collector:4317", false, target{}, "user information"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEndpoint(tc.raw, tc.insecure)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseEndpoint(%q) error = %v, want one containing %q", tc.raw, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Errorf("error echoes a password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(target{})); diff != "" {
				t.Errorf("parseEndpoint(%q) (-want +got):\n%s", tc.raw, diff)
			}
		})
	}
}

func TestApplyEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   Options
		env     map[string]string
		want    Options
		wantErr string
	}{
		{"nothing_set", Options{}, nil, Options{}, ""},
		{"endpoint_and_insecure",
			Options{},
			map[string]string{EnvEndpoint: "collector:4317", EnvInsecure: "true"},
			Options{OTLPEndpoint: "collector:4317", Insecure: true}, ""},
		{"per_signal",
			Options{},
			map[string]string{EnvTracesEndpoint: "http://t:4317", EnvMetricsEndpoint: "http://m:4317"},
			Options{TracesEndpoint: "http://t:4317", MetricsEndpoint: "http://m:4317"}, ""},
		{"explicit_endpoint_kept",
			Options{OTLPEndpoint: "http://mine:4317"},
			map[string]string{EnvEndpoint: "http://env:4317"},
			Options{OTLPEndpoint: "http://mine:4317"}, ""},
		{"sdk_disabled",
			Options{OTLPEndpoint: "http://mine:4317"},
			map[string]string{EnvTracesEndpoint: "http://t:4317", EnvSDKDisabled: "true"},
			Options{}, ""},
		{"bad_insecure", Options{}, map[string]string{EnvInsecure: "yes please"}, Options{}, EnvInsecure},
		{"bad_disabled", Options{}, map[string]string{EnvSDKDisabled: "maybe"}, Options{}, EnvSDKDisabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.start
			err := o.ApplyEnv(func(k string) string { return tc.env[k] })
			if testkit.ExpectErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, o); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}
