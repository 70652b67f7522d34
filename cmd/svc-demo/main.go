// Command svc-demo runs the parts of the local mesh demo that are not
// svc itself: a demo service and the traffic generator.
//
//	svc-demo service --name orders --addr 0.0.0.0:8081 --trust-proxy-headers
//	svc-demo service --name orders --addr 0.0.0.0:8080 --sidecar 127.0.0.1:50051
//	svc-demo traffic --target http://envoy:8080 --token-url http://envoy:9400/token --idp-config idp.json
//
// service serves one resource collection and the signed-in person's HTML
// home page at /home, and exits 0 on SIGTERM after draining. traffic runs
// until SIGTERM, or with --rounds N sends every scenario N times, prints
// the report as JSON and exits 1 if an answer differed from the one
// expected.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/demo/app"
	"github.com/svc-dev/svc/demo/traffic"
	"github.com/svc-dev/svc/engine/version"
)

// errUnexpected marks a traffic run whose answers differed from the
// expected ones: exit 1.
var errUnexpected = errors.New("some answers were not the expected ones")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	root := &cobra.Command{Use: "svc-demo", Short: "Demo service and traffic generator of the svc mesh demo", SilenceUsage: true, SilenceErrors: true,
		Version: version.Version}
	root.SetVersionTemplate("svc-demo {{.Version}}\n")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(serviceCmd(log), trafficCmd(log, stdout))
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUnexpected):
		fmt.Fprintln(stderr, "svc-demo:", err)
		return 1
	default:
		fmt.Fprintln(stderr, "svc-demo:", err)
		return 2
	}
}

func serviceCmd(log *slog.Logger) *cobra.Command {
	var cfg app.Config
	c := &cobra.Command{
		Use:   "service",
		Short: "Serve one resource collection of the demo",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := app.New(cfg, log)
			if err != nil {
				return err
			}
			return s.Serve(cmd.Context())
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Name, "name", "", "service name (required)")
	f.StringVar(&cfg.Resource, "resource", "", "collection served under /<resource> (default: the name)")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8081", "listen address")
	f.StringVar(&cfg.Sidecar, "sidecar", "", "gRPC address of the svc sidecar to authorize every request through the SDK")
	f.BoolVar(&cfg.TrustProxyHeaders, "trust-proxy-headers", false, "take the caller from the x-svc-* headers a proxy copied from the sidecar's answer")
	return c
}

func trafficCmd(log *slog.Logger, stdout io.Writer) *cobra.Command {
	var (
		cfg     traffic.Config
		idpFile string
	)
	c := &cobra.Command{
		Use:   "traffic",
		Short: "Send steady mixed traffic through the front proxy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			idp, err := traffic.LoadIDPConfig(idpFile)
			if err != nil {
				return err
			}
			cfg.IDP = idp
			g, err := traffic.New(cfg, log)
			if err != nil {
				return err
			}
			r := g.Run(cmd.Context())
			if cfg.Rounds <= 0 {
				return nil
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				return err
			}
			if r.Unexpected > 0 || r.Errors > 0 {
				return fmt.Errorf("%w: %d unexpected, %d errors", errUnexpected, r.Unexpected, r.Errors)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Target, "target", "http://127.0.0.1:8080", "base URL of the front proxy")
	f.StringVar(&cfg.TokenURL, "token-url", "http://127.0.0.1:9400/token", "token endpoint of the OpenID provider")
	f.StringVar(&idpFile, "idp-config", "deploy/demo/idp.json", "the OpenID provider's configuration file (resource and clients)")
	f.Float64Var(&cfg.Rate, "rate", 5, "requests per second")
	f.IntVar(&cfg.Rounds, "rounds", 0, "send every scenario this many times, print the report and exit (0: run until stopped)")
	f.DurationVar(&cfg.WaitReady, "wait-ready", 0, "first wait this long for the mesh to answer as expected")
	f.DurationVar(&cfg.ReportEvery, "report-every", 30*time.Second, "interval of the summary log line")
	return c
}
