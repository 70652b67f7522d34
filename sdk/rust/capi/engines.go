package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/telemetry"
	"github.com/svc-dev/svc/engine/version"
	"github.com/svc-dev/svc/internal/jsonmask"
	"github.com/svc-dev/svc/internal/resattrs"
	"github.com/svc-dev/svc/reason"
)

// Reason codes of the errors of this interface (beside the engine's own),
// by short names: package reason defines them and says what each means.
const (
	ConfigInvalid     = reason.ConfigInvalid
	EngineStartFailed = reason.EngineStartFailed
	EngineClosed      = reason.EngineClosed
	InputTooLarge     = reason.InputTooLarge
	EnginePanic       = reason.EnginePanic
)

// defaultConfigFile is read, when present in the working directory, by
// openFromEnv, as svc-sidecar reads it without --config.
const defaultConfigFile = "svc.toml"

// flushTimeout bounds flushing telemetry and the audit log on close.
const flushTimeout = 5 * time.Second

// instance is an open engine with what it was built with.
type instance struct {
	eng   *engine.Engine
	tel   *telemetry.Telemetry
	audit *audit.Logger
	log   *slog.Logger
	// claims encodes the claim sets of the answers.
	claims claimsCache
}

// handles is the table of open engines; C holds only their numbers.
var (
	handles    sync.Map // uint64 -> *instance
	nextHandle atomic.Uint64
)

// apiError is the JSON error document of every failed call.
type apiError struct {
	Reason  reason.Code `json:"reason"`
	Message string      `json:"message"`
}

type errorDoc struct {
	Error apiError `json:"error"`
}

func (e *apiError) Error() string { return string(e.Reason) + ": " + e.Message }

func errorJSON(rc reason.Code, msg string) []byte {
	b, err := json.Marshal(errorDoc{Error: apiError{Reason: rc, Message: msg}})
	if err != nil { // cannot happen: two strings
		return []byte(`{"error":{"reason":"` + string(rc) + `","message":""}}`)
	}
	return b
}

// openEngine loads the configuration as svc-sidecar does (the file at
// path, or ./svc.toml when present if fromEnv, then the SVC_* variables
// read through lookupEnv), and starts an engine with the sidecar's
// telemetry and audit log. It returns the engine's handle.
func openEngine(path string, fromEnv bool, lookupEnv func(string) (string, bool)) (uint64, error) {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	if fromEnv && path == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			path = defaultConfigFile
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, &apiError{ConfigInvalid, err.Error()}
		}
	} else if path == "" {
		return 0, &apiError{ConfigInvalid, "no configuration file named"}
	}
	cfg, err := config.Load(path, lookupEnv)
	if err != nil {
		return 0, &apiError{ConfigInvalid, err.Error()}
	}
	log, _, err := telemetry.NewLogger(os.Stderr, cfg.Log.Level)
	if err != nil {
		return 0, &apiError{ConfigInvalid, fmt.Sprintf("%s: %v", cfg.Setting("log.level"), err)}
	}
	topts := telemetry.Options{ServiceName: cfg.SDK.ServiceName, ServiceVersion: version.Version, Logger: log}
	if err := topts.ApplyEnv(getenv); err != nil {
		return 0, &apiError{ConfigInvalid, err.Error()}
	}
	tel, err := telemetry.Setup(context.Background(), topts)
	if err != nil {
		return 0, &apiError{EngineStartFailed, err.Error()}
	}
	auditDest := cfg.Audit.Destination
	if !cfg.Audit.Enabled() {
		auditDest = ""
	}
	mask, err := jsonmask.Parse(cfg.DecisionLog.Mask)
	if err != nil {
		flush(log, "telemetry", tel.Shutdown)
		return 0, &apiError{ConfigInvalid, fmt.Sprintf("%s: %v", cfg.Setting("decision_log.mask"), err)}
	}
	auditLog, err := audit.Open(auditDest, audit.Options{
		QueueSize: cfg.Audit.QueueSize, Logger: log,
		MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups, Mask: mask,
	})
	if err != nil {
		flush(log, "telemetry", tel.Shutdown)
		return 0, &apiError{EngineStartFailed, fmt.Sprintf("%s: %v", cfg.Setting("audit.destination"), err)}
	}
	// Without an OTLP endpoint no span leaves the process, and nothing
	// here watches the span feed (the C ABI has no live trace tail): a
	// no-op tracer spares every call the spans the SDK would drop. The
	// audit record's trace ids come from the caller's context, not from
	// these spans.
	var tp trace.TracerProvider = noop.NewTracerProvider()
	if tel.Exporting() {
		tp = tel.TracerProvider()
	}
	eng, err := engine.New(cfg, engine.Deps{
		Logger:         log,
		TracerProvider: tp,
		MeterProvider:  tel.MeterProvider(),
		Audit:          auditLog,
	})
	if err != nil {
		flush(log, "audit log", auditLog.Close)
		flush(log, "telemetry", tel.Shutdown)
		return 0, &apiError{EngineStartFailed, err.Error()}
	}
	h := nextHandle.Add(1)
	handles.Store(h, &instance{eng: eng, tel: tel, audit: auditLog, log: log})
	return h, nil
}

