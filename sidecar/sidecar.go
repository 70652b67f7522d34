// Package sidecar composes svc-sidecar: one gRPC server carrying Envoy's
// ext_authz Check, the svc.authz.v1 service, health and reflection, and
// one local HTTP server carrying the JSON API, the proxy check mode, the
// admin and status endpoints and /metrics, all on one engine.
//
// Lifecycle: New binds both listeners (so a port in use is an error at
// once), Serve runs until its context ends, then shuts down in order:
// readiness and gRPC health go NOT_SERVING, in-flight requests drain
// within the drain timeout, and both servers stop.
package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	authzserver "github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/dryrun"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/oidcgw"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/sidecar/grpcstats"
	"github.com/svc-dev/svc/sidecar/listeners"
	"github.com/svc-dev/svc/sidecar/live"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// Limits of the gRPC server: an ext_authz CheckRequest carries headers and
// at most a buffered body; 4 MiB is Envoy's own default body limit.
const (
	maxRecvMsgBytes = 4 << 20
	maxStreams      = 1024
)

// streamWorkers is the number of goroutines that serve gRPC calls and are
// kept between them: a call served by a fresh goroutine first grows its
// stack, copying it several times. A call that finds every worker busy
// (blocked on Redis, say) gets a goroutine of its own, as without workers.
func streamWorkers() uint32 { return uint32(max(64, 16*runtime.GOMAXPROCS(0))) }

// Names of the sidecar's listeners, as Deps.Listen receives them.
const (
	ListenerGRPC = "grpc" // sdk.sidecar_addr
	ListenerHTTP = "http" // sidecar.http_addr
	ListenerSAML = "saml" // sidecar.saml_addr, with [sdk.saml]
)

// Deps are the parts a Server serves. Engine is required.
type Deps struct {
	Engine    *engine.Engine
	Telemetry *telemetry.Telemetry // optional: no /metrics, no streams
	Audit     *audit.Logger        // optional: audit stats in status
	Live      *live.Hub            // optional: no span, log and decision streams
	DryRun    *dryrun.Manager      // optional: no dry-run sessions
	Logger    *slog.Logger
	// Listen opens the listener called name (ListenerGRPC, ...) on the
	// configured addr; default a new TCP listener. svc-sidecar passes a
	// listeners.Set, which takes over sockets across restarts.
	Listen func(name, addr string) (net.Listener, error)
	// Restart, when set, is called when a restart is asked for
	// (POST /v1/restart, Server.Restart): it prepares the next process
	// image (svc-sidecar duplicates the listening sockets). Serve then
	// drains as the request says and returns; its caller starts the next
	// image. Without it the sidecar cannot restart itself.
	Restart func(RestartRequest) error
	// Carried, when set, is the bundle the previous process image served
	// (ActiveBundle before a restart): New activates it, verified again
	// with this configuration's key, before the server reports ready,
	// instead of the one persisted in policy.bundle_cache_dir. A refused
	// one leaves the configured policy serving and the status degraded.
	Carried *CarriedBundle
	// GC, when set, owns the collector's target: loading a bundle holds
	// it lower through GC rather than setting GOGC itself. svc-sidecar
	// passes its gctune.Tuner, which would otherwise overwrite the
	// loader's target after the next collection.
	GC bundle.GC
}

// Server is a running svc-sidecar.
type Server struct {
	deps    Deps
	log     *slog.Logger
	grpcLis net.Listener
	httpLis net.Listener
	grpc    *grpc.Server
	http    *http.Server
	// front serves the plain-text HTTP listener in front of http; nil
	// with TLS, where http serves it alone.
	front   *front
	health  *health.Server
	streams *live.Streams // nil without Deps.Live
	// saml exists only with [sdk.saml], oidc only with [sdk.oidc]; the
	// sign-in listener and server (samlLis, samlHTTP) with either.
	saml     *samlgw.Gateway
	oidc     *oidcgw.Gateway
	samlLis  net.Listener
	samlHTTP *http.Server
	ready    atomic.Bool
	draining atomic.Bool
	inflight atomic.Int64
	started  time.Time
	bundles  bundles
	restart  atomic.Pointer[RestartRequest]
	poller   *bundlePoller   // nil without policy.bundle_url
	redis    *redisCheck     // nil without rate_limit.redis_addr
	certs    *certs          // nil without sidecar.tls_cert_file
	identity *idtoken.Minter // nil without [identity_token]
	stop     atomic.Pointer[context.CancelFunc]

	// activations counts bundle activations by outcome; nil without
	// telemetry.
	activations metric.Int64Counter
}

