package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/svc-dev/svc/envoy"
)

// front is the HTTP/1.1 front of the plain-text HTTP listener. It reads
// every connection's requests itself and answers the proxies' checks
// (envoy.IsFrontPath) without net/http, whose own work (a request with
// its header map and URL, a response writer, a context, a goroutine
// watching the connection) cost as much as the check itself. The first
// request it does not answer itself — any other path, or a check request
// it cannot read exactly as net/http would (see fastRequest) — goes, with
// the connection, to the net/http server: the connection's unread bytes,
// that request's among them, are read by net/http as if it had accepted
// the connection, so it answers them with its own semantics, limits and
// errors. A connection handed over stays with net/http.
//
// Its limits are net/http's: a request's header must arrive within
// ReadHeaderTimeout of its first byte (of the connection, for the first
// request), a connection is closed after IdleTimeout without a request,
// and a header larger than frontBufSize goes to net/http, which refuses
// one larger than MaxHeaderBytes.
//
// A check is decided in its connection's context, as net/http's request
// context: cancelled when the client hangs up while it is decided, when
// the connection closes, and when the server closes (Close, or Shutdown
// giving up on it). The hang-up is noticed without a goroutine or a
// timer per request: one goroutine of the front looks, every probeEvery,
// at the sockets of the checks already running at its previous look,
// without reading from them.
type front struct {
	srv     *Server
	std     *http.Server
	handoff *connQueue
	// serve answers a check request on w; ctx carries its trace context.
	serve func(ctx context.Context, w http.ResponseWriter, r *envoy.FrontRequest, fc *frontConn)

	mu       sync.Mutex
	conns    map[*frontConn]struct{}
	lis      net.Listener
	closing  atomic.Bool
	finished chan struct{} // closed when closing and conns is empty
	// handedOver counts the connections given to net/http.
	handedOver atomic.Int64
	// base is the parent of the connections' contexts; stop cancels it.
	base context.Context
	stop context.CancelFunc
	// probeEvery is how often the running checks are looked at for
	// their client's hang-up (watchHangUps).
	probeEvery time.Duration
}

// frontProbeEvery is front.probeEvery: a check that takes longer is
// waiting on something (a key set, a store), and is cancelled within
// twice this long of its client's hang-up.
const frontProbeEvery = 50 * time.Millisecond

// frontBufSize is the read buffer of a connection: a request header that
// does not fit goes to net/http.
const frontBufSize = 8 << 10

func newFront(s *Server, std *http.Server) *front {
	base, stop := context.WithCancel(context.Background())
	return &front{
		srv:        s,
		std:        std,
		handoff:    newConnQueue(),
		conns:      make(map[*frontConn]struct{}),
		finished:   make(chan struct{}),
		base:       base,
		stop:       stop,
		probeEvery: frontProbeEvery,
	}
}

// Serve accepts connections on lis until Shutdown or Close, and serves
// the handed-over ones with std; it returns http.ErrServerClosed then.
func (f *front) Serve(lis net.Listener) error {
	f.mu.Lock()
	f.lis = lis
	f.mu.Unlock()
	if f.closing.Load() {
		lis.Close()
		return http.ErrServerClosed
	}
	go f.watchHangUps()
	var delay time.Duration
	for {
		c, err := lis.Accept()
		if err != nil {
			if f.closing.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				// As net/http: back off on a temporary accept error.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				f.srv.log.Warn("http accept", "err", err, "retry_in", delay.String())
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		fc := &frontConn{f: f, c: c}
		if ra := c.RemoteAddr(); ra != nil {
			fc.remote = ra.String() // as net/http
		}
		if !f.track(fc) {
			c.Close()
			continue
		}
		go fc.serve()
	}
}

// track adds fc to the connections Shutdown waits for; false when the
// front is closing.
func (f *front) track(fc *frontConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing.Load() {
		return false
	}
	f.conns[fc] = struct{}{}
	return true
}

func (f *front) untrack(fc *frontConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, fc)
	if f.closing.Load() && len(f.conns) == 0 {
		select {
		case <-f.finished:
		default:
			close(f.finished)
		}
	}
}

// beginClose stops accepting and closes the idle connections; the busy
// ones close once their answer is written.
func (f *front) beginClose(all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closing.Store(true)
	if f.lis != nil {
		f.lis.Close()
	}
	for fc := range f.conns {
		if all || fc.state.CompareAndSwap(connIdle, connClosed) {
			fc.c.Close()
		}
	}
	if len(f.conns) == 0 {
		select {
		case <-f.finished:
		default:
			close(f.finished)
		}
	}
}

