package nginxconf_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/nginxconf"
)

// The shipped deploy/nginx/nginx.conf is the default rendering: the file
// a user copies and the one core deploy nginx writes cannot drift apart.
// Run with -update to write it again after changing the template.
var update = flag.Bool("update", false, "write deploy/nginx/nginx.conf from the template")

func TestShippedFileIsTheDefaultRendering(t *testing.T) {
	got, err := nginxconf.Render(nginxconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "deploy", "nginx", "nginx.conf")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("deploy/nginx/nginx.conf is not what core deploy nginx renders by default; go test ./internal/nginxconf -run TestShippedFileIsTheDefaultRendering -update")
	}
}

func TestRenderUsesTheAddressesGiven(t *testing.T) {
	got, err := nginxconf.Render(nginxconf.Options{Listen: "10.0.0.5:80", App: "app.internal:9000",
		Sidecar: "unix:/run/svc/http.sock", SignIn: "[::1]:7801", Pid: "/var/run/front.pid"})
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{"listen 10.0.0.5:80;", "server app.internal:9000;", "server unix:/run/svc/http.sock;",
		"server [::1]:7801;", "pid /var/run/front.pid;", "proxy_set_header X_Svc_Method      $request_method;",
		"core deploy nginx --listen 10.0.0.5:80 --app app.internal:9000 --sidecar unix:/run/svc/http.sock --signin [::1]:7801 --pid /var/run/front.pid\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("rendering lacks %q", want)
		}
	}
	for _, gone := range []string{"8080", "5678", "7700", "7701", "svc-nginx.pid"} {
		if strings.Contains(s, gone) {
			t.Errorf("rendering still holds the default %q", gone)
		}
	}
	if f := nginxconf.Lint(got, nginxconf.Sidecar{ReadsClientCert: true}); len(f) > 0 {
		t.Errorf("Lint: %v", f)
	}
}

func TestRenderWithoutSignIn(t *testing.T) {
	got, err := nginxconf.Render(nginxconf.Options{SignIn: nginxconf.NoSignIn})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"svc_saml", "/auth/saml/", "7701"} {
		if strings.Contains(string(got), gone) {
			t.Errorf("rendering without sign-in holds %q", gone)
		}
	}
}

// An address that would smuggle a directive into the file is refused,
// naming the option.
func TestRenderRefusesWhatIsNotAnAddress(t *testing.T) {
	for _, tc := range []struct {
		o    nginxconf.Options
		want string
	}{
		{nginxconf.Options{Listen: "8080; include /etc/passwd"}, "listen"},
		{nginxconf.Options{Listen: "70000"}, "listen"},
		{nginxconf.Options{App: "127.0.0.1"}, "app"},
		{nginxconf.Options{App: "127.0.0.1:80;}"}, "app"},
		{nginxconf.Options{Sidecar: "unix:relative.sock"}, "sidecar"},
		{nginxconf.Options{Sidecar: "unix:/a b"}, "sidecar"},
		{nginxconf.Options{SignIn: "$host:1"}, "signin"},
		{nginxconf.Options{Pid: "/tmp/x;y"}, "pid"},
	} {
		if _, err := nginxconf.Render(tc.o); err == nil || !strings.HasPrefix(err.Error(), tc.want+" ") {
			t.Errorf("Render(%+v) = %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
}
