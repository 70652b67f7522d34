package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/gctune"
	"github.com/svc-dev/svc/engine/version"
	"github.com/svc-dev/svc/sidecar"
	"github.com/svc-dev/svc/sidecar/dryrun"
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

func serve(ctx context.Context, configPath string, stderr io.Writer) error {
	cfg, err := loadConfig(configPath)
	if err != nil {
		return err
	}
	log, _, err := telemetry.NewLogger(stderr, cfg.Log.Level)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Setting("log.level"), err)
	}
	if gc := gctune.Tune(os.LookupEnv); gc != nil {
		defer gc.Stop()
		log.Info("garbage collector tuned to the live heap", "gogc_min", gctune.MinPercent, "gogc_max", gctune.MaxPercent,
			"heap_target_mib", gctune.HeapTarget>>20)
	}
	topts := telemetry.Options{ServiceName: cfg.SDK.ServiceName, ServiceVersion: version.Version, Logger: log}
	if err := topts.ApplyEnv(os.Getenv); err != nil {
		return err
	}
	tel, err := telemetry.Setup(ctx, topts)
	if err != nil {
		return err
	}
	defer flush("telemetry", log.Error, tel.Shutdown)

	auditDest := cfg.Audit.Destination
	if !cfg.Audit.Enabled() {
		auditDest = ""
	}
	auditLog, err := audit.Open(auditDest, audit.Options{
		QueueSize: cfg.Audit.QueueSize, Logger: log,
		MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Setting("audit.destination"), err)
	}
	defer flush("audit log", log.Error, auditLog.Close)
	if _, err := auditLog.RegisterMetrics(tel.MeterProvider()); err != nil {
		return fmt.Errorf("audit metrics: %w", err)
	}

	dry := dryrun.NewManager(dryrun.Deps{Audit: auditLog, Logger: log})
	defer dry.Close()
	hub := live.NewHub(live.Deps{Spans: tel.Spans(), Logs: tel.Logs(), Sessions: dry, Logger: log})
	defer hub.Close()
	eng, err := engine.New(cfg, engine.Deps{
		Logger:         log,
		TracerProvider: tel.TracerProvider(),
		MeterProvider:  tel.MeterProvider(),
		Audit:          auditLog,
		Observer:       hub,
	})
	if err != nil {
		return err
	}
	defer eng.Close()

	srv, err := sidecar.New(sidecar.Deps{Engine: eng, Telemetry: tel, Audit: auditLog, Live: hub, DryRun: dry, Logger: log})
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

func flush(what string, logErr func(string, ...any), fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		logErr("flush failed", "what", what, "err", err)
	}
}
