// Package traffic is the demo's traffic generator: steady, mixed requests
// through the front proxy with real tokens from the demo's OpenID
// provider, so that the live tools (trace tail, log tail, policy dry-run)
// always have something to show. Each scenario knows the answer the
// shipped demo gives it; an answer that differs is counted and logged as
// unexpected.
package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Client is a client registered at the OpenID provider, as in the
// provider's configuration file (e2e/idp/server.mjs).
type Client struct {
	ID       string   `json:"client_id"`
	Secret   string   `json:"client_secret"`
	TenantID string   `json:"tenant_id,omitempty"`
	Roles    []string `json:"roles,omitempty"`
	Email    string   `json:"email,omitempty"`
}

// IDPConfig is the part of the OpenID provider's configuration file the
// generator reads: the resource indicator its tokens are for, and the
// clients.
type IDPConfig struct {
	Resource string   `json:"resource"`
	Clients  []Client `json:"clients"`
}

// LoadIDPConfig reads the provider's configuration file.
func LoadIDPConfig(path string) (IDPConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return IDPConfig{}, fmt.Errorf("traffic: %w", err)
	}
	var c IDPConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return IDPConfig{}, fmt.Errorf("traffic: %s: %w", path, err)
	}
	return c, nil
}

// Kinds of scenario.
const (
	KindAllowed      = "allowed"
	KindPolicyDenied = "policy-denied"
	KindInvalidToken = "invalid-token"
	KindOtherTenant  = "other-tenant"
)

// Scenario is one kind of request and the status the demo answers it.
type Scenario struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Client whose token is sent; "" sends the Bearer value below as is.
	Client string `json:"client,omitempty"`
	// Bearer is sent when Client is "": "" sends no Authorization header.
	Bearer string `json:"-"`
	// Tamper flips the token's signature.
	Tamper bool   `json:"-"`
	Method string `json:"method"`
	// Path, where {n} becomes an item id between 1 and 100.
	Path string `json:"path"`
	Want int    `json:"want"`
}

// Scenarios is the demo's mix, sent round-robin. The clients are those of
// deploy/demo/idp.json; the answers are those of the default policy.
var Scenarios = []Scenario{
	{Name: "viewer-reads-order", Kind: KindAllowed, Client: "demo-viewer", Method: "GET", Path: "/orders/{n}", Want: 200},
	{Name: "viewer-reads-invoice", Kind: KindAllowed, Client: "demo-viewer", Method: "GET", Path: "/invoices/{n}", Want: 200},
	{Name: "billing-reads-invoice", Kind: KindAllowed, Client: "demo-billing", Method: "GET", Path: "/invoices/{n}", Want: 200},
	{Name: "billing-creates-invoice", Kind: KindAllowed, Client: "demo-billing", Method: "POST", Path: "/invoices", Want: 201},
	{Name: "viewer-deletes-order", Kind: KindPolicyDenied, Client: "demo-viewer", Method: "DELETE", Path: "/orders/{n}", Want: 403},
	{Name: "billing-reads-order", Kind: KindPolicyDenied, Client: "demo-billing", Method: "GET", Path: "/orders/{n}", Want: 403},
	{Name: "no-token", Kind: KindInvalidToken, Method: "GET", Path: "/orders/{n}", Want: 401},
	{Name: "not-a-jwt", Kind: KindInvalidToken, Bearer: "not-a-jwt", Method: "GET", Path: "/orders/{n}", Want: 401},
	{Name: "forged-signature", Kind: KindInvalidToken, Client: "demo-viewer", Tamper: true, Method: "GET", Path: "/invoices/{n}", Want: 401},
	{Name: "other-tenant-reads-order", Kind: KindOtherTenant, Client: "other-admin", Method: "GET", Path: "/orders/{n}", Want: 403},
}

