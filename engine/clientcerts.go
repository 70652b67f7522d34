package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

// clientCertSet is [client_certs], compiled once: the tenant of each
// trust domain, the identity of each SPIFFE ID given roles, and the
// count of verifications by outcome.
type clientCertSet struct {
	tenants map[string]string
	known   map[string]*certIdentity
	// ok, invalid and untrusted count the verifications by outcome
	// (svc.client_certs.verifications).
	ok, invalid, untrusted atomic.Int64
	// ids holds the SPIFFE ID of each presentation that named one, so
	// that a workload's every request does not decode and parse its
	// certificate again (tens of microseconds). It is emptied when it
	// reaches maxCachedIDs: a bound, not an eviction policy, since a
	// mesh has far fewer workloads than that.
	idsMu sync.RWMutex
	ids   map[clientcert.Presented]clientcert.ID
}

// maxCachedIDs bounds clientCertSet.ids.
const maxCachedIDs = 4096

// identify is clientcert.Identify, remembered for the presentations that
// name an ID.
func (s *clientCertSet) identify(p clientcert.Presented) (clientcert.ID, error) {
	s.idsMu.RLock()
	id, ok := s.ids[p]
	s.idsMu.RUnlock()
	if ok {
		return id, nil
	}
	id, err := clientcert.Identify(p)
	if err != nil {
		return id, err
	}
	s.idsMu.Lock()
	if len(s.ids) >= maxCachedIDs {
		clear(s.ids)
	}
	s.ids[p] = id
	s.idsMu.Unlock()
	return id, nil
}

// certIdentity is what a SPIFFE ID stands for: the policy input's user
// and the claims ValidateToken returns, shaped as a token's.
type certIdentity struct {
	principal *principal
	claims    map[string]any
}

// newClientCertSet compiles cc; nil without trust domains (no client
// certificate is then judged).
func newClientCertSet(cc config.ClientCerts) *clientCertSet {
	if len(cc.TrustDomains) == 0 {
		return nil
	}
	s := &clientCertSet{tenants: cc.TrustDomains, known: make(map[string]*certIdentity, len(cc.Roles)),
		ids: make(map[clientcert.Presented]clientcert.ID)}
	for raw, roles := range cc.Roles {
		id, err := clientcert.ParseID(raw)
		if err != nil {
			continue // refused by config.Validate
		}
		tenant, ok := cc.TrustDomains[id.TrustDomain]
		if !ok {
			continue // refused by config.Validate
		}
		s.known[raw] = newCertIdentity(id, tenant, roles)
	}
	return s
}

func newCertIdentity(id clientcert.ID, tenant string, roles []string) *certIdentity {
	sub := id.String()
	if roles == nil {
		roles = []string{}
	}
	claimRoles := make([]any, len(roles))
	for i, r := range roles {
		claimRoles[i] = r
	}
	u := policy.User{ID: sub, TenantID: tenant, Roles: roles, Claims: map[string]any{"trust_domain": id.TrustDomain}}
	if len(roles) > 0 {
		u.Role = roles[0]
	}
	claims := map[string]any{"sub": sub, "tenant_id": tenant, "roles": claimRoles, "trust_domain": id.TrustDomain}
	return &certIdentity{principal: newPrincipal(KindMTLS, id.TrustDomain, "", u), claims: claims}
}

// verifyClientCert judges what a proxy vouched for about a client
// certificate: its SPIFFE ID must parse (reason.ClientCertInvalid) and
// be of a mapped trust domain (reason.ClientCertUntrusted). The caller
// is the ID, of its trust domain's tenant, with the roles
// client_certs.roles gives it (none when absent).
func (e *Engine) verifyClientCert(p clientcert.Presented) (TokenDecision, *principal) {
	s := e.clientCerts
	id, err := s.identify(p)
	if err != nil {
		s.invalid.Add(1)
		d := TokenDecision{Reason: reason.ClientCertInvalid, Message: "the client certificate is invalid"}
		var re *reason.Error
		if errors.As(err, &re) {
			d.Message = re.Msg
		}
		return d, nil
	}
	tenant, ok := s.tenants[id.TrustDomain]
	if !ok {
		s.untrusted.Add(1)
		return TokenDecision{Reason: reason.ClientCertUntrusted, Message: "the client certificate's trust domain is not in client_certs.trust_domains"}, nil
	}
	s.ok.Add(1)
	ident := s.known[id.String()]
	if ident == nil {
		ident = newCertIdentity(id, tenant, nil)
	}
	return TokenDecision{Allowed: true, Claims: ident.claims, Reason: reason.OK, Subject: ident.principal.user.ID, TenantID: tenant, Kind: KindMTLS}, ident.principal
}

// ClientCertStatus is the state of [client_certs] in Status.
type ClientCertStatus struct {
	// TrustDomains is the number of trust domains mapped to a tenant.
	TrustDomains int `json:"trust_domains"`
	// Roles is the number of SPIFFE IDs given roles.
	Roles int `json:"roles"`
	// Accepted, Invalid and Untrusted count the client certificates
	// judged since the start, by outcome.
	Accepted  int64 `json:"accepted"`
	Invalid   int64 `json:"invalid"`
	Untrusted int64 `json:"untrusted"`
}

func (s *clientCertSet) status() *ClientCertStatus {
	return &ClientCertStatus{
		TrustDomains: len(s.tenants), Roles: len(s.known),
		Accepted: s.ok.Load(), Invalid: s.invalid.Load(), Untrusted: s.untrusted.Load(),
	}
}

// observeClientCerts reports the client certificates judged, by outcome
// (the reason code: ok, client-cert-invalid, client-cert-untrusted).
func observeClientCerts(m metric.Meter, e *Engine) error {
	s := e.clientCerts
	if s == nil {
		return nil
	}
	verified, err := m.Int64ObservableCounter("svc.client_certs.verifications",
		metric.WithDescription("Client certificates judged, by outcome (reason code)."))
	if err != nil {
		return err
	}
	outcome := func(c reason.Code) metric.ObserveOption {
		return metric.WithAttributes(attribute.String("outcome", string(c)))
	}
	ok, invalid, untrusted := outcome(reason.OK), outcome(reason.ClientCertInvalid), outcome(reason.ClientCertUntrusted)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(verified, s.ok.Load(), ok)
		o.ObserveInt64(verified, s.invalid.Load(), invalid)
		o.ObserveInt64(verified, s.untrusted.Load(), untrusted)
		return nil
	}, verified)
	return err
}
