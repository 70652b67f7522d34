package nginxconf

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	const check = `location = /_svc_check { internal; proxy_pass http://127.0.0.1:7700/check; proxy_set_header X_Svc_Method $request_method; }
location / { auth_request /_svc_check; proxy_pass http://app; }
`
	const certCheck = `location = /_svc_check { internal; proxy_pass http://127.0.0.1:7700/check; proxy_set_header X_Svc_Method $request_method; proxy_set_header X-Forwarded-Client-Cert ""; }
location / { auth_request /_svc_check; proxy_pass http://app; }
`
	tests := []struct {
		name, conf string
		sc         Sidecar
		want       []string // Finding.String()
	}{
		{"shipped shape", "http { server {\n" + check + "} }", Sidecar{}, nil},
		{"underscores on", "http {\n  underscores_in_headers on;\n server {\n" + check + "} }",
			Sidecar{}, []string{"2: underscores_in_headers"}},
		{"underscores on in any case, in a server", "http { server {\n\n underscores_in_headers ON;\n" + check + "} }",
			Sidecar{}, []string{"3: underscores_in_headers"}},
		{"underscores off", "http { underscores_in_headers off; server {\n" + check + "} }", Sidecar{}, nil},
		{"invalid headers passed on", "http {\nignore_invalid_headers off;\n" + check + "}",
			Sidecar{}, []string{"2: ignore_invalid_headers"}},
		{"commented out", "http { # underscores_in_headers on;\n" + check + "}", Sidecar{}, nil},
		{"quoted", "http { add_header X \"a; underscores_in_headers on;\";\n" + check + "}", Sidecar{}, nil},
		{"auth_request without the method", "http {\nserver {\nlocation / {\n auth_request /_svc_check;\n proxy_pass http://app; }\n" +
			"location = /_svc_check { proxy_set_header X-Original-URI $request_uri; proxy_set_header X-Original-Method $request_method; } } }",
			Sidecar{}, []string{"4: auth_request"}},
		{"auth_request off only", "http { location / { auth_request off; } }", Sidecar{}, nil},
		{"both", "underscores_in_headers on;\nlocation / { auth_request /x; }",
			Sidecar{}, []string{"1: underscores_in_headers", "2: auth_request"}},
		{"client certificates: a client's header passed on", "http { server {\n" + check + "} }",
			Sidecar{ReadsClientCert: true}, []string{"3: auth_request"}},
		{"client certificates: the header dropped", "http { server {\n" + certCheck + "} }",
			Sidecar{ReadsClientCert: true}, nil},
		{"client certificates: the header set from the verified one", "http { server {\n" + strings.Replace(certCheck, `""`, `'Cert="$ssl_client_escaped_cert"'`, 1) + "} }",
			Sidecar{ReadsClientCert: true}, nil},
		{"client certificates: the header name in another case", "http { server {\n" + strings.Replace(certCheck, "X-Forwarded-Client-Cert", "x-forwarded-client-cert", 1) + "} }",
			Sidecar{ReadsClientCert: true}, nil},
		{"client certificates not read", "http { server {\n" + check + "} }", Sidecar{}, nil},
		// optional_no_ca lets a self-signed certificate through, with
		// $ssl_client_verify "FAILED:...": passed on unconditionally, any
		// client names the workload it likes.
		{"client certificates: optional_no_ca passed on unchecked", "http { server {\nssl_verify_client optional_no_ca;\n" +
			strings.Replace(certCheck, `""`, `'Cert="$ssl_client_escaped_cert"'`, 1) + "} }",
			Sidecar{ReadsClientCert: true}, []string{"2: ssl_verify_client"}},
		{"client certificates: optional_no_ca, only a verified one passed on", "http {\nmap $ssl_client_verify $svc_xfcc { SUCCESS 'Cert=\"$ssl_client_escaped_cert\"'; default \"\"; }\n" +
			"server {\nssl_verify_client optional_no_ca;\n" + strings.Replace(certCheck, `""`, `$svc_xfcc`, 1) + "} }",
			Sidecar{ReadsClientCert: true}, nil},
		{"client certificates: optional_no_ca, the header dropped", "http { server {\nssl_verify_client optional_no_ca;\n" + certCheck + "} }",
			Sidecar{ReadsClientCert: true}, nil},
		{"client certificates: optional refuses a failed certificate itself", "http { server {\nssl_verify_client optional;\n" +
			strings.Replace(certCheck, `""`, `'Cert="$ssl_client_escaped_cert"'`, 1) + "} }",
			Sidecar{ReadsClientCert: true}, nil},
		{"client certificates not read: optional_no_ca", "http { server {\nssl_verify_client optional_no_ca;\n" +
			strings.Replace(certCheck, `""`, `'Cert="$ssl_client_escaped_cert"'`, 1) + "} }",
			Sidecar{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range Lint([]byte(tt.conf), tt.sc) {
				if f.Msg == "" {
					t.Errorf("%s: no message", f.Directive)
				}
				got = append(got, f.String()[:len(f.String())-len(f.Msg)-2])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings %q, want %q", got, tt.want)
			}
		})
	}
}

// TestShippedConfigsClean: the nginx configurations shipped in deploy/
// have no finding.
func TestShippedConfigsClean(t *testing.T) {
	for _, p := range []string{"deploy/nginx/nginx.conf", "deploy/demo/nginx.conf"} {
		b, err := os.ReadFile(filepath.Join("..", "..", p))
		if err != nil {
			t.Fatal(err)
		}
		if f := Lint(b, Sidecar{ReadsClientCert: true}); len(f) != 0 {
			t.Errorf("%s: %v", p, f)
		}
	}
}

func FuzzLint(f *testing.F) {
	f.Add("http { underscores_in_headers on; location / { auth_request /x; } }")
	f.Add("a 'b;c' \"d\\\"e\" # f\n g;")
	f.Fuzz(func(t *testing.T, s string) {
		for _, fd := range Lint([]byte(s), Sidecar{ReadsClientCert: true}) {
			if fd.Line < 1 || fd.Msg == "" {
				t.Fatalf("finding %+v", fd)
			}
		}
	})
}
