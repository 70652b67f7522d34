package samlgw

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/wire"
)

// Bounds of IdP metadata fetching.
const (
	// MaxMetadataBytes caps a metadata document.
	MaxMetadataBytes = 1 << 20
	// MetadataFetchTimeout bounds one fetch.
	MetadataFetchTimeout = 10 * time.Second
	// MetadataMinRefresh / MetadataMaxRefresh bound the refresh interval
	// the document asks for (cacheDuration, validUntil); without either
	// it is refreshed every MetadataDefaultRefresh.
	MetadataMinRefresh     = 5 * time.Minute
	MetadataMaxRefresh     = 24 * time.Hour
	MetadataDefaultRefresh = time.Hour
	// metadataRetryMin / metadataRetryMax bound the retry after a failure.
	metadataRetryMin = 5 * time.Second
	metadataRetryMax = 5 * time.Minute
)

// MetadataStatus is what /v1/status shows of the IdP metadata (package
// wire).
type MetadataStatus = wire.SAMLMetadataStatus

// metadataSource holds the current IdP metadata: from a file, loaded once,
// or from a URL, refreshed by run.
type metadataSource struct {
	url, file string
	client    *http.Client
	timeout   time.Duration // of one fetch; MetadataFetchTimeout when 0
	// trust, when set, are the certificates one of which must have signed
	// the metadata.
	trust []*x509.Certificate
	log   *slog.Logger
	now   func() time.Time

	// failures counts the failed fetches since the last good one;
	// announced is set once a copy was loaded. Only run touches them.
	failures  int
	announced bool

	mu          sync.RWMutex
	idp         *IDP
	fetched     time.Time
	lastAttempt time.Time
	lastErr     string
	next        time.Time
}

func (m *metadataSource) current() *IDP {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.idp
}

func (m *metadataSource) status() MetadataStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	st := MetadataStatus{Source: m.url, LastError: m.lastErr}
	if m.file != "" {
		st.Source = m.file
	}
	if m.idp != nil {
		st.Loaded, st.EntityID, st.Certificates = true, m.idp.EntityID, len(m.idp.Certs)
		t := m.fetched
		st.FetchedAt = &t
	}
	if m.lastErr != "" {
		t := m.lastAttempt
		st.LastAttempt = &t
		st.Stale = m.idp != nil
	}
	if !m.next.IsZero() {
		t := m.next
		st.NextRefresh = &t
	}
	return st
}

// loadFile reads the metadata file once.
func (m *metadataSource) loadFile() error {
	data, err := os.ReadFile(m.file)
	if err != nil {
		return fmt.Errorf("sdk.saml.idp_metadata_file: %w", err)
	}
	idp, _, err := ParseIDPMetadata(data, m.now(), m.trust)
	if err != nil {
		return fmt.Errorf("sdk.saml.idp_metadata_file %s: %w", m.file, err)
	}
	m.mu.Lock()
	m.idp, m.fetched = idp, m.now()
	m.mu.Unlock()
	return nil
}

