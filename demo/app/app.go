// Package app is the demo application of the local mesh demo and of the
// Kubernetes manifests: a small HTTP service of one resource collection
// ("orders", "invoices") that keeps items per tenant in memory, and an
// HTML home page at /home naming the signed-in person, where the demo's
// SAML sign-in lands.
//
// It learns who calls in one of two ways. Behind a proxy that asks the
// sidecar (Envoy ext_authz, istio-proxy, nginx auth_request), it reads
// the x-svc-* headers of the sidecar's answer, which the sidecar strips
// from client requests. Standing alone, it asks the sidecar itself
// through the Go SDK (authz.Middleware): "<resource>:<verb>" from the
// method, on the item named in the path.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc-dev/svc/authz"
)

// Config configures a Server.
type Config struct {
	// Name is the service's name in answers and logs ("orders").
	Name string
	// Resource is the collection it serves under /<Resource>; default Name.
	Resource string
	// Addr is the listen address.
	Addr string
	// Sidecar, when set, is the sidecar's gRPC address: every request is
	// authorized through the SDK, fail-closed.
	Sidecar string
	// TrustProxyHeaders takes the caller from the x-svc-* headers that a
	// proxy in front copied from the sidecar's answer. Exactly one of
	// Sidecar and TrustProxyHeaders must be set.
	TrustProxyHeaders bool
	// ShutdownTimeout bounds the drain of in-flight requests; default 10s.
	ShutdownTimeout time.Duration
}

// Server is one running demo service.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ln     net.Listener
	client *authz.Client
	store  *store
}

// New validates cfg, listens on cfg.Addr and, in SDK mode, connects the
// SDK client (lazily: the sidecar may start later).
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("app: a name is required")
	}
	if cfg.Resource == "" {
		cfg.Resource = cfg.Name
	}
	if (cfg.Sidecar == "") == !cfg.TrustProxyHeaders {
		return nil, errors.New("app: choose one of --sidecar <addr> and --trust-proxy-headers")
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, log: log.With("service", cfg.Name), store: newStore()}
	if cfg.Sidecar != "" {
		c, err := authz.NewClient(cfg.Sidecar, authz.ClientOptions{FailMode: "closed", Logger: log})
		if err != nil {
			return nil, fmt.Errorf("app: sidecar client: %w", err)
		}
		s.client = c
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if s.client != nil {
			_ = s.client.Close()
		}
		return nil, fmt.Errorf("app: listen: %w", err)
	}
	s.ln = ln
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve answers requests until ctx ends, then drains them.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	s.log.Info("demo service serving", "addr", s.Addr(), "resource", s.cfg.Resource, "sdk", s.client != nil)
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
	}
	if s.client != nil {
		_ = s.client.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Handler is the service's HTTP handler: /healthz without identity,
// /<resource>, /<resource>/<id> and the HTML home page /home with it.
func (s *Server) Handler() http.Handler {
	items := http.Handler(http.HandlerFunc(s.serveItems))
	home := http.Handler(http.HandlerFunc(s.serveHome))
	if s.client != nil {
		items = authz.Middleware(s.client, authz.MiddlewareOptions{
			Action: func(r *http.Request) string { return s.cfg.Resource + ":" + verb(r.Method) },
			Resource: func(r *http.Request) authz.Resource {
				return authz.Resource{Type: s.cfg.Resource, ID: itemID(r, s.cfg.Resource)}
			},
			Logger: s.log,
		})(items)
		home = authz.Middleware(s.client, authz.MiddlewareOptions{
			Action:   func(*http.Request) string { return "home:read" },
			Resource: func(*http.Request) authz.Resource { return authz.Resource{Type: "home"} },
			Logger:   s.log,
		})(home)
	} else {
		items = http.HandlerFunc(s.fromProxy(items))
		home = http.HandlerFunc(s.fromProxy(home))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET "+HomePath, home)
	mux.Handle("/"+s.cfg.Resource, items)
	mux.Handle("/"+s.cfg.Resource+"/", items)
	return mux
}

// fromProxy puts the caller named by the x-svc-* headers into the
// request's context; without them the request did not pass the sidecar.
func (s *Server) fromProxy(next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sub := r.Header.Get("X-Svc-User-Id")
		if sub == "" {
			writeError(w, http.StatusUnauthorized, "identity-missing", "no x-svc-user-id header: the request did not pass the sidecar")
			return
		}
		u := authz.User{
			Subject:    sub,
			TenantID:   r.Header.Get("X-Svc-Tenant-Id"),
			DecisionID: r.Header.Get("X-Svc-Decision-Id"),
		}
		if roles := r.Header.Get("X-Svc-Roles"); roles != "" {
			u.Claims = map[string]any{"roles": strings.Split(roles, ",")}
		}
		next.ServeHTTP(w, r.WithContext(authz.ContextWithUser(r.Context(), u)))
	}
}

// Item is one stored object.
type Item struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Created time.Time `json:"created"`
	By      string    `json:"created_by"`
}

