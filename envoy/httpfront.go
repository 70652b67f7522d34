package envoy

import (
	"context"
	"net/http"
	"strings"
)

// FrontRequest is a check request to CheckPath or under EnvoyCheckPrefix
// as a front other than net/http read it off the wire (the sidecar's
// HTTP/1.1 front), given the meaning net/http gives it: the handlers of
// RegisterHTTP and ServeFront see the same request either way. The
// front fills it with Reset, AddHeader for every header line but Host,
// and Done; one FrontRequest serves one connection's requests in turn.
type FrontRequest struct {
	// Method, Path (as sent, not decoded), RawQuery, Host and RemoteAddr
	// are what http.Request has in Method, URL.EscapedPath(),
	// URL.RawQuery, Host and RemoteAddr.
	Method, Path, RawQuery, Host, RemoteAddr string

	// headers is lowerHeaders of the request.
	headers map[string]string
	// names holds the first values of the headers that name the
	// original request; fwdHost, traceparent, tracestate, userAgent and
	// pragma the first values of X-Forwarded-Host, Traceparent,
	// Tracestate, User-Agent and Pragma; baggage every Baggage value.
	names                checkNames
	fwdHost, traceparent string
	tracestate           string
	userAgent, pragma    string
	baggage              []string
	seen                 frontSeen
	lower                [64]byte
	cacheControl         bool
}

// frontSeen marks the headers whose first value FrontRequest has.
type frontSeen uint16

const (
	seenOrigURI frontSeen = 1 << iota
	seenFwdURI
	seenSvcMethod
	seenFwdMethod
	seenFwdHost
	seenTraceparent
	seenTracestate
	seenUserAgent
	seenPragma
)

// Reset empties f for the next request on its connection.
func (f *FrontRequest) Reset() {
	if f.headers == nil || len(f.headers) > maxPooledHeaders {
		f.headers = make(map[string]string, headerMapSize)
	} else {
		clear(f.headers)
	}
	lower := f.lower
	*f = FrontRequest{headers: f.headers, baggage: f.baggage[:0], lower: lower}
}

// AddHeader adds a header line of the request, its name as sent (a
// valid field name, not Host) and its value with the surrounding
// blanks trimmed, as net/http would: header names are matched without
// regard to case, a repeated header keeps its first value where the
// check reads one value and is joined with "," in the headers the
// policy sees.
func (f *FrontRequest) AddHeader(name, value string) {
	f.AddLower(LowerName(f.lowerName(name)), value)
}

// Lower is the lower-case form of a header name, interned for the
// common names: what AddLower takes.
func (f *FrontRequest) Lower(name string) LowerName { return LowerName(f.lowerName(name)) }

// LowerName is a header name in lower case, with whether it names the
// original request of a check.
type LowerName headerKey

// String is the lower-case name.
func (n LowerName) String() string { return n.lower }

// AddLower is AddHeader of a name that Lower made lower-case.
func (f *FrontRequest) AddLower(n LowerName, value string) {
	hk := headerKey(n)
	first := func(bit frontSeen, dst *string) {
		if f.seen&bit == 0 {
			f.seen |= bit
			*dst = value
		}
	}
	switch hk.lower {
	case "x-original-uri":
		first(seenOrigURI, &f.names.origURI)
	case "x-forwarded-uri":
		first(seenFwdURI, &f.names.fwdURI)
	case "x_svc_method":
		first(seenSvcMethod, &f.names.svcMethod)
	case "x-forwarded-method":
		first(seenFwdMethod, &f.names.fwdMethod)
	case "x-forwarded-host":
		first(seenFwdHost, &f.fwdHost)
	case "traceparent":
		first(seenTraceparent, &f.traceparent)
	case "tracestate":
		first(seenTracestate, &f.tracestate)
	case "user-agent":
		first(seenUserAgent, &f.userAgent)
	case "baggage":
		f.baggage = append(f.baggage, value)
	case "pragma":
		first(seenPragma, &f.pragma)
	case "cache-control":
		f.cacheControl = true
	}
	if hk.control {
		return
	}
	if old, ok := f.headers[hk.lower]; ok {
		f.headers[hk.lower] = old + "," + value
		return
	}
	f.headers[hk.lower] = value
}

// Done completes the headers once every line is added: net/http reads
// "Pragma: no-cache" without a Cache-Control header as
// "Cache-Control: no-cache" as well (RFC 9111, section 5.4).
func (f *FrontRequest) Done() {
	if f.seen&seenPragma != 0 && f.pragma == "no-cache" && !f.cacheControl {
		f.headers["cache-control"] = "no-cache"
	}
}

