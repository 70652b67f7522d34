package nginxconf

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLint(t *testing.T) {
	const check = `location = /_svc_check { internal; proxy_pass http://127.0.0.1:7700/check; proxy_set_header X_Svc_Method $request_method; }
location / { auth_request /_svc_check; proxy_pass http://app; }
`
	tests := []struct {
		name, conf string
		want       []string // Finding.String()
	}{
		{"shipped shape", "http { server {\n" + check + "} }", nil},
		{"underscores on", "http {\n  underscores_in_headers on;\n server {\n" + check + "} }",
			[]string{"2: underscores_in_headers"}},
		{"underscores on in any case, in a server", "http { server {\n\n underscores_in_headers ON;\n" + check + "} }",
			[]string{"3: underscores_in_headers"}},
		{"underscores off", "http { underscores_in_headers off; server {\n" + check + "} }", nil},
		{"invalid headers passed on", "http {\nignore_invalid_headers off;\n" + check + "}",
			[]string{"2: ignore_invalid_headers"}},
		{"commented out", "http { # underscores_in_headers on;\n" + check + "}", nil},
		{"quoted", "http { add_header X \"a; underscores_in_headers on;\";\n" + check + "}", nil},
		{"auth_request without the method", "http {\nserver {\nlocation / {\n auth_request /_svc_check;\n proxy_pass http://app; }\n" +
			"location = /_svc_check { proxy_set_header X-Original-URI $request_uri; proxy_set_header X-Original-Method $request_method; } } }",
			[]string{"4: auth_request"}},
		{"auth_request off only", "http { location / { auth_request off; } }", nil},
		{"both", "underscores_in_headers on;\nlocation / { auth_request /x; }",
			[]string{"1: underscores_in_headers", "2: auth_request"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range Lint([]byte(tt.conf)) {
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
		if f := Lint(b); len(f) != 0 {
			t.Errorf("%s: %v", p, f)
		}
	}
}

func FuzzLint(f *testing.F) {
	f.Add("http { underscores_in_headers on; location / { auth_request /x; } }")
	f.Add("a 'b;c' \"d\\\"e\" # f\n g;")
	f.Fuzz(func(t *testing.T, s string) {
		for _, fd := range Lint([]byte(s)) {
			if fd.Line < 1 || fd.Msg == "" {
				t.Fatalf("finding %+v", fd)
			}
		}
	})
}
