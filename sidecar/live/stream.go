package live

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/sidecar/telemetry"
	"github.com/svc-dev/svc/wire"
)

// Paths of the stream endpoints (package wire).
const (
	PathSpans     = wire.PathSpans
	PathLogs      = wire.PathLogs
	PathDecisions = wire.PathDecisions
)

// Stream timing.
const (
	// reportEvery is how often a stream reports drops and, for SSE, how
	// often an idle stream's keep-alive is considered.
	reportEvery = time.Second
	// keepAlive is how long an SSE stream stays silent before a comment
	// line keeps proxies from closing it.
	keepAlive = 15 * time.Second
	// maxBatch bounds the records written before a flush.
	maxBatch = 256
)

// Streams serves the stream endpoints of a Hub.
type Streams struct {
	hub  *Hub
	now  func() time.Time
	stop chan struct{}
	once sync.Once
}

// NewStreams returns the stream endpoints of h.
func NewStreams(h *Hub) *Streams {
	return &Streams{hub: h, now: time.Now, stop: make(chan struct{})}
}

// Register adds the endpoints to mux, each behind guard (the admin guard
// of the sidecar).
func (s *Streams) Register(mux *http.ServeMux, guard func(http.HandlerFunc) http.HandlerFunc) {
	if s.hub.spans != nil {
		mux.HandleFunc("GET "+PathSpans, guard(s.serveSpans))
	}
	if s.hub.logs != nil {
		mux.HandleFunc("GET "+PathLogs, guard(s.serveLogs))
	}
	mux.HandleFunc("GET "+PathDecisions, guard(s.serveDecisions))
}

// Shutdown ends every open stream, so that a draining server is not held
// by watchers that never go idle.
func (s *Streams) Shutdown() { s.once.Do(func() { close(s.stop) }) }

func (s *Streams) query(w http.ResponseWriter, r *http.Request, allowed ...string) (Query, bool) {
	q, err := ParseQuery(r.URL.Query(), r.Header.Get("Accept"), s.now(), allowed...)
	if err != nil {
		qe, _ := err.(*QueryError)
		wire.WriteError(w, http.StatusBadRequest, wire.Indented, qe.Code, qe.Msg)
		return q, false
	}
	return q, true
}

func (s *Streams) serveSpans(w http.ResponseWriter, r *http.Request) {
	q, ok := s.query(w, r, wire.ParamSince, wire.ParamTenant, wire.ParamService, wire.ParamTraceID, wire.ParamErrorsOnly)
	if !ok {
		return
	}
	pre := func(sp telemetry.SpanRecord) bool {
		return (q.TraceID == "" || sp.TraceID == q.TraceID) && (q.Service == "" || sp.Service == q.Service)
	}
	sub := s.hub.spans.Watch(r.Context(), pre, q.Since)
	tf := newTraceFilter(q.Tenant, q.ErrorsOnly)
	serve(s, w, r, q.SSE, "span", sub, tf.add, tf.expire)
}

func (s *Streams) serveLogs(w http.ResponseWriter, r *http.Request) {
	q, ok := s.query(w, r, wire.ParamSince, wire.ParamTenant, wire.ParamTraceID, wire.ParamErrorsOnly, wire.ParamLevel, wire.ParamFilter)
	if !ok {
		return
	}
	match := func(lr telemetry.LogRecord) bool {
		if q.TraceID != "" && lr.TraceID != q.TraceID {
			return false
		}
		if q.Tenant != "" && lr.Attributes["tenant"] != q.Tenant {
			return false
		}
		lvl := wire.LevelOf(lr.Level)
		if (q.HasLevel && lvl < q.Level) || (q.ErrorsOnly && lvl < errorLevel) {
			return false
		}
		return q.Filter.Match(logField(lr))
	}
	sub := s.hub.logs.Watch(r.Context(), match, q.Since)
	serve(s, w, r, q.SSE, "log", sub, pass[telemetry.LogRecord], nil)
}

