package nginxconf

import (
	"bytes"
	_ "embed"
	"fmt"
	"net"
	"strconv"
	"strings"
	"text/template"
)

//go:embed template.conf
var templateText string

var tmpl = template.Must(template.New("nginx.conf").Parse(templateText))

// Options are the addresses of a rendered configuration. The zero value of
// a field is its default, the ports the shipped deploy/nginx/nginx.conf
// uses.
type Options struct {
	// Listen is where nginx listens: a port, or host:port.
	Listen string
	// App is the application's address, host:port or unix:/path.
	App string
	// Sidecar is the sidecar's HTTP listener (sidecar.http_addr).
	Sidecar string
	// SignIn is the sidecar's SAML listener (sidecar.saml_addr); "none"
	// leaves the sign-in route out.
	SignIn string
	// Pid is nginx's pid file.
	Pid string
}

// Defaults are the values of the shipped configuration.
var Defaults = Options{
	Listen:  "8080",
	App:     "127.0.0.1:5678",
	Sidecar: "127.0.0.1:7700",
	SignIn:  "127.0.0.1:7701",
	Pid:     "/run/svc-nginx.pid",
}

// NoSignIn as Options.SignIn renders no sign-in route.
const NoSignIn = "none"

// Render writes the configuration for o: nginx in front of the
// application, every request checked by the sidecar through auth_request,
// the method named in X_Svc_Method. An address that is not one is an
// error naming the option; the result passes Lint.
func Render(o Options) ([]byte, error) {
	o = o.withDefaults()
	if err := validListen(o.Listen); err != nil {
		return nil, fmt.Errorf("listen %q: %w", o.Listen, err)
	}
	for _, f := range []struct{ name, v string }{{"app", o.App}, {"sidecar", o.Sidecar}, {"signin", o.SignIn}} {
		if f.name == "signin" && f.v == NoSignIn {
			continue
		}
		if err := validUpstream(f.v); err != nil {
			return nil, fmt.Errorf("%s %q: %w", f.name, f.v, err)
		}
	}
	if err := validPath(o.Pid); err != nil {
		return nil, fmt.Errorf("pid %q: %w", o.Pid, err)
	}
	data := struct {
		Options
		Args, Front string
	}{o, o.args(), o.Listen}
	if _, err := port(o.Listen); err == nil {
		data.Front = ":" + o.Listen
	}
	if o.SignIn == NoSignIn {
		data.SignIn = ""
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return nil, err
	}
	if f := Lint(b.Bytes(), Sidecar{ReadsClientCert: true}); len(f) > 0 {
		return nil, fmt.Errorf("rendered configuration fails its own check: %s", f[0])
	}
	return b.Bytes(), nil
}

func (o Options) withDefaults() Options {
	d := Defaults
	for _, f := range []struct{ v, def *string }{{&o.Listen, &d.Listen}, {&o.App, &d.App}, {&o.Sidecar, &d.Sidecar}, {&o.SignIn, &d.SignIn}, {&o.Pid, &d.Pid}} {
		if *f.v == "" {
			*f.v = *f.def
		}
	}
	return o
}

// args is the command line that renders o, its flags that differ from
// the defaults.
func (o Options) args() string {
	var b strings.Builder
	for _, f := range []struct{ flag, v, def string }{
		{"--listen", o.Listen, Defaults.Listen}, {"--app", o.App, Defaults.App}, {"--sidecar", o.Sidecar, Defaults.Sidecar},
		{"--signin", o.SignIn, Defaults.SignIn}, {"--pid", o.Pid, Defaults.Pid},
	} {
		if f.v != f.def {
			fmt.Fprintf(&b, " %s %s", f.flag, f.v)
		}
	}
	return b.String()
}

// validListen accepts what nginx's listen takes for TCP: a port, or
// host:port with an IP address or a name.
func validListen(s string) error {
	if _, err := port(s); err == nil {
		return nil
	}
	return validHostPort(s)
}

// validUpstream accepts host:port or unix:/absolute/path.
func validUpstream(s string) error {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("want unix:/absolute/path")
		}
		return validPath(path)
	}
	return validHostPort(s)
}

func validHostPort(s string) error {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if _, err := port(p); err != nil {
		return err
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if host == "" || !validName(host) {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return nil
}

func port(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return n, nil
}

// validName is a DNS name: letters, digits, hyphens and dots.
func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// validPath refuses what would end or break a directive: whitespace,
// quotes, semicolons, braces, a dollar (a variable) and control bytes.
func validPath(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune(`;{}"'$#\`, r)
	}); i >= 0 {
		return fmt.Errorf("holds %q, which nginx would read as syntax", s[i])
	}
	return nil
}
