package harness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// SvcHeaders are the headers the sidecar sets on an allowed request for
// the upstream. Proxies copy them from the check answer and drop whatever
// the client sent under these names.
var SvcHeaders = []string{"X-Svc-User-Id", "X-Svc-Tenant-Id", "X-Svc-Roles", "X-Svc-Decision-Id"}

// Proxy is a reverse proxy (nginx or Caddy) in front of an upstream that
// asks the sidecar's HTTP check endpoint before forwarding a request.
type Proxy struct {
	*Process
	// URL is the proxy's base URL, "http://127.0.0.1:port".
	URL string
	// Dir holds the generated configuration, logs and temporary files.
	Dir string
}

// NginxConfig returns an nginx configuration that listens on addr and
// protects every path with auth_request against the sidecar's /check
// endpoint at sidecarHTTP (passing X-Original-URI and X_Svc_Method),
// copying the x-svc-* answer headers to the request for upstream. Every
// path nginx writes lies under dir.
func NginxConfig(dir, addr, sidecarHTTP, upstream string) string {
	return NginxRoutesConfig(dir, addr, sidecarHTTP, map[string]string{"/": upstream})
}

// NginxRoutesConfig is NginxConfig with one upstream per location prefix,
// as a front proxy routes to several services.
func NginxRoutesConfig(dir, addr, sidecarHTTP string, routes map[string]string) string {
	var b strings.Builder
	nginxHead(&b, dir, "")
	fmt.Fprintf(&b, `
    server {
        listen %[2]s;

        location = /_svc_check {
            internal;
            proxy_pass http://%[3]s/check;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI $request_uri;
            proxy_set_header X_Svc_Method $request_method;
        }
`, dir, addr, sidecarHTTP)
	prefixes := make([]string, 0, len(routes))
	for p := range routes {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	for _, prefix := range prefixes {
		fmt.Fprintf(&b, `
        location %s {
            auth_request /_svc_check;
`, prefix)
		for _, h := range SvcHeaders {
			v := "$svc_" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(h, "X-Svc-")), "-", "_")
			fmt.Fprintf(&b, "            auth_request_set %s $upstream_http_%s;\n", v, strings.ReplaceAll(strings.ToLower(h), "-", "_"))
			// proxy_set_header replaces the client's header of the same
			// name, and sends none when the value is empty.
			fmt.Fprintf(&b, "            proxy_set_header %s %s;\n", h, v)
		}
		fmt.Fprintf(&b, `            proxy_pass http://%s;
        }
`, routes[prefix])
	}
	b.WriteString("    }\n}\n")
	return b.String()
}

// StartNginx runs nginx from the system (Debian package nginx) with
// NginxConfig on a free loopback port until the test ends.
func StartNginx(t testing.TB, sidecarHTTP, upstream string) *Proxy {
	t.Helper()
	return StartNginxRoutes(t, sidecarHTTP, map[string]string{"/": upstream})
}

// StartNginxRoutes runs nginx with NginxRoutesConfig on a free loopback
// port until the test ends.
func StartNginxRoutes(t testing.TB, sidecarHTTP string, routes map[string]string) *Proxy {
	t.Helper()
	return startNginx(t, func(dir, addr string) string { return NginxRoutesConfig(dir, addr, sidecarHTTP, routes) })
}

// StartNginxServer runs nginx from the system until the test ends with a
// configuration of one server block, which server returns for a free
// loopback address to listen on: a test's own configuration, written as
// a user would. The rest (paths under the test's directory, the access
// log) is the harness's.
func StartNginxServer(t testing.TB, server func(addr string) string) *Proxy {
	t.Helper()
	return startNginx(t, func(dir, addr string) string {
		var b strings.Builder
		nginxHead(&b, dir, "")
		b.WriteString(server(addr))
		b.WriteString("\n}\n")
		return b.String()
	})
}

// startNginx runs nginx with the configuration conf returns for its
// directory and listen address, until the test ends.
func startNginx(t testing.TB, conf func(dir, addr string) string) *Proxy {
	t.Helper()
	bin := LookPath(t, "nginx", "nginx", "/usr/sbin/nginx")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatalf("nginx dir: %v", err)
	}
	addr := FreeAddr(t)
	path := WriteFile(t, dir, "nginx.conf", conf(dir, addr))
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", path, "-g", "daemon off;")
	cmd.Env = baseEnv()
	p := &Proxy{Process: StartProcess(t, "nginx", cmd), URL: "http://" + addr, Dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			logFile(t, "nginx error.log", filepath.Join(dir, "error.log"))
		}
	})
	WaitListening(t, p.Process, addr, 20*time.Second)
	return p
}