// answer is the body of every successful item request: what was done,
// and on whose behalf.
type answer struct {
	Service    string `json:"service"`
	Subject    string `json:"subject"`
	Tenant     string `json:"tenant"`
	DecisionID string `json:"decision_id,omitempty"`
	Item       *Item  `json:"item,omitempty"`
	Items      []Item `json:"items,omitempty"`
}

func (s *Server) serveItems(w http.ResponseWriter, r *http.Request) {
	u, _ := authz.UserFrom(r.Context())
	if u.TenantID == "" {
		writeError(w, http.StatusForbidden, "tenant-missing", "the caller has no tenant")
		return
	}
	a := answer{Service: s.cfg.Name, Subject: u.Subject, Tenant: u.TenantID, DecisionID: u.DecisionID}
	id := itemID(r, s.cfg.Resource)
	switch {
	case id == "" && r.Method == http.MethodGet:
		a.Items = s.store.list(u.TenantID)
		writeJSON(w, http.StatusOK, a)
	case id == "" && r.Method == http.MethodPost:
		it := s.store.create(u.TenantID, u.Subject)
		a.Item = &it
		writeJSON(w, http.StatusCreated, a)
	case id != "" && r.Method == http.MethodGet:
		it, ok := s.store.get(u.TenantID, id)
		if !ok {
			writeError(w, http.StatusNotFound, "not-found", s.cfg.Resource+" "+id+" does not exist")
			return
		}
		a.Item = &it
		writeJSON(w, http.StatusOK, a)
	case id != "" && r.Method == http.MethodDelete:
		if !s.store.remove(u.TenantID, id) {
			writeError(w, http.StatusNotFound, "not-found", s.cfg.Resource+" "+id+" does not exist")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusMethodNotAllowed, "method-not-allowed", r.Method+" is not supported here")
	}
}

// itemID is the path segment after /<resource>/, "" for the collection.
func itemID(r *http.Request, resource string) string {
	rest, ok := strings.CutPrefix(r.URL.Path, "/"+resource+"/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// verb is the action verb of a method, as the sidecar derives it for
// proxied requests.
func verb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "read"
	case http.MethodPost:
		return "create"
	case http.MethodPut, http.MethodPatch:
		return "update"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// store keeps items per tenant. Every tenant starts with items 1 to
// seeded, so reads of small ids find something.
type store struct {
	mu    sync.Mutex
	items map[string]map[string]Item
	next  map[string]int
}

const seeded = 100

func newStore() *store {
	return &store{items: map[string]map[string]Item{}, next: map[string]int{}}
}

func (s *store) tenant(t string) map[string]Item {
	m, ok := s.items[t]
	if !ok {
		m = make(map[string]Item, seeded)
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := 1; i <= seeded; i++ {
			id := strconv.Itoa(i)
			m[id] = Item{ID: id, Tenant: t, Created: epoch, By: "seed"}
		}
		s.items[t] = m
		s.next[t] = seeded + 1
	}
	return m
}

func (s *store) list(t string) []Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.tenant(t)
	out := make([]Item, 0, 10)
	for i := 1; len(out) < 10 && i < s.next[t]; i++ {
		if it, ok := m[strconv.Itoa(i)]; ok {
			out = append(out, it)
		}
	}
	return out
}

func (s *store) get(t, id string) (Item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.tenant(t)[id]
	return it, ok
}

func (s *store) create(t, by string) Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.tenant(t)
	id := strconv.Itoa(s.next[t])
	s.next[t]++
	it := Item{ID: id, Tenant: t, Created: time.Now().UTC(), By: by}
	m[id] = it
	return it
}

func (s *store) remove(t, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.tenant(t)
	_, ok := m[id]
	delete(m, id)
	return ok
}