func (s *Streams) serveDecisions(w http.ResponseWriter, r *http.Request) {
	q, ok := s.query(w, r, wire.ParamSince, wire.ParamTenant, wire.ParamTraceID, wire.ParamErrorsOnly, wire.ParamFilter)
	if !ok {
		return
	}
	match := func(d audit.Record) bool {
		return (q.TraceID == "" || d.TraceID == q.TraceID) && (q.Tenant == "" || d.Tenant == q.Tenant) &&
			(!q.ErrorsOnly || !d.Allow) && q.Filter.Match(decisionField(d))
	}
	sub := s.hub.decisions.Watch(r.Context(), match, q.Since)
	serve(s, w, r, q.SSE, "decision", sub, pass[audit.Record], nil)
}

const errorLevel = 8 // slog.LevelError

func pass[T any](v T, emit func(any)) { emit(v) }

// serve writes the records of sub until the client goes, the feed closes
// or the server shuts down. process turns a record into zero or more
// records to write; tick, when set, runs every reportEvery.
func serve[T any](s *Streams, w http.ResponseWriter, r *http.Request, sse bool, event string,
	sub *telemetry.Subscription[T], process func(T, func(any)), tick func(time.Time)) {
	enc := &encoder{w: w, rc: http.NewResponseController(w), sse: sse, event: event}
	h := w.Header()
	if sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The header tells the client its subscription is in place.
	if enc.flush() != nil {
		return
	}
	ticker := time.NewTicker(reportEvery)
	defer ticker.Stop()
	var reported uint64
	lastWrite := s.now()
	emit := func(v any) { enc.record(v) }
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case v, ok := <-sub.C:
			if !ok {
				return
			}
			process(v, emit)
		drain:
			for range maxBatch {
				select {
				case v, ok := <-sub.C:
					if !ok {
						break drain
					}
					process(v, emit)
				default:
					break drain
				}
			}
			if enc.n > 0 {
				if enc.flush() != nil {
					return
				}
				lastWrite = s.now()
			}
		case now := <-ticker.C:
			if tick != nil {
				tick(now)
			}
			if d := sub.Dropped(); d > reported {
				enc.dropped(d - reported)
				reported = d
			} else if sse && now.Sub(lastWrite) >= keepAlive {
				enc.comment("keep-alive")
			}
			if enc.n > 0 {
				if enc.flush() != nil {
					return
				}
				lastWrite = now
			}
		}
		if enc.err != nil {
			return
		}
	}
}

// encoder writes records as NDJSON lines or SSE events.
type encoder struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	sse   bool
	event string
	buf   []byte
	n     int // writes since the last flush
	err   error
}

func (e *encoder) record(v any) { e.write(e.event, v) }

// dropped tells the client that n records were dropped for it: an SSE
// event "dropped", or an NDJSON line {"type":"dropped","dropped":n}.
func (e *encoder) dropped(n uint64) {
	e.write(wire.DroppedType, wire.DroppedNotice{Type: wire.DroppedType, Dropped: n})
}

func (e *encoder) comment(c string) {
	if e.err == nil {
		_, e.err = e.w.Write([]byte(": " + c + "\n\n"))
		e.n++
	}
}

func (e *encoder) write(event string, v any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	e.buf = e.buf[:0]
	if e.sse {
		e.buf = append(e.buf, "event: "...)
		e.buf = append(e.buf, event...)
		e.buf = append(e.buf, "\ndata: "...)
		e.buf = append(e.buf, b...)
		e.buf = append(e.buf, "\n\n"...)
	} else {
		e.buf = append(append(e.buf, b...), '\n')
	}
	_, e.err = e.w.Write(e.buf)
	e.n++
}

func (e *encoder) flush() error {
	e.n = 0
	if e.err != nil {
		return e.err
	}
	e.err = e.rc.Flush()
	return e.err
}