// closeEngine stops the engine of h (its JWKS refresh and other
// goroutines), flushes its audit log and telemetry and forgets h. Closing
// an unknown handle does nothing.
func closeEngine(h uint64) {
	v, ok := handles.LoadAndDelete(h)
	if !ok {
		return
	}
	in := v.(*instance)
	if err := in.eng.Close(); err != nil {
		in.log.Error("close engine", "err", err)
	}
	flush(in.log, "audit log", in.audit.Close)
	flush(in.log, "telemetry", in.tel.Shutdown)
}

func flush(log *slog.Logger, what string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		log.Error("flush failed", "what", what, "err", err)
	}
}

func lookup(h uint64) (*instance, bool) {
	v, ok := handles.Load(h)
	if !ok {
		return nil, false
	}
	return v.(*instance), true
}

// validateJSON answers ValidateToken as JSON: the engine's TokenDecision.
func validateJSON(h uint64, token string) []byte {
	in, ok := lookup(h)
	if !ok {
		return errorJSON(EngineClosed, "the engine is closed")
	}
	w, err := in.claims.wire(validate(in.eng, token))
	if err != nil {
		return errorJSON(reason.InputInvalid, "the token's claims cannot be encoded: "+err.Error())
	}
	return w.appendJSON(make([]byte, 0, 64+len(w.claims)))
}

// validate is the engine's token decision on token, a bearer token or,
// as in the API's token field, an API key (svck_..., engine.CredentialOf).
func validate(eng *engine.Engine, token string) engine.TokenDecision {
	res, _ := eng.Decide(context.Background(), engine.Request{Scope: engine.ScopeToken, Credential: engine.CredentialOf(token)})
	return res.Token
}

// authorizeResult is the answer of Authorize: the policy decision and the
// token decision it started from.
type authorizeResult struct {
	Token    tokenDecisionWire `json:"token"`
	Decision engine.Decision   `json:"decision"`
}

// authorizeJSON answers Authorize as JSON. input is the policy input
// document (action, resource, request); user and tenant are filled by the
// engine from the token and the configuration.
func authorizeJSON(h uint64, token string, input []byte) []byte {
	in, ok := lookup(h)
	if !ok {
		return errorJSON(EngineClosed, "the engine is closed")
	}
	var pin engine.Input
	if len(input) > 0 {
		if err := json.Unmarshal(input, &pin); err != nil {
			return errorJSON(reason.InputInvalid, "the policy input is not a valid input document: "+err.Error())
		}
		// The bounds of the decision API apply here too.
		attrs, err := resattrs.Normalize(pin.Resource.Attributes)
		if re := (*reason.Error)(nil); errors.As(err, &re) {
			return errorJSON(re.Code, re.Msg)
		}
		pin.Resource.Attributes = attrs
	}
	res, err := in.eng.Decide(context.Background(), engine.Request{Credential: engine.CredentialOf(token), Input: pin})
	if err != nil {
		return errorJSON(reason.PolicyError, err.Error())
	}
	if res.Decision.DenyReasons == nil {
		res.Decision.DenyReasons = []string{}
	}
	w, err := in.claims.wire(res.Token)
	if err != nil {
		return errorJSON(reason.InputInvalid, "the token's claims cannot be encoded: "+err.Error())
	}
	b, err := json.Marshal(authorizeResult{Token: w, Decision: res.Decision})
	if err != nil {
		return errorJSON(reason.InputInvalid, "the decision cannot be encoded: "+err.Error())
	}
	return b
}