// New binds the gRPC (sdk.sidecar_addr) and HTTP (sidecar.http_addr)
// listeners of the engine's configuration and builds both servers.
func New(deps Deps) (*Server, error) {
	if deps.Engine == nil {
		return nil, errors.New("sidecar: an engine is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	cfg := deps.Engine.Config()
	s := &Server{deps: deps, log: deps.Logger, started: time.Now()}

	var err error
	if s.certs, err = newCerts(cfg.Sidecar, s.log); err != nil {
		return nil, err
	}
	listen := deps.Listen
	if listen == nil {
		mode, _ := strconv.ParseUint(cfg.Sidecar.SocketMode, 8, 32)
		listen = func(_, addr string) (net.Listener, error) { return listeners.Open(addr, os.FileMode(mode)) }
	}
	if s.grpcLis, err = listen(ListenerGRPC, cfg.SDK.SidecarAddr); err != nil {
		return nil, fmt.Errorf("%s: grpc listener on %s: %w", cfg.Setting("sdk.sidecar_addr"), cfg.SDK.SidecarAddr, err)
	}
	if s.httpLis, err = listen(ListenerHTTP, cfg.Sidecar.HTTPAddr); err != nil {
		s.grpcLis.Close()
		return nil, fmt.Errorf("%s: http listener on %s: %w", cfg.Setting("sidecar.http_addr"), cfg.Sidecar.HTTPAddr, err)
	}
	if s.certs != nil {
		// gRPC does its own handshakes (with ALPN h2); HTTP gets a TLS
		// listener over the plain one, which stays the one handed over.
		s.httpLis = tls.NewListener(s.httpLis, s.certs.config("http/1.1"))
	}

	if err := s.newIdentity(); err != nil {
		s.closeListeners()
		return nil, err
	}
	envoyDeps := envoy.Deps{Logger: s.log}
	if s.identity != nil {
		envoyDeps.Identity = s.identity
	}
	envoySrv, err := envoy.New(cfg, deps.Engine, envoyDeps)
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	authzSrv, err := authzserver.New(deps.Engine, authzserver.Options{Logger: s.log})
	if err != nil {
		s.closeListeners()
		return nil, err
	}

	grpcOpts, err := s.grpcOptions()
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	s.grpc = grpc.NewServer(grpcOpts...)
	envoySrv.Register(s.grpc)
	authzSrv.Register(s.grpc)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)

	mux := http.NewServeMux()
	authzSrv.RegisterHTTP(mux)
	envoySrv.RegisterHTTP(mux)
	s.registerAdmin(mux)
	mux.HandleFunc("GET "+PathIdentityJWKS, s.serveIdentityJWKS)
	if deps.Live != nil {
		s.streams = live.NewStreams(deps.Live)
		s.streams.Register(mux, s.admin)
	}
	if deps.DryRun != nil {
		deps.DryRun.Register(mux, s.admin, s.loadCandidate)
	}
	registerNotFound(mux)
	if cfg.SignIn() {
		addr := cfg.Sidecar.SigninAddr
		if cfg.SDK.SAML != nil {
			addr = cfg.Sidecar.SAMLAddr
		}
		if err := s.newSignIn(addr, listen); err != nil {
			s.closeListeners()
			return nil, err
		}
		if s.certs != nil {
			s.samlLis = tls.NewListener(s.samlLis, s.certs.config("http/1.1"))
		}
		if s.oidc != nil {
			// The checks renew OpenID Connect sessions near their expiry.
			envoySrv.SetSessionRenewal(s.oidc, cfg.SDK.Session.RenewWindow())
		}
	}
	s.poller = newBundlePoller(cfg.Policy)
	if s.redis, err = newRedisCheck(cfg.RateLimit, s.log); err != nil {
		s.closeListeners()
		return nil, err
	}
	if t := deps.Telemetry; t != nil {
		m := t.MeterProvider().Meter("github.com/svc-dev/svc/sidecar")
		if s.activations, err = m.Int64Counter("svc.policy.bundle.activations",
			metric.WithDescription("Policy bundles activated or refused, by result, source and reason.")); err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("bundle metrics: %w", err)
		}
		if err := s.redis.observe(m); err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("redis metrics: %w", err)
		}
	}
	s.initBundleState()
	restored := false
	if deps.Carried != nil {
		restored = s.activateCarried(deps.Carried)
	} else {
		restored = s.restoreBundle()
	}
	if restored && s.poller != nil {
		s.poller.restoreETag(cfg.Policy.BundleCacheDir)
	}
	s.http = &http.Server{
		Handler:           s.countInflight(s.guardReads(s.traceDecisions(mux))),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.certs == nil {
		s.front = newFront(s, s.http)
		s.front.serve = s.frontHandler(envoySrv.ServeFront)
	}
	return s, nil
}