// Shutdown stops accepting, closes the idle connections and waits for
// the busy ones to finish their request, until ctx ends. Connections
// handed to net/http are its Shutdown's.
func (f *front) Shutdown(ctx context.Context) error {
	f.beginClose(false)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-f.finished:
			return nil
		case <-ctx.Done():
			// The checks still running are given up on.
			f.stop()
			return ctx.Err()
		case <-t.C:
			// A connection that went idle after beginClose.
			f.beginClose(false)
		}
	}
}

// watchHangUps cancels the context of a check whose client hung up,
// looking every probeEvery at the checks that were running at the
// previous look, until the front is closed or has finished. A check
// costs its connection two atomic additions; most end before a look.
func (f *front) watchHangUps() {
	t := time.NewTicker(f.probeEvery)
	defer t.Stop()
	var slow []*frontConn
	for {
		select {
		case <-f.base.Done():
			return
		case <-f.finished:
			return
		case <-t.C:
		}
		slow = slow[:0]
		f.mu.Lock()
		for fc := range f.conns {
			n := fc.checks.Load()
			if n&1 == 1 && n == fc.seenChecks {
				slow = append(slow, fc)
			}
			fc.seenChecks = n
		}
		f.mu.Unlock()
		for _, fc := range slow {
			if hungUp(fc.c) {
				fc.cancel()
			}
		}
		clear(slow)
	}
}

// Close closes the listener and every connection at once.
func (f *front) Close() {
	f.stop()
	f.beginClose(true)
	f.handoff.Close()
}

// Connection states: a connection is idle while it waits for the first
// byte of a request; Shutdown closes idle connections.
const (
	connIdle int32 = iota
	connBusy
	connClosed
)

// frontConn is one connection of the front.
type frontConn struct {
	f      *front
	c      net.Conn
	remote string
	state  atomic.Int32
	br     *bufio.Reader
	bw     *bufio.Writer
	req    envoy.FrontRequest
	w      frontWriter
	// deadline is the read deadline set; headerArmed: it is the current
	// request header's.
	deadline    time.Time
	headerArmed bool
	// ctx is the context of the connection's checks, cancel cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// checks counts the starts and ends of the connection's checks: odd
	// while one is decided. seenChecks is its value at watchHangUps'
	// previous look, read and written under f.mu.
	checks     atomic.Uint64
	seenChecks uint64
}

// armHeader gives the rest of the request header ReadHeaderTimeout to
// arrive, once per request: set only when the header's first bytes did
// not bring all of it, a little after its first byte arrived.
func (fc *frontConn) armHeader() {
	if fc.headerArmed {
		return
	}
	fc.headerArmed = true
	fc.deadline = time.Now().Add(fc.f.std.ReadHeaderTimeout)
	_ = fc.c.SetReadDeadline(fc.deadline)
}

// armIdle gives the next request IdleTimeout to begin. A deadline set
// less than a second ago is kept: setting one costs more than a check's
// parsing, and an idle connection closes at most a second early.
func (fc *frontConn) armIdle() {
	idle := fc.f.std.IdleTimeout
	now := time.Now()
	if fc.deadline.Sub(now) > idle-time.Second {
		return
	}
	fc.deadline = now.Add(idle)
	_ = fc.c.SetReadDeadline(fc.deadline)
}

var (
	frontReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, frontBufSize) }}
	frontWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func (fc *frontConn) serve() {
	defer fc.f.untrack(fc)
	fc.ctx, fc.cancel = context.WithCancel(fc.f.base)
	defer fc.cancel()
	fc.br = frontReaders.Get().(*bufio.Reader)
	fc.br.Reset(fc.c)
	fc.bw = frontWriters.Get().(*bufio.Writer)
	fc.bw.Reset(fc.c)
	handedOver := false
	defer func() {
		if !handedOver {
			fc.c.Close()
		}
		fc.br.Reset(nil)
		frontReaders.Put(fc.br)
		fc.bw.Reset(nil)
		frontWriters.Put(fc.bw)
	}()
	for first := true; ; first = false {
		if first {
			fc.state.Store(connBusy)
			fc.armHeader()
		} else {
			if !fc.state.CompareAndSwap(connBusy, connIdle) {
				return
			}
			if fc.br.Buffered() == 0 {
				if err := fc.bw.Flush(); err != nil {
					return
				}
				fc.armIdle()
				if _, err := fc.br.Peek(1); err != nil {
					return
				}
			}
			if !fc.state.CompareAndSwap(connIdle, connBusy) {
				return // closed by Shutdown while idle
			}
			fc.headerArmed = false
		}
		n, ok := fc.readHeader()
		if !ok {
			return
		}
		closeAfter, fast := fc.parse(n)
		if !fast {
			handedOver = fc.handOver()
			return
		}
		fc.br.Discard(n) //nolint:errcheck // n bytes are buffered
		closeAfter = closeAfter || fc.f.closing.Load()
		err := fc.answer(closeAfter)
		if errors.Is(err, errAnswerPanicked) {
			return
		}
		if err != nil || closeAfter {
			_ = fc.bw.Flush()
			return
		}
	}
}

