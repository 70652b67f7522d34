package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/devissuer"
	"github.com/svc-dev/svc/engine/dryrun"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/engine/version"
	"github.com/svc-dev/svc/internal/gctune"
	"github.com/svc-dev/svc/internal/jsonmask"
	"github.com/svc-dev/svc/internal/startcheck"
	"github.com/svc-dev/svc/sidecar"
	"github.com/svc-dev/svc/sidecar/listeners"
	"github.com/svc-dev/svc/sidecar/live"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

const defaultConfigFile = "svc.toml"

// flushTimeout bounds flushing telemetry and the audit log at exit.
const flushTimeout = 5 * time.Second

func loadConfig(path string) (config.Config, error) {
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			path = defaultConfigFile
		} else if !errors.Is(err, fs.ErrNotExist) {
			return config.Config{}, err
		}
	}
	return config.Load(path, os.LookupEnv)
}

// serve runs the sidecar once, on fresh listeners, without restarts.
func serve(ctx context.Context, configPath string, stderr io.Writer) error {
	set, err := listeners.New("")
	if err != nil {
		return err
	}
	_, err = serveImage(ctx, configPath, stderr, set, nil, nil)
	return err
}

// serveImage runs this process image of the sidecar on the listeners of
// set until ctx ends or a restart is asked for; then it drains, flushes
// telemetry and the audit log, and returns the handover for the next
// image (nil when simply stopping). hup delivers SIGHUP; carried is the
// policy bundle the previous image served, if any.
func serveImage(ctx context.Context, configPath string, stderr io.Writer, set *listeners.Set, hup <-chan os.Signal, carried *sidecar.CarriedBundle) (*handover, error) {
	cfg, err := loadConfig(configPath)
	if err != nil {
		return nil, err
	}
	if err := startcheck.Env(cfg, os.Getenv); err != nil {
		return nil, err
	}
	if err := startcheck.SidecarFiles(cfg); err != nil {
		return nil, err
	}
	log, _, err := telemetry.NewLogger(stderr, cfg.Log.Level)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Setting("log.level"), err)
	}
	// The tuner owns GOGC: bundle loads hold it lower through it.
	var gcOwner bundle.GC
	if gc := gctune.Tune(os.LookupEnv); gc != nil {
		defer gc.Stop()
		gcOwner = gc
		log.Info("garbage collector tuned to the live heap", "gogc_min", gctune.MinPercent, "gogc_max", gctune.MaxPercent,
			"heap_target_mib", gctune.HeapTarget>>20)
	}
	topts := telemetry.Options{ServiceName: cfg.SDK.ServiceName, ServiceVersion: version.Version, Logger: log}
	if err := topts.ApplyEnv(os.Getenv); err != nil {
		return nil, err
	}
	tel, err := telemetry.Setup(ctx, topts)
	if err != nil {
		return nil, err
	}
	defer flush("telemetry", log.Error, tel.Shutdown)

	auditDest := cfg.Audit.Destination
	if !cfg.Audit.Enabled() {
		auditDest = ""
	}
	mask, err := jsonmask.Parse(cfg.DecisionLog.Mask)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Setting("decision_log.mask"), err)
	}
	auditLog, err := audit.Open(auditDest, audit.Options{
		QueueSize: cfg.Audit.QueueSize, Logger: log,
		MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups, Mask: mask,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Setting("audit.destination"), err)
	}
	defer flush("audit log", log.Error, auditLog.Close)
	if _, err := auditLog.RegisterMetrics(tel.MeterProvider()); err != nil {
		return nil, fmt.Errorf("audit metrics: %w", err)
	}

	dry := dryrun.NewManager(dryrun.Deps{Audit: auditLog, Logger: log, EvalTimeout: cfg.Policy.DryRunEvalTimeout.Duration,
		MaxCandidateBytes: cfg.Policy.BundleMaxBytes})
	defer dry.Close()
	hub := live.NewHub(live.Deps{Spans: tel.Spans(), Logs: tel.Logs(), Sessions: dry, Logger: log})
	defer hub.Close()
	eng, err := engine.New(cfg, engine.Deps{
		Logger:         log,
		TracerProvider: tel.TracerProvider(),
		MeterProvider:  tel.MeterProvider(),
		Audit:          auditLog,
		Observer:       hub,
		DevIssuer:      openDevIssuer(cfg, log),
	})
	if err != nil {
		return nil, err
	}
	defer eng.Close()

	r := &restarter{set: set}
	if mode, err := strconv.ParseUint(cfg.Sidecar.SocketMode, 8, 32); err == nil {
		set.SetSocketMode(os.FileMode(mode))
	}
	srv, err := sidecar.New(sidecar.Deps{Engine: eng, Telemetry: tel, Audit: auditLog, Live: hub, DryRun: dry, Logger: log,
		Listen: set.Listen, Restart: r.prepare, Carried: carried, GC: gcOwner})
	set.Close() // inherited sockets the configuration no longer names
	if err != nil {
		return nil, err
	}
	if set.TookOver() {
		log.Info("listening sockets taken over from the previous image")
		// Connections wait in the accept queue until this image can
		// verify tokens, rather than meet a sidecar without keys.
		waitEngineReady(ctx, eng, log)
	}
	go r.watchHUP(ctx, hup, configPath, cfg, srv, log)
	if err := srv.Serve(ctx); err != nil {
		return nil, err
	}
	next := r.next()
	if next != nil {
		// Taken once draining is over: an upload answered during the
		// drain is what the next image must serve.
		next.bundle = srv.ActiveBundle()
		log.Info("restarting: a new image of the process takes over the listening sockets")
	}
	return next, nil
}

// openDevIssuer opens, or creates, the development issuer's key pair in
// development mode, so that tokens of `core dev token` are verified. It
// is nil outside development mode, and when the directory cannot be used:
// then every bearer is anonymous, as the log says.
func openDevIssuer(cfg config.Config, log *slog.Logger) token.KeySource {
	if !cfg.DevMode() {
		return nil
	}
	dir := devissuer.Dir(cfg.SDK.DevIssuerDir, nil)
	d, created, err := devissuer.Open(dir)
	if err != nil {
		log.Warn("development issuer unavailable: tokens of core dev token are not verified, every bearer is anonymous",
			"setting", cfg.Setting("sdk.dev_issuer_dir"), "err", err)
		return nil
	}
	if created {
		log.Info("development issuer key pair created", "dir", dir)
	}
	return d
}

func flush(what string, logErr func(string, ...any), fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		logErr("flush failed", "what", what, "err", err)
	}
}