// run fetches the URL now and then again within the bounds, until ctx ends.
func (m *metadataSource) run(ctx context.Context) {
	if m.url == "" {
		return
	}
	retry := metadataRetryMin
	for {
		wait, err := m.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.noteFailure(err, retry)
			wait = retry
			retry = min(retry*2, metadataRetryMax)
		} else {
			m.noteSuccess()
			retry = metadataRetryMin
		}
		m.mu.Lock()
		m.next = m.now().Add(wait)
		m.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// noteFailure logs a failed fetch: whether a good copy still serves or
// there is none yet.
func (m *metadataSource) noteFailure(err error, retry time.Duration) {
	m.failures++
	if m.current() == nil {
		m.log.Warn("IdP metadata fetch failed; no copy yet, retrying (sign-in answers saml-idp-unavailable until then)",
			"url", m.url, "err", err, "retry_in", retry.String())
		return
	}
	m.log.Warn("IdP metadata fetch failed; the last good copy keeps serving", "url", m.url, "err", err, "retry_in", retry.String())
}

// noteSuccess logs, once, the first copy loaded after failed fetches.
func (m *metadataSource) noteSuccess() {
	if m.failures > 0 && !m.announced {
		m.log.Info("IdP metadata available; sign-in works", "url", m.url, "failed_fetches", m.failures)
	}
	m.announced, m.failures = true, 0
}

// fetch loads the URL once and returns when to refresh.
func (m *metadataSource) fetch(ctx context.Context) (time.Duration, error) {
	now := m.now()
	idp, refresh, err := m.get(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.lastAttempt, m.lastErr = now, err.Error()
		return 0, err
	}
	m.idp, m.fetched, m.lastErr = idp, now, ""
	m.lastAttempt = time.Time{}
	return refresh, nil
}

func (m *metadataSource) get(ctx context.Context) (*IDP, time.Duration, error) {
	timeout := m.timeout
	if timeout <= 0 {
		timeout = MetadataFetchTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/samlmetadata+xml, application/xml, text/xml")
	client := *m.client
	client.CheckRedirect = loopback.CheckRedirect
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("fetch: HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxMetadataBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read: %w", err)
	}
	if len(data) > MaxMetadataBytes {
		return nil, 0, fmt.Errorf("metadata larger than %d bytes", MaxMetadataBytes)
	}
	idp, refresh, err := ParseIDPMetadata(data, m.now(), m.trust)
	if err != nil {
		return nil, 0, err
	}
	return idp, refresh, nil
}

// ParseIDPMetadata reads an IdP's EntityDescriptor (alone, or the first
// one with an IDPSSODescriptor in an EntitiesDescriptor): its entity id,
// signing certificates and HTTP-Redirect SSO location, and the refresh
// interval it asks for, within the bounds. A document whose validUntil
// (of the EntitiesDescriptor or of the EntityDescriptor) is not after now
// is refused. With trust certificates, the root element must carry an
// enveloped signature that verifies with one of them, and only the signed
// content is read.
func ParseIDPMetadata(data []byte, now time.Time, trust []*x509.Certificate) (*IDP, time.Duration, error) {
	// Metadata comes from the configured IdP or federation, whose
	// aggregates run to many thousand elements: no ACS bounds here.
	if err := scanTokens(context.Background(), data, limits{}); err != nil {
		return nil, 0, err
	}
	if len(trust) > 0 {
		var err error
		if data, err = verifiedMetadata(data, trust, now); err != nil {
			return nil, 0, err
		}
	}
	var eds []saml.EntityDescriptor
	var ed saml.EntityDescriptor
	var setUntil time.Time
	if err := xml.Unmarshal(data, &ed); err == nil && ed.EntityID != "" {
		eds = append(eds, ed)
	} else {
		var set saml.EntitiesDescriptor
		if err := xml.Unmarshal(data, &set); err != nil {
			return nil, 0, errors.New("not SAML metadata (EntityDescriptor or EntitiesDescriptor)")
		}
		eds = set.EntityDescriptors
		if set.ValidUntil != nil {
			setUntil = *set.ValidUntil
		}
	}
	for _, ed := range eds {
		if len(ed.IDPSSODescriptors) == 0 {
			continue
		}
		idp := &IDP{EntityID: ed.EntityID}
		d := ed.IDPSSODescriptors[0]
		for _, kd := range d.KeyDescriptors {
			if kd.Use != "" && kd.Use != "signing" {
				continue
			}
			for _, xc := range kd.KeyInfo.X509Data.X509Certificates {
				raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(xc.Data), ""))
				if err != nil {
					return nil, 0, errors.New("a signing certificate is not base64")
				}
				cert, err := x509.ParseCertificate(raw)
				if err != nil {
					return nil, 0, fmt.Errorf("a signing certificate does not parse: %w", err)
				}
				idp.Certs = append(idp.Certs, cert)
			}
		}
		for _, sso := range d.SingleSignOnServices {
			if sso.Binding == saml.HTTPRedirectBinding {
				idp.SSOURL = sso.Location
				break
			}
		}
		if idp.EntityID == "" || len(idp.Certs) == 0 {
			return nil, 0, errors.New("the IdP metadata names no entity id or no signing certificate")
		}
		refresh := MetadataDefaultRefresh
		if ed.CacheDuration > 0 {
			refresh = ed.CacheDuration
		}
		for _, vu := range []time.Time{setUntil, ed.ValidUntil} {
			if vu.IsZero() {
				continue
			}
			if !vu.After(now) {
				return nil, 0, fmt.Errorf("the metadata expired at %s (validUntil)", vu.UTC().Format(time.RFC3339))
			}
			refresh = min(refresh, vu.Sub(now))
		}
		return idp, min(max(refresh, MetadataMinRefresh), MetadataMaxRefresh), nil
	}
	return nil, 0, errors.New("the metadata holds no identity provider (IDPSSODescriptor)")
}

// verifiedMetadata returns the content of the metadata's root element as
// its enveloped signature covers it, when that signature verifies with
// one of the trust certificates.
func verifiedMetadata(data []byte, trust []*x509.Certificate, now time.Time) ([]byte, error) {
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(data); err != nil || doc.Root() == nil {
		return nil, errors.New("the metadata is not well-formed XML")
	}
	el, err := verifySigned(doc.Root(), trust, now)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, fmt.Errorf("the metadata signature: %s", e.Msg)
		}
		return nil, fmt.Errorf("the metadata signature: %w", err)
	}
	out := etree.NewDocument()
	out.SetRoot(el)
	return out.WriteToBytes()
}

// LoadCertificates reads every PEM CERTIFICATE block of a file.
func LoadCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}