func (s *Server) grpcOptions() ([]grpc.ServerOption, error) {
	codec := newCodec()
	var stats *grpcstats.Handler
	if t := s.deps.Telemetry; t != nil {
		var err error
		stats, err = grpcstats.New(grpcstats.Options{
			TracerProvider: t.TracerProvider(),
			MeterProvider:  t.MeterProvider(),
			Propagator:     t.Propagator(),
		})
		if err != nil {
			return nil, fmt.Errorf("grpc telemetry: %w", err)
		}
		codec.undecodable = stats.CountUndecodable
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecvMsgBytes),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.NumStreamWorkers(streamWorkers()),
		grpc.ForceServerCodecV2(codec),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: 5 * time.Minute,
			Time:              30 * time.Second,
			Timeout:           10 * time.Second,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             10 * time.Second,
			PermitWithoutStream: true,
		}),
	}
	if s.certs != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.certs.config("h2"))))
	}
	if stats != nil {
		// Interceptors rather than a stats handler, with which gRPC
		// copies every call's metadata and allocates an event per step
		// of the call (grpcstats.Handler). First in the chains: the
		// server span is the parent of whatever comes after.
		// Its tap handle finds the trace headers in the call's headers
		// with exact lookups, before the interceptors.
		opts = append(opts, stats.ServerOptions()...)
	}
	return opts, nil
}

// GRPCAddr is the bound gRPC address.
func (s *Server) GRPCAddr() net.Addr { return s.grpcLis.Addr() }

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() net.Addr { return s.httpLis.Addr() }