// Config configures a Generator.
type Config struct {
	// Target is the front proxy's base URL ("http://envoy:8080").
	Target string
	// TokenURL is the provider's token endpoint.
	TokenURL string
	// IDP is the provider's configuration: resource and clients.
	IDP IDPConfig
	// Rate is requests per second; default 5.
	Rate float64
	// Rounds, when positive, stops after sending every scenario that many
	// times; otherwise the generator runs until its context ends.
	Rounds int
	// WaitReady, when positive, is how long Run first waits for the mesh
	// to give the first scenario its expected answer (the sidecar may
	// still be fetching keys when the generator starts).
	WaitReady time.Duration
	// ReportEvery is the interval of the summary log line; default 30s.
	ReportEvery time.Duration
	// HTTPClient sends the requests; default one with a 5 s timeout.
	HTTPClient *http.Client
}

// Count is what happened to one scenario's requests.
type Count struct {
	Kind       string `json:"kind"`
	Sent       int    `json:"sent"`
	Expected   int    `json:"expected"`
	Unexpected int    `json:"unexpected"`
	// Errors are requests that got no answer, or scenarios whose token
	// could not be obtained.
	Errors int `json:"errors"`
}

// Report sums up a run, per scenario.
type Report struct {
	Scenarios  map[string]*Count `json:"scenarios"`
	Sent       int               `json:"sent"`
	Unexpected int               `json:"unexpected"`
	Errors     int               `json:"errors"`
}

// Generator sends the scenarios.
type Generator struct {
	cfg     Config
	log     *slog.Logger
	clients map[string]Client

	mu     sync.Mutex
	tokens map[string]token
	report Report
}

type token struct {
	value   string
	refresh time.Time
}

// New checks cfg: the target and token URLs parse, and every client a
// scenario names is configured.
func New(cfg Config, log *slog.Logger) (*Generator, error) {
	for _, u := range []string{cfg.Target, cfg.TokenURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("traffic: %q is not an http(s) URL", u)
		}
	}
	if cfg.IDP.Resource == "" {
		return nil, errors.New("traffic: the provider configuration has no resource")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 5
	}
	if cfg.ReportEvery <= 0 {
		cfg.ReportEvery = 30 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	g := &Generator{cfg: cfg, log: log, clients: map[string]Client{}, tokens: map[string]token{}}
	for _, c := range cfg.IDP.Clients {
		g.clients[c.ID] = c
	}
	g.report.Scenarios = map[string]*Count{}
	for _, s := range Scenarios {
		if _, ok := g.clients[s.Client]; s.Client != "" && !ok {
			return nil, fmt.Errorf("traffic: scenario %s needs client %q, which the provider configuration lacks", s.Name, s.Client)
		}
		g.report.Scenarios[s.Name] = &Count{Kind: s.Kind}
	}
	return g, nil
}

// Run sends the scenarios round-robin at the configured rate until ctx
// ends or the rounds are done, and returns the report.
func (g *Generator) Run(ctx context.Context) Report {
	tick := time.NewTicker(time.Duration(float64(time.Second) / g.cfg.Rate))
	defer tick.Stop()
	summary := time.NewTicker(g.cfg.ReportEvery)
	defer summary.Stop()
	if g.cfg.WaitReady > 0 {
		g.waitReady(ctx)
	}
	g.log.Info("traffic generator running", "target", g.cfg.Target, "rate", g.cfg.Rate, "scenarios", len(Scenarios))
	for i := 0; g.cfg.Rounds <= 0 || i < g.cfg.Rounds*len(Scenarios); i++ {
		select {
		case <-ctx.Done():
			return g.Report()
		case <-summary.C:
			g.logSummary()
			<-tick.C
		case <-tick.C:
		}
		g.send(ctx, Scenarios[i%len(Scenarios)])
	}
	g.logSummary()
	return g.Report()
}

