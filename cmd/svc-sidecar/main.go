// Command svc-sidecar serves svc's authentication and authorization
// decisions: Envoy ext_authz and the svc.authz.v1 API over gRPC, and a
// local HTTP API with the proxy check mode, admin endpoints and metrics.
//
//	svc-sidecar [--config <path>] [--version]
//	svc-sidecar [--config <path>] saml metadata|test-assertion [flags]
//
// svc-sidecar --help lists where the configuration is looked up, the
// default listen addresses and every SVC_* variable.
//
// Without --config it reads svc.toml from the working directory when one
// exists; SVC_* environment variables override the file. With neither, it
// runs in development mode on the embedded default policy.
//
// The saml subcommands are core's (cmd/internal/samlcmd): the same flags,
// the same output.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/svc-dev/svc/cmd/internal/samlcmd"
	"github.com/svc-dev/svc/engine/version"
	"github.com/svc-dev/svc/sidecar"
	"github.com/svc-dev/svc/sidecar/listeners"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("svc-sidecar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (.toml, .yaml); default ./svc.toml when present")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {} // the full help is printHelp's, on --help
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, fs)
			return 0
		}
		fmt.Fprintln(stderr, "Run 'svc-sidecar --help' for usage.")
		return 2
	}
	if fs.NArg() > 0 && fs.Arg(0) == "saml" {
		return samlcmd.Run("svc-sidecar", fs.Args(), *configPath, stdout, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "svc-sidecar: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "svc-sidecar", version.Version)
		return 0
	}
	set, err := listeners.New(os.Getenv(listeners.EnvVar))
	if err != nil {
		fmt.Fprintf(stderr, "svc-sidecar: %s\n", err)
		return 1
	}
	carried, err := takeCarried(os.Getenv(envCarried))
	if err != nil {
		// Stopping here would take the service down in the middle of a
		// restart: the new image starts, refuses the unreadable bundle
		// in its status and serves the configured policy.
		fmt.Fprintf(stderr, "svc-sidecar: %s\n", err)
		carried = &sidecar.CarriedBundle{}
	}
	os.Unsetenv(envCarried)
	stops := watchStopSignals()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	next, err := serveImage(stops.ctx, *configPath, stderr, set, hup, carried)
	// From here on SIGTERM and SIGINT end the process by their default
	// action: this image has drained and a signal must not be lost in
	// the exec of the next one.
	signalled := stops.release()
	switch {
	case err == nil && next != nil && signalled:
		// SIGTERM or SIGINT arrived while this image drained for a
		// restart: the signal would die with this image, so stop here
		// instead of starting a new one that never heard it.
	case err == nil && next != nil:
		err = execNext(next) // returns only when exec failed
	}
	if err != nil {
		// A configuration with several problems is one error per line;
		// each line names the program, as log collectors expect.
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintf(stderr, "svc-sidecar: %s\n", line)
		}
		return 1
	}
	return 0
}