// lowerName is the headerKey of a header name in any case: lowerKeys'
// entry, found without allocating, for the common names.
func (f *FrontRequest) lowerName(name string) headerKey {
	if len(name) > len(f.lower) {
		lk := strings.ToLower(name)
		return headerKey{lower: lk, control: checkControlHeaders[lk]}
	}
	b := f.lower[:len(name)]
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	if hk, ok := lowerNames[string(b)]; ok {
		return hk
	}
	lk := string(b)
	return headerKey{lower: lk, control: checkControlHeaders[lk]}
}

// lowerNames is lowerKeys by the lower-case name.
var lowerNames = func() map[string]headerKey {
	m := make(map[string]headerKey, len(lowerKeys))
	for _, hk := range lowerKeys {
		m[hk.lower] = hk
	}
	return m
}()

// lowerXFCC is headerXFCC in lower case.
const lowerXFCC = "x-forwarded-client-cert"

// Traceparent is the first value of the request's Traceparent header.
func (f *FrontRequest) Traceparent() string { return f.traceparent }

// Baggage is every value of the request's Baggage header, in order:
// what http.Header.Values gives a propagator, which reads each apart.
// Read only; valid until the next Reset.
func (f *FrontRequest) Baggage() []string { return f.baggage }

// Header is the value of a header by its lower-case name, the values of
// a repeated header joined with ","; empty for the headers that name
// the original request.
func (f *FrontRequest) Header(lower string) string { return f.headers[lower] }

// Headers are the request's headers as the policy sees them: lower-case
// names, the values of a repeated header joined with ",", without Host
// and the headers that name the original request. Read only; valid
// until the next Reset.
func (f *FrontRequest) Headers() map[string]string { return f.headers }

// First is the first value of one of the headers the check or its span
// reads one value of, as http.Header.Get does, by its lower-case name:
// X-Original-URI, X-Forwarded-Uri, X_Svc_Method, X-Forwarded-Method,
// X-Forwarded-Host, Traceparent, Tracestate, User-Agent; false when the
// request has none.
func (f *FrontRequest) First(lower string) (string, bool) {
	var bit frontSeen
	var v string
	switch lower {
	case "x-original-uri":
		bit, v = seenOrigURI, f.names.origURI
	case "x-forwarded-uri":
		bit, v = seenFwdURI, f.names.fwdURI
	case "x_svc_method":
		bit, v = seenSvcMethod, f.names.svcMethod
	case "x-forwarded-method":
		bit, v = seenFwdMethod, f.names.fwdMethod
	case "x-forwarded-host":
		bit, v = seenFwdHost, f.fwdHost
	case "traceparent":
		bit, v = seenTraceparent, f.traceparent
	case "tracestate":
		bit, v = seenTracestate, f.tracestate
	case "user-agent":
		bit, v = seenUserAgent, f.userAgent
	}
	return v, f.seen&bit != 0
}

// Pattern is the http.ServeMux pattern RegisterHTTP mounts the handler
// of f on: "GET /check", "/check" or "/check/envoy/".
func (f *FrontRequest) Pattern() string {
	if f.Path != CheckPath {
		return EnvoyCheckPrefix + "/"
	}
	if f.Method == http.MethodGet {
		return http.MethodGet + " " + CheckPath
	}
	return CheckPath
}

// IsFrontPath reports a path whose requests ServeFront answers: CheckPath
// and the paths under EnvoyCheckPrefix.
func IsFrontPath(path string) bool {
	return path == CheckPath || strings.HasPrefix(path, EnvoyCheckPrefix+"/")
}

// ServeFront answers f, a request to one of IsFrontPath's paths, on w,
// as the handler RegisterHTTP mounts for its path answers it.
func (s *Server) ServeFront(ctx context.Context, w http.ResponseWriter, f *FrontRequest) {
	if f.Path != CheckPath {
		target := strings.TrimPrefix(f.Path, EnvoyCheckPrefix)
		if f.RawQuery != "" {
			target += "?" + f.RawQuery
		}
		pr := proxyRequest{
			method:   f.Method,
			target:   target,
			host:     firstNonEmpty(f.fwdHost, f.Host),
			headers:  f.headers,
			sourceIP: peerHost(f.RemoteAddr),
			viaProxy: true,
			renews:   true,
		}
		pr.clientCert = s.trustedClientCert(f.headers[lowerXFCC], f.RemoteAddr)
		s.check(ctx, w, pr, conventionEnvoy)
		return
	}
	pr, conv, err := originalRequest(f.names, s.checkProxy)
	if err != nil {
		v := s.refuse(ctx, SourceHTTPCheck, pr, err)
		s.writeHTTP(w, s.present(v, proxyRequest{headers: f.headers}, ""), conv, nil, nil)
		return
	}
	pr.host = firstNonEmpty(f.fwdHost, f.Host)
	pr.headers = f.headers
	pr.sourceIP = peerHost(f.RemoteAddr)
	pr.clientCert = s.trustedClientCert(f.headers[lowerXFCC], f.RemoteAddr)
	pr.renews = conv == conventionNginx
	s.check(ctx, w, pr, conv)
}