// waitReady sends the first scenario, uncounted, until it gets its
// expected answer or WaitReady has passed.
func (g *Generator) waitReady(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.WaitReady)
	defer cancel()
	s := Scenarios[0]
	for {
		status, _, err := g.do(ctx, s)
		if err == nil && status == s.Want {
			return
		}
		g.log.Info("waiting for the mesh", "scenario", s.Name, "status", status, "err", err)
		select {
		case <-ctx.Done():
			g.log.Warn("the mesh is not ready; sending traffic anyway", "waited", g.cfg.WaitReady)
			return
		case <-time.After(time.Second):
		}
	}
}

// Report returns a copy of the counts so far.
func (g *Generator) Report() Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.report
	r.Scenarios = make(map[string]*Count, len(g.report.Scenarios))
	for k, v := range g.report.Scenarios {
		c := *v
		r.Scenarios[k] = &c
	}
	return r
}

func (g *Generator) logSummary() {
	r := g.Report()
	by := map[string]int{}
	for _, c := range r.Scenarios {
		by[c.Kind] += c.Sent
	}
	g.log.Info("traffic so far", "sent", r.Sent, "unexpected", r.Unexpected, "errors", r.Errors,
		KindAllowed, by[KindAllowed], KindPolicyDenied, by[KindPolicyDenied],
		KindInvalidToken, by[KindInvalidToken], KindOtherTenant, by[KindOtherTenant])
}

func (g *Generator) send(ctx context.Context, s Scenario) {
	status, body, err := g.do(ctx, s)
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.report.Scenarios[s.Name]
	c.Sent++
	g.report.Sent++
	switch {
	case err != nil:
		c.Errors++
		g.report.Errors++
		if ctx.Err() == nil {
			g.log.Warn("request failed", "scenario", s.Name, "err", err)
		}
	case status != s.Want:
		c.Unexpected++
		g.report.Unexpected++
		g.log.Warn("unexpected answer", "scenario", s.Name, "status", status, "want", s.Want, "body", body)
	default:
		c.Expected++
	}
}

func (g *Generator) do(ctx context.Context, s Scenario) (int, string, error) {
	path := strings.ReplaceAll(s.Path, "{n}", fmt.Sprint(1+rand.IntN(100)))
	req, err := http.NewRequestWithContext(ctx, s.Method, strings.TrimSuffix(g.cfg.Target, "/")+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Demo-Scenario", s.Name)
	bearer := s.Bearer
	if s.Client != "" {
		if bearer, err = g.token(ctx, s.Client); err != nil {
			return 0, "", err
		}
		if s.Tamper {
			bearer = tamper(bearer)
		}
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := g.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	return resp.StatusCode, string(b), nil
}

// tamper changes the first character of the signature, so the token is
// well-formed and names a known key but its signature does not verify.
func tamper(tok string) string {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 || i+1 >= len(tok) {
		return tok + "x"
	}
	c := byte('A')
	if tok[i+1] == 'A' {
		c = 'B'
	}
	return tok[:i+1] + string(c) + tok[i+2:]
}

// token returns a cached access token of the client, fetching a new one
// with the client_credentials grant once half its lifetime has passed.
func (g *Generator) token(ctx context.Context, clientID string) (string, error) {
	g.mu.Lock()
	t, ok := g.tokens[clientID]
	g.mu.Unlock()
	if ok && time.Now().Before(t.refresh) {
		return t.value, nil
	}
	c := g.clients[clientID]
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {g.cfg.IDP.Resource}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	resp, err := g.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", clientID, err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body); err != nil {
		return "", fmt.Errorf("token for %s: status %d: %w", clientID, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || body.AccessToken == "" {
		return "", fmt.Errorf("token for %s: status %d %s", clientID, resp.StatusCode, body.Error)
	}
	life := time.Duration(body.ExpiresIn) * time.Second
	if life <= 0 {
		life = time.Minute
	}
	g.mu.Lock()
	g.tokens[clientID] = token{value: body.AccessToken, refresh: time.Now().Add(life / 2)}
	g.mu.Unlock()
	return body.AccessToken, nil
}