// errAnswerPanicked ends a connection whose check panicked.
var errAnswerPanicked = errors.New("http check panicked")

// answer decides the parsed request and writes the answer. A panic in
// the decision ends this connection without an answer, as net/http does
// for a handler's panic, logged with its stack, instead of the process.
func (fc *frontConn) answer(closeAfter bool) (err error) {
	fc.f.srv.inflight.Add(1)
	defer fc.f.srv.inflight.Add(-1)
	defer func() {
		if r := recover(); r != nil {
			fc.f.srv.log.Error("http check panicked", "remote", fc.remote, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = errAnswerPanicked
		}
	}()
	fc.w.reset()
	fc.checks.Add(1) // odd: watchHangUps may look at the socket
	defer fc.checks.Add(1)
	fc.f.serve(fc.ctx, &fc.w, &fc.req, fc)
	return fc.w.writeTo(fc.bw, closeAfter)
}

// readHeader buffers the whole header of the next request, and returns
// its length with the blank line. When the header does not fit in the
// buffer, or a line of it ends in a bare LF (which net/http reads as a
// line's end, so that the header may have ended without a CRLF CRLF),
// it returns 0 and true: net/http reads it. false when the connection
// ended or timed out first.
func (fc *frontConn) readHeader() (int, bool) {
	from, lfFrom := 0, 0
	for {
		buf, _ := fc.br.Peek(fc.br.Buffered())
		if i := bytes.Index(buf[from:], crlfcrlf); i >= 0 {
			return from + i + len(crlfcrlf), true
		}
		if bareLF(buf, lfFrom) {
			return 0, true
		}
		from, lfFrom = max(0, len(buf)-len(crlfcrlf)+1), len(buf)
		if len(buf) == fc.br.Size() {
			return 0, true
		}
		fc.armHeader()
		if _, err := fc.br.Peek(len(buf) + 1); err != nil {
			// net/http ends such a connection without an answer too:
			// the peer closed it or sent no complete header in time.
			return 0, false
		}
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// bareLF reports a LF not preceded by a CR in buf[from:].
func bareLF(buf []byte, from int) bool {
	for {
		i := bytes.IndexByte(buf[from:], '\n')
		if i < 0 {
			return false
		}
		from += i
		if from == 0 || buf[from-1] != '\r' {
			return true
		}
		from++
	}
}

// handOver gives the connection, with its unread bytes, to net/http.
func (fc *frontConn) handOver() bool {
	if err := fc.bw.Flush(); err != nil {
		return false
	}
	_ = fc.c.SetReadDeadline(time.Time{})
	var pending []byte
	if n := fc.br.Buffered(); n > 0 {
		b, _ := fc.br.Peek(n)
		pending = bytes.Clone(b)
	}
	fc.f.handedOver.Add(1)
	return fc.f.handoff.push(&replayConn{Conn: fc.c, pending: pending})
}

// parse reads the request whose header is the first n buffered bytes
// into fc.req. fast is false when the front leaves the request to
// net/http: n is 0 (the header is larger than the buffer), or the
// request is not a check, or anything in it is not what the front
// reads exactly as net/http would (see fastRequest). closeAfter: the
// client asked to close the connection after the answer.
func (fc *frontConn) parse(n int) (closeAfter, fast bool) {
	if n == 0 {
		return false, false
	}
	b, _ := fc.br.Peek(n)
	line, _, _ := bytes.Cut(b, crlf)
	if !fastLine(line) {
		return false, false
	}
	// One string holds the request line and every header line: the
	// request's strings are its substrings.
	head := string(b[:n-len(crlf)])
	reqLine, hdr, _ := strings.Cut(head, "\r\n")
	method, target, _ := strings.Cut(reqLine, " ")
	method = frontMethods[method]
	target, _, _ = strings.Cut(target, " ")
	p, query, _ := strings.Cut(target, "?")
	r := &fc.req
	r.Reset()
	r.Method, r.Path, r.RawQuery, r.RemoteAddr = method, p, query, fc.remote
	hostSeen, lengthSeen := false, false
	for hdr != "" {
		var l string
		l, hdr, _ = strings.Cut(hdr, "\r\n")
		name, value, ok := strings.Cut(l, ":")
		if !ok || !httpguts.ValidHeaderFieldName(name) {
			return false, false
		}
		value = trimBlanks(value)
		if !validValue(value) {
			return false, false
		}
		lk := r.Lower(name)
		switch lk.String() {
		case "host":
			if hostSeen || !httpguts.ValidHostHeader(value) {
				return false, false
			}
			hostSeen, r.Host = true, value
			continue
		case "connection":
			switch {
			case strings.EqualFold(value, "close"):
				closeAfter = true
			case strings.EqualFold(value, "keep-alive"):
			default:
				return false, false
			}
		case "content-length":
			if value != "0" || lengthSeen {
				return false, false
			}
			lengthSeen = true
		case "transfer-encoding", "trailer", "expect", "upgrade", "te", "http2-settings":
			// A body, an upgrade or an interim answer: net/http's.
			return false, false
		}
		r.AddLower(lk, value)
	}
	if !hostSeen {
		return false, false
	}
	r.Done()
	return closeAfter, true
}

var crlf = []byte("\r\n")

// validValue is httpguts.ValidHeaderFieldValue(v), eight bytes at a
// time: a bearer token makes most of a check's header.
func validValue(v string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(v); i += 8 {
		x := binary.LittleEndian.Uint64([]byte(v[i : i+8]))
		// A byte below 0x20 or equal to 0x7f: let the exact test decide.
		if (x-ones*0x20)&^x&highs != 0 || ((x^ones*0x7f)-ones)&^(x^ones*0x7f)&highs != 0 {
			return httpguts.ValidHeaderFieldValue(v[i:])
		}
	}
	return httpguts.ValidHeaderFieldValue(v[i:])
}

// trimBlanks is strings.Trim(v, " \t"), as net/http trims a value.
func trimBlanks(v string) string {
	for v != "" && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for v != "" && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// fastLine reports a request line "METHOD target HTTP/1.1" whose method
// is one a check comes with (HEAD, whose answer has no body, aside),
// whose target is one of envoy.IsFrontPath's paths and reads as net/http
// reads it (fastTarget).
func fastLine(line []byte) bool {
	m, rest, ok1 := bytes.Cut(line, []byte(" "))
	t, proto, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || string(proto) != "HTTP/1.1" {
		return false
	}
	if _, ok := frontMethods[string(m)]; !ok {
		return false
	}
	p, query, _ := bytes.Cut(t, []byte("?"))
	return envoy.IsFrontPath(string(p)) && fastTarget(p, query)
}

// frontMethods are the methods of the requests the front answers, as
// interned strings.
var frontMethods = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		m[s] = s
	}
	return m
}()

// fastTarget reports a request target net/http's URL parsing and
// ServeMux leave as they are: origin form, a path of characters that
// EscapedPath keeps as sent (no percent-encoding) and that is clean (no
// redirect), a query of visible characters without "#".
func fastTarget(p, query []byte) bool {
	for i := 0; i < len(p); i++ {
		if !pathByte[p[i]] {
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	if bytes.Contains(p, []byte("//")) || bytes.Contains(p, []byte("/.")) {
		// Possibly not clean: ServeMux would redirect; net/http decides.
		clean := path.Clean(string(p))
		if bytes.HasSuffix(p, []byte("/")) && clean != "/" {
			clean += "/"
		}
		return clean == string(p)
	}
	return true
}

// pathByte marks the bytes a path keeps through url.URL's EscapedPath.
var pathByte = func() (t [256]bool) {
	for _, c := range []byte("!$&'()*+,-./0123456789:;=@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz~") {
		t[c] = true
	}
	return t
}()

// errTooManyFiles is EMFILE's message, a temporary accept error.
var errTooManyFiles = errors.New("too many open files")

// frontWriter is the http.ResponseWriter of a front request: the check
// writes its answer through it as through net/http's, and writeTo puts
// it on the wire as net/http would (sorted headers, Date, Content-Length,
// a sniffed Content-Type for a body without one).
type frontWriter struct {
	h      http.Header
	status int
	body   []byte
	// keys are the header's names in order, as the previous answer on
	// the connection had them: a check's answers have the same names as
	// a rule, which writeTo then neither collects nor sorts again.
	keys []string
	// head is room for the status line and header of the answer.
	head []byte
}

// maxFrontHead is the largest answer header whose room a connection
// keeps for the next answer.
const maxFrontHead = 16 << 10

func (w *frontWriter) reset() {
	if w.h == nil || len(w.h) > 32 {
		w.h = make(http.Header, 16)
	} else {
		clear(w.h)
	}
	w.status = 0
	w.body = w.body[:0]
}

func (w *frontWriter) Header() http.Header { return w.h }

func (w *frontWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *frontWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

func (w *frontWriter) writeTo(bw *bufio.Writer, closeAfter bool) error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	h := w.h
	if _, ok := h["Date"]; !ok {
		h["Date"] = frontDate()
	}
	if _, ok := h["Content-Length"]; !ok {
		if len(w.body) == 0 {
			h["Content-Length"] = zeroLength
		} else {
			h["Content-Length"] = []string{strconv.Itoa(len(w.body))}
		}
	}
	if _, ok := h["Content-Type"]; !ok && len(w.body) > 0 {
		h["Content-Type"] = []string{http.DetectContentType(w.body)}
	}
	if closeAfter {
		h["Connection"] = connectionClose
	}
	b := append(w.head[:0], "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	if text := http.StatusText(w.status); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(w.status), 10)
	}
	b = append(b, "\r\n"...)
	line := len(b)
	b, same := w.appendHeader(b)
	if !same {
		w.keys = w.keys[:0]
		for k := range h {
			w.keys = append(w.keys, k)
		}
		slices.Sort(w.keys)
		b, _ = w.appendHeader(b[:line])
	}
	b = append(b, "\r\n"...)
	if cap(b) <= maxFrontHead {
		w.head = b
	}
	bw.Write(b) //nolint:errcheck // the error comes with the body's
	_, err := bw.Write(w.body)
	return err
}

// appendHeader appends the header lines of w.h in the order of w.keys:
// as net/http writes them, a name that is not a valid field name (a
// handler's mistake) is left out, a value's line breaks become spaces
// and its surrounding blanks are trimmed. same is false, and nothing is
// appended, unless w.keys are exactly the header's names.
func (w *frontWriter) appendHeader(b []byte) (_ []byte, same bool) {
	if len(w.keys) != len(w.h) {
		return b, false
	}
	start := len(b)
	for _, k := range w.keys {
		vs, ok := w.h[k]
		if !ok {
			return b[:start], false
		}
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = appendHeaderValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	return b, true
}

// appendHeaderValue appends v as net/http writes a header value: each
// CR and LF a space, the surrounding blanks trimmed.
func appendHeaderValue(b []byte, v string) []byte {
	v = trimBlanks(v)
	from := len(b)
	b = append(b, v...)
	if strings.IndexByte(v, '\r') >= 0 || strings.IndexByte(v, '\n') >= 0 {
		for i := from; i < len(b); i++ {
			if b[i] == '\r' || b[i] == '\n' {
				b[i] = ' '
			}
		}
		// A line break at either end is a blank now.
		b = append(b[:from], trimBlanks(string(b[from:]))...)
	}
	return b
}

var (
	connectionClose = []string{"close"}
	zeroLength      = []string{"0"}
)

// frontDates holds the Date header of the current second.
var frontDates atomic.Pointer[frontDateValue]

type frontDateValue struct {
	unix int64
	v    []string
}

// frontDate is the Date header's value, made once a second.
func frontDate() []string {
	now := time.Now()
	if d := frontDates.Load(); d != nil && d.unix == now.Unix() {
		return d.v
	}
	d := &frontDateValue{unix: now.Unix(), v: []string{now.UTC().Format(http.TimeFormat)}}
	frontDates.Store(d)
	return d.v
}

// replayConn is a connection handed to net/http: reads return the bytes
// the front had buffered first.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// connQueue is the listener net/http serves the handed-over connections
// from.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{}), addr: frontAddr{}}
}

// push hands c to Accept; false (and c closed) once the queue is closed.
func (q *connQueue) push(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		c.Close()
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

type frontAddr struct{}

func (frontAddr) Network() string { return "front" }
func (frontAddr) String() string  { return "front" }

var _ io.Reader = (*replayConn)(nil)
