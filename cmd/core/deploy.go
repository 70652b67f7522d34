package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/internal/nginxconf"
)

// deployCommand groups what writes a proxy's configuration for the sidecar.
func (a *app) deployCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Write the configuration of a proxy in front of the sidecar",
	}
	group(cmd)
	cmd.AddCommand(inProcess(a.deployNginxCommand()))
	return cmd
}

// deployNginxReport is the --output json answer of deploy nginx.
type deployNginxReport struct {
	Out     string `json:"out"`
	Listen  string `json:"listen"`
	App     string `json:"app"`
	Sidecar string `json:"sidecar"`
	SignIn  string `json:"signin"`
	Pid     string `json:"pid"`
}

func (a *app) deployNginxCommand() *cobra.Command {
	var o nginxconf.Options
	cmd := &cobra.Command{
		Use:   "nginx --out <file> [--listen <addr>] [--app <addr>] [--sidecar <addr>] [--signin <addr>]",
		Short: "Write an nginx.conf that checks every request with the sidecar (auth_request)",
		Long: `Writes the nginx configuration of deploy/nginx/nginx.conf for your
addresses: nginx listens on --listen and proxies to the application at
--app, after asking the sidecar's HTTP check (sidecar.http_addr, --sidecar)
about every request; /auth/saml/ goes to the SAML gateway
(sidecar.saml_addr, --signin) unchecked. The check names the request's
method in X_Svc_Method, a header no client can get through nginx. Without
flags the file is the shipped one. --out - writes to stdout.

Addresses are host:port (an upstream may also be unix:/path); --listen may
be a port alone. A value nginx would read as syntax is refused.

  core deploy nginx --listen 443 --app 127.0.0.1:3000 --out /etc/nginx/svc.conf
  nginx -t -c /etc/nginx/svc.conf

Exit codes: 0 written, 2 bad flags or a file that cannot be written.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := a.artifactPath(cmd)
			if err != nil {
				return err
			}
			return a.runDeployNginx(o, out)
		},
	}
	fl := cmd.Flags()
	d := nginxconf.Defaults
	fl.StringVar(&o.Listen, "listen", d.Listen, "`addr` nginx listens on: a port, or host:port")
	fl.StringVar(&o.App, "app", d.App, "the application's `addr` (host:port or unix:/path)")
	fl.StringVar(&o.Sidecar, "sidecar", d.Sidecar, "the sidecar's HTTP listener, sidecar.http_addr (`addr`)")
	fl.StringVar(&o.SignIn, "signin", d.SignIn, "the sidecar's SAML listener, sidecar.saml_addr (`addr`); none leaves the sign-in route out")
	fl.StringVar(&o.Pid, "pid", d.Pid, "nginx's pid `file`")
	a.artifactFlag(cmd, "nginx configuration")
	return cmd
}

func (a *app) runDeployNginx(o nginxconf.Options, out string) error {
	a.useJSON()
	conf, err := nginxconf.Render(o)
	if err != nil {
		return usageError("--%w", err)
	}
	if out == "-" {
		_, err := a.stdout.Write(conf)
		return err
	}
	if err := os.WriteFile(out, conf, 0o644); err != nil {
		return inputError(fmt.Errorf("--out %s: %w", out, unwrapPath(err)))
	}
	if a.json {
		return a.writeJSON(deployNginxReport{Out: out, Listen: o.Listen, App: o.App, Sidecar: o.Sidecar, SignIn: o.SignIn, Pid: o.Pid})
	}
	fmt.Fprintf(a.stdout, "wrote %s: nginx on %s, application %s, checks at %s/check\n", out, o.Listen, o.App, o.Sidecar)
	return nil
}