// Serve serves until ctx ends, then shuts down in order within the
// configured drain timeout. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.stop.Store(&cancel)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := s.grpc.Serve(s.grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if s.front == nil {
			if err := s.http.Serve(s.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		}
		g.Go(func() error {
			if err := s.http.Serve(s.front.handoff); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		})
		if err := s.front.Serve(s.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	if s.samlHTTP != nil {
		g.Go(func() error {
			if err := s.samlHTTP.Serve(s.samlLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("sign-in server: %w", err)
			}
			return nil
		})
	}
	if s.saml != nil {
		g.Go(func() error { return s.saml.Run(gctx) })
	}
	if s.identity != nil {
		g.Go(func() error {
			s.identity.Watch(gctx)
			return nil
		})
	}
	if s.poller != nil {
		g.Go(func() error {
			s.pollBundles(gctx)
			return nil
		})
	}
	if s.redis != nil {
		g.Go(func() error {
			s.redis.run(gctx)
			return nil
		})
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.ready.Store(true)
	s.log.Info("svc-sidecar serving",
		"grpc", s.GRPCAddr().String(), "http", s.HTTPAddr().String(),
		"dev_mode", s.deps.Engine.DevMode(), "tenant", s.deps.Engine.Config().SDK.TenantID)
	g.Go(func() error {
		<-gctx.Done()
		s.shutdown()
		return nil
	})
	return g.Wait()
}

// shutdown: not ready → gRPC GracefulStop (GOAWAY) and HTTP Shutdown
// (keep-alives off, idle connections closed) in parallel, both bounded by
// the drain timeout, then forced. A restart request sets its own drain
// timeout, or skips draining with Force.
func (s *Server) shutdown() {
	s.draining.Store(true)
	s.ready.Store(false)
	s.health.Shutdown()
	if s.streams != nil {
		// Watchers never go idle: end their streams, or the HTTP drain
		// would wait for them until the timeout.
		s.streams.Shutdown()
	}
	if s.deps.DryRun != nil {
		// Their last simulated records reach the audit log before it closes.
		s.deps.DryRun.Close()
	}
	s.http.SetKeepAlivesEnabled(false)
	if s.samlHTTP != nil {
		s.samlHTTP.SetKeepAlivesEnabled(false)
	}
	drain := s.deps.Engine.Config().Sidecar.DrainTimeout.Duration
	force := false
	if r := s.restart.Load(); r != nil {
		drain, force = r.DrainTimeout, r.Force
	}
	s.log.Info("draining", "timeout", drain.String(), "force", force, "inflight_http", s.inflight.Load())
	if force {
		s.grpc.Stop()
		if s.front != nil {
			s.front.Close()
		}
		s.http.Close()
		if s.samlHTTP != nil {
			s.samlHTTP.Close()
		}
		s.log.Info("stopped without draining")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()

	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	// The SAML listener drains beside the others and is waited for: an
	// ACS POST in flight finishes (within the same bound) before the
	// gateway closes and Serve returns.
	samlDone := make(chan struct{})
	if s.samlHTTP != nil {
		go func() {
			defer close(samlDone)
			if err := s.samlHTTP.Shutdown(ctx); err != nil {
				s.log.Warn("saml drain timed out; closing connections", "err", err)
				s.samlHTTP.Close()
			}
		}()
	} else {
		close(samlDone)
	}
	if s.front != nil {
		// The front's busy connections finish their request first: one
		// handed to net/http meanwhile is still served.
		if err := s.front.Shutdown(ctx); err != nil {
			s.log.Warn("http drain timed out; closing connections", "err", err)
			s.front.Close()
		}
	}
	if err := s.http.Shutdown(ctx); err != nil {
		s.log.Warn("http drain timed out; closing connections", "err", err)
		s.http.Close()
	}
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("grpc drain timed out; stopping")
		s.grpc.Stop()
		<-done
	}
	<-samlDone
	if s.saml != nil {
		if err := s.saml.Close(); err != nil {
			s.log.Warn("saml gateway close", "err", err)
		}
	}
	if s.oidc != nil {
		if err := s.oidc.Close(); err != nil {
			s.log.Warn("oidc gateway close", "err", err)
		}
	}
	s.log.Info("stopped")
}

func (s *Server) closeListeners() {
	s.grpcLis.Close()
	s.httpLis.Close()
	if s.samlLis != nil {
		s.samlLis.Close()
	}
	if s.saml != nil {
		s.saml.Close()
	}
	if s.oidc != nil {
		s.oidc.Close()
	}
}

// newSignIn builds the sign-in gateways ([sdk.saml], [sdk.oidc]) on the
// engine's token issuer and binds their listener (sidecar.signin_addr,
// or sidecar.saml_addr), so that a proxy can route the sign-in paths
// there while the admin API stays on loopback.
func (s *Server) newSignIn(addr string, listen func(name, addr string) (net.Listener, error)) error {
	cfg := s.deps.Engine.Config()
	var h http.Handler
	if cfg.SDK.SAML != nil {
		deps := samlgw.Deps{Issuer: s.deps.Engine.Issuer(), Logger: s.log.With("component", "saml"), ListenAddr: addr}
		if s.deps.Audit != nil {
			deps.Audit = s.deps.Audit
		}
		if t := s.deps.Telemetry; t != nil {
			deps.MeterProvider = t.MeterProvider()
		}
		gw, err := samlgw.New(cfg, deps)
		if err != nil {
			return fmt.Errorf("saml gateway: %w", err)
		}
		s.saml, h = gw, gw.Handler()
	}
	if cfg.SDK.OIDC != nil {
		gw, err := oidcgw.New(cfg, oidcgw.Deps{Issuer: s.deps.Engine.Issuer(), Logger: s.log.With("component", "oidc")})
		if err != nil {
			if s.saml != nil {
				s.saml.Close()
			}
			return fmt.Errorf("oidc gateway: %w", err)
		}
		s.oidc = gw
		s.deps.Engine.SetSessionRevocation(gw.Revoked)
		if h == nil {
			h = gw.Handler()
		} else {
			// The SAML gateway answers every other path, as it did alone.
			mux := http.NewServeMux()
			oidcgw.Mount(mux, gw)
			mux.Handle("/", h)
			h = mux
		}
	}
	lis, err := listen(ListenerSAML, addr)
	if err != nil {
		if s.saml != nil {
			s.saml.Close()
		}
		if s.oidc != nil {
			s.oidc.Close()
		}
		return fmt.Errorf("sign-in listener on %s (sidecar.signin_addr): %w", addr, err)
	}
	s.samlLis = lis
	s.samlHTTP = &http.Server{
		Handler:           s.countInflight(h),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return nil
}

// SAMLAddr is the bound address of the SAML gateway, nil without [sdk.saml].
func (s *Server) SAMLAddr() net.Addr {
	if s.samlLis == nil {
		return nil
	}
	return s.samlLis.Addr()
}

func (s *Server) countInflight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		next.ServeHTTP(w, r)
	})
}