// CaddyConfig returns a Caddyfile that listens on addr and protects every
// path with forward_auth against the sidecar's /check endpoint at
// sidecarHTTP (Caddy passes X-Forwarded-Method and X-Forwarded-Uri),
// copying the x-svc-* answer headers to the request for upstream after
// deleting the client's own. The admin endpoint is off and storage lies
// under dir.
func CaddyConfig(dir, addr, sidecarHTTP, upstream string) string {
	_, port, _ := net.SplitHostPort(addr)
	host, _, _ := net.SplitHostPort(addr)
	var del strings.Builder
	for _, h := range SvcHeaders {
		fmt.Fprintf(&del, "\t\trequest_header -%s\n", h)
	}
	return fmt.Sprintf(`{
	admin off
	auto_https off
	storage file_system %[1]s/storage
}

http://:%[2]s {
	bind %[3]s
	# route keeps the order written here: the client's x-svc-* headers go
	# first, then the check may set them.
	route {
%[4]s		forward_auth %[5]s {
			uri /check
			copy_headers %[6]s
		}
		reverse_proxy %[7]s
	}
}
`, dir, port, host, del.String(), sidecarHTTP, strings.Join(SvcHeaders, " "), upstream)
}

// StartCaddy runs Caddy from the system (Debian package caddy) with
// CaddyConfig on a free loopback port until the test ends.
func StartCaddy(t testing.TB, sidecarHTTP, upstream string) *Proxy {
	t.Helper()
	bin := LookPath(t, "caddy", "caddy")
	dir := t.TempDir()
	addr := FreeAddr(t)
	conf := WriteFile(t, dir, "Caddyfile", CaddyConfig(dir, addr, sidecarHTTP, upstream))
	cmd := exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = envList(baseEnv(), map[string]string{
		"HOME":            dir,
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"XDG_DATA_HOME":   filepath.Join(dir, "data"),
	})
	p := &Proxy{Process: StartProcess(t, "caddy", cmd), URL: "http://" + addr, Dir: dir}
	WaitListening(t, p.Process, addr, 20*time.Second)
	return p
}

// WaitListening waits until addr accepts TCP connections, failing the test
// when p exits first or within passes; the failure shows p's stderr.
func WaitListening(t testing.TB, p *Process, addr string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after %s: %v\n%s", p.Name, addr, within, err, p.Stderr.String())
		}
		select {
		case <-p.Done():
			t.Fatalf("%s exited with code %d before listening on %s: %s", p.Name, p.ExitCode(), addr, p.Stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logFile writes a file's content to the test log.
func logFile(t testing.TB, what, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return
	}
	t.Logf("%s:\n%s", what, clip(string(b), 64<<10))
}

// StartNginxStatic runs nginx from the system serving the files under
// root on addr (a fixed address, so that a test can stop nginx and start
// it again where clients expect it). nginx answers with its own ETags
// and 304 Not Modified to a matching If-None-Match. Its access log,
// access.log in the returned Proxy's Dir, has one line per request:
// the status, then the If-None-Match and Authorization headers quoted.
func StartNginxStatic(t testing.TB, root, addr string) *Proxy {
	t.Helper()
	bin := LookPath(t, "nginx", "nginx", "/usr/sbin/nginx")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatalf("nginx dir: %v", err)
	}
	var b strings.Builder
	nginxHead(&b, dir, `'$status "$http_if_none_match" "$http_authorization"'`)
	fmt.Fprintf(&b, `    server {
        listen %s;
        root %s;
    }
}
`, addr, root)
	conf := WriteFile(t, dir, "nginx.conf", b.String())
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off;")
	cmd.Env = baseEnv()
	p := &Proxy{Process: StartProcess(t, "nginx", cmd), URL: "http://" + addr, Dir: dir}
	WaitListening(t, p.Process, addr, 20*time.Second)
	return p
}

// nginxHead writes the start of an nginx configuration whose files all lie
// under dir, up to and inside the opening of the http block; logFormat,
// when set, is the format of access.log.
func nginxHead(b *strings.Builder, dir, logFormat string) {
	if os.Geteuid() == 0 {
		// As root, nginx would switch its worker to "nobody", which cannot
		// enter the test's private temporary directory.
		b.WriteString("user root;\n")
	}
	fmt.Fprintf(b, `worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
`, dir)
	if logFormat != "" {
		fmt.Fprintf(b, "    log_format conditional escape=none %s;\n    access_log %s/access.log conditional;\n", logFormat, dir)
	} else {
		fmt.Fprintf(b, "    access_log %s/access.log;\n", dir)
	}
	fmt.Fprintf(b, `    client_body_temp_path %[1]s/tmp/client_body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
`, dir)
}
