package decisionlog

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/svc-dev/svc/engine/loopback"
)

// HTTPOptions configure the HTTP sink.
type HTTPOptions struct {
	// URL is the service's base, http(s)://host[/path]; batches are
	// posted to URL + "/logs".
	URL string
	// Token, when set, is sent as Authorization: Bearer Token.
	Token string
	// Timeout bounds one upload (default 10s).
	Timeout time.Duration
	// Client sends the uploads (default a client of its own that
	// follows no redirect).
	Client *http.Client
	// RootCAs, when set, are the authorities an https:// service's
	// certificate is verified against instead of the system's; for the
	// default Client only.
	RootCAs *x509.CertPool
}

// HTTP is the HTTP sink, in the upload shape of OPA's decision logs: a
// POST of the batch as a gzipped JSON array of the records, any 2xx an
// acknowledgement of every record.
type HTTP struct {
	opts     HTTPOptions
	endpoint string

	// mu guards zw, the compressor every batch reuses (a new one is
	// hundreds of KB of state), and lastSize, the size of the previous
	// compressed batch, which the next one's buffer starts with.
	mu       sync.Mutex
	zw       *gzip.Writer
	lastSize int

	// maxRecord is MaxRecordBytes: 0 until the service refused a record
	// for its size (413).
	maxRecord atomic.Int64
}

// MaxRecordBytes is 0 (no bound) until the service answered 413 Content
// Too Large to an upload of one record: then one byte less than that
// record, so that the Logger sends it without its input, or drops it.
func (s *HTTP) MaxRecordBytes() int { return int(s.maxRecord.Load()) }

// NewHTTP makes the sink of opts.URL; nothing is sent before the first
// batch.
func NewHTTP(opts HTTPOptions) (*HTTP, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Client == nil {
		// A redirect is answered as a failure rather than followed: the
		// batch and its token go to the configured URL alone.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if opts.RootCAs != nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs}
		}
		opts.Client = &http.Client{
			Transport:     tr,
			CheckRedirect: loopback.NoRedirect,
		}
	}
	req, err := http.NewRequest(http.MethodPost, opts.URL, nil)
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "" {
		return nil, fmt.Errorf("decision log http: url must be http(s)://host[/path], got %q", redact(opts.URL))
	}
	if strings.ContainsAny(opts.Token, "\r\n") {
		return nil, fmt.Errorf("decision log http: the token holds a line break")
	}
	return &HTTP{opts: opts, endpoint: strings.TrimSuffix(opts.URL, "/") + "/logs"}, nil
}

// Name is "http".
func (s *HTTP) Name() string { return "http" }

// Send uploads the batch and returns nil once the service answered 2xx.
// A batch the service refuses for its size (413) is uploaded in halves,
// each halved again while refused; a record refused alone sets the bound
// of MaxRecordBytes, and the batch fails, to be sent again within it. A
// half taken before another was refused is sent again with the batch.
func (s *HTTP) Send(ctx context.Context, batch []Record) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.upload(ctx, batch)
}

// errTooLarge is upload's error of a 413.
var errTooLarge = errors.New("too large for the service")

func (s *HTTP) upload(ctx context.Context, batch []Record) error {
	err := s.post(ctx, batch)
	if !errors.Is(err, errTooLarge) {
		return err
	}
	if len(batch) == 1 {
		n := int64(max(len(batch[0].JSON)-1, 1))
		for {
			cur := s.maxRecord.Load()
			if (cur != 0 && cur <= n) || s.maxRecord.CompareAndSwap(cur, n) {
				break
			}
		}
		return err
	}
	half := len(batch) / 2
	if err := s.upload(ctx, batch[:half]); err != nil {
		return err
	}
	return s.upload(ctx, batch[half:])
}

// post sends batch in one request.
func (s *HTTP) post(ctx context.Context, batch []Record) error {
	body, err := s.compress(batch)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, body)
	if err != nil {
		return fmt.Errorf("decision log http: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("User-Agent", "svc-sidecar decision log")
	if s.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.Token)
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		// The URL of Do's error without its query, which may be a secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("decision log http: POST %s: %w", redact(s.endpoint), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	// Drain a little more so that the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("decision log http: POST %s: %s%s", redact(s.endpoint), resp.Status, quoteSnippet(snippet))
		if resp.StatusCode == http.StatusRequestEntityTooLarge {
			err = fmt.Errorf("%w (%w: %d records)", err, errTooLarge, len(batch))
		}
		return err
	}
	return nil
}

// compress is the batch as a gzipped JSON array. It compresses at
// gzip's best speed: records are JSON, which even the fastest level
// shrinks several times over, and the default level costs the sidecar
// several times the CPU per record for a few per cent less.
func (s *HTTP) compress(batch []Record) (*bytes.Buffer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body := bytes.NewBuffer(make([]byte, 0, s.lastSize+s.lastSize/8))
	if s.zw == nil {
		s.zw, _ = gzip.NewWriterLevel(body, gzip.BestSpeed) // a valid level: no error
	} else {
		s.zw.Reset(body)
	}
	_, _ = s.zw.Write([]byte{'['})
	for i, r := range batch {
		if i > 0 {
			_, _ = s.zw.Write([]byte{','})
		}
		_, _ = s.zw.Write(r.JSON)
	}
	_, _ = s.zw.Write([]byte{']'})
	if err := s.zw.Close(); err != nil {
		return nil, fmt.Errorf("decision log http: compress: %w", err)
	}
	s.lastSize = body.Len()
	return body, nil
}

// quoteSnippet is the start of an error answer's body for a message:
// printable, at most 128 bytes, or nothing.
func quoteSnippet(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
	if s == "" {
		return ""
	}
	if len(s) > 128 {
		s = s[:128]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return fmt.Sprintf(": %q", s)
}

// Close releases the idle connections.
func (s *HTTP) Close() error {
	s.opts.Client.CloseIdleConnections()
	return nil
}
