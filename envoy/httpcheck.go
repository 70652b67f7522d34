package envoy

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
)

// Mount points of the HTTP check mode.
const (
	// CheckPath answers nginx auth_request and Caddy forward_auth
	// subrequests; the proxy names the original request in headers.
	CheckPath = "/check"
	// EnvoyCheckPrefix answers Envoy's ext_authz http_service, configured
	// with path_prefix "/check/envoy": the rest of the path is the original
	// path, the method is the original method.
	EnvoyCheckPrefix = "/check/envoy"
)

// HeaderNginxMethod names the original method of an nginx auth_request
// check. nginx drops every client header whose name holds an underscore
// (unless underscores_in_headers is on or ignore_invalid_headers off), so
// unlike X-Original-Method, which a client can send along when the
// configuration does not overwrite it, only nginx's own proxy_set_header
// X_Svc_Method $request_method reaches the check under this name.
// net/http canonicalizes the name to "X_svc_method"; Get finds it either
// way.
const HeaderNginxMethod = "X_Svc_Method"

// Request headers that name the original request in a check subrequest.
const (
	// nginx auth_request: set by the shipped nginx.conf, with
	// HeaderNginxMethod.
	headerOriginalURI = "X-Original-Uri"
	// Caddy forward_auth (and Traefik forwardAuth): set by the proxy.
	headerForwardedURI    = "X-Forwarded-Uri"
	headerForwardedMethod = "X-Forwarded-Method"
	headerForwardedHost   = "X-Forwarded-Host"
)

// Response headers of the nginx convention. nginx auth_request passes
// only 2xx, 401 and 403 on (any other status becomes a 500 and loses every
// header), so in that mode a 400, 429 or 503 is answered as 403 with the
// real status in X-Svc-Status and the JSON body, escaped to ASCII, in
// X-Svc-Body. The shipped deploy/nginx/nginx.conf picks both up with
// auth_request_set and its @svc_denied location answers with that status,
// body and Retry-After. When the sidecar itself is unreachable, nginx
// answers 500 and the shipped config's @svc_unavailable turns it into 503.
const (
	HeaderStatus = "X-Svc-Status"
	HeaderBody   = "X-Svc-Body"
)

// headerAuthRemove asks Envoy's http_service to remove request headers
// before the request goes upstream (the HTTP form of headers_to_remove).
const headerAuthRemove = "X-Envoy-Auth-Headers-To-Remove"

// headerValue is h.Get(key) for a canonical key.
func headerValue(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// checkControlHeaders name the original request; they are not part of
// input.request.headers.
var checkControlHeaders = map[string]bool{
	"x-original-uri":     true,
	"x_svc_method":       true,
	"x-forwarded-uri":    true,
	"x-forwarded-method": true,
}

// convention is the proxy a check request came from.
type convention uint8

const (
	conventionEnvoy     convention = iota // ext_authz http_service
	conventionNginx                       // auth_request
	conventionForwarded                   // Caddy forward_auth, Traefik
)

// RegisterHTTP mounts the HTTP check mode on mux: CheckPath for nginx and
// Caddy (told apart by their headers) and EnvoyCheckPrefix+"/" for Envoy's
// http_service. Every method is accepted, since Envoy checks with the
// original one. Responses carry the same decisions as Check: 200 with the
// x-svc-* identity headers, or 400/401/403/429/503 with the JSON DenyBody.
//
// http.ServeMux redirects paths that are not clean ("//", "..");
// the shipped Envoy configuration normalizes paths before checking, so
// Envoy's check paths always are.
//
// CheckPath is registered for GET as well as for every method, with the
// same handler: nginx and Caddy check with GET, and http.ServeMux looks a
// request up among the patterns of its method first, allocating when it
// finds none there before it falls back to the patterns of every method.
func (s *Server) RegisterHTTP(mux *http.ServeMux) {
	mux.HandleFunc(http.MethodGet+" "+CheckPath, s.serveCheck)
	mux.HandleFunc(CheckPath, s.serveCheck)
	mux.HandleFunc(EnvoyCheckPrefix+"/", s.serveEnvoyCheck)
}

// serveCheck answers nginx auth_request and Caddy forward_auth.
func (s *Server) serveCheck(w http.ResponseWriter, r *http.Request) {
	pr, conv, err := forwardedRequest(r, s.checkProxy)
	if err != nil {
		v := s.refuse(r.Context(), SourceHTTPCheck, pr, err)
		s.writeHTTP(w, s.present(v, proxyRequest{headers: lowerHeaders(r.Header)}, ""), conv, nil, nil)
		return
	}
	pr.clientCert = s.forwardedClientCert(r)
	// forward_auth hands no header of an allowed answer to the client.
	pr.renews = conv == conventionNginx
	s.check(r.Context(), w, pr, conv)
	releaseHeaders(pr.headers)
}

// serveEnvoyCheck answers Envoy's http_service: the original path follows
// EnvoyCheckPrefix.
func (s *Server) serveEnvoyCheck(w http.ResponseWriter, r *http.Request) {
	target := strings.TrimPrefix(r.URL.EscapedPath(), EnvoyCheckPrefix)
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	pr := proxyRequest{
		method:   r.Method,
		target:   target,
		host:     firstNonEmpty(headerValue(r.Header, canonForwardedHost), r.Host),
		headers:  pooledLowerHeaders(r.Header),
		sourceIP: peerHost(r.RemoteAddr),
		viaProxy: true,
		renews:   true,
	}
	pr.clientCert = s.forwardedClientCert(r)
	s.check(r.Context(), w, pr, conventionEnvoy)
	releaseHeaders(pr.headers)
}

// headerXFCC carries the client certificate a proxy verified, in Envoy's
// X-Forwarded-Client-Cert format.
const headerXFCC = "X-Forwarded-Client-Cert"

// forwardedClientCert is the X-Forwarded-Client-Cert header of a check
// from a peer listed in sidecar.trusted_proxies (several header lines
// joined with ","), judged by the engine when the request presents no
// other credential. From any other peer the header is ignored: whoever
// can reach the sidecar directly could write one and be anybody.
func (s *Server) forwardedClientCert(r *http.Request) clientcert.Presented {
	vs := r.Header[canonXFCC]
	if len(vs) == 0 || len(s.trusted) == 0 {
		return clientcert.Presented{}
	}
	return s.trustedClientCert(strings.Join(vs, ","), r.RemoteAddr)
}

// trustedClientCert is xfcc, the X-Forwarded-Client-Cert header's lines
// joined with ",", when remote, the peer's "host:port", is one of
// sidecar.trusted_proxies.
func (s *Server) trustedClientCert(xfcc, remote string) clientcert.Presented {
	if xfcc == "" || len(s.trusted) == 0 {
		return clientcert.Presented{}
	}
	peer, err := netip.ParseAddr(peerHost(remote))
	if err != nil {
		return clientcert.Presented{}
	}
	peer = peer.Unmap()
	for _, p := range s.trusted {
		if p.Contains(peer) {
			return clientcert.Presented{XFCC: xfcc}
		}
	}
	return clientcert.Presented{}
}

// httpCheck is what one HTTP check allocates, in one allocation: the
// mapped request and the values of the allowed answer's headers.
type httpCheck struct {
	req  mappedRequest
	vals allowedValues
}

// check answers pr. pr.headers is not read once check returns: the
// engine completes the input's request (mappedRequest.CompleteRequest)
// on the goroutine that asked, before Decide returns, copying what it
// keeps (engine.RequestCompleter).
func (s *Server) check(ctx context.Context, w http.ResponseWriter, pr proxyRequest, conv convention) {
	hc := new(httpCheck)
	v, tenant, ok := s.authorize(ctx, SourceHTTPCheck, pr, &hc.req, pr.host)
	// Whatever the engine did, the map is not read after this.
	hc.req.headers, hc.req.pending = nil, false
	v = s.present(v, pr, tenant)
	var spoofed []string
	if ok && v.allow && conv == conventionEnvoy {
		// Only Envoy's answer names them (x-envoy-auth-headers-to-remove).
		spoofed = spoofedHeaders(pr.headers, v.identity != "")
	}
	s.writeHTTP(w, v, conv, spoofed, &hc.vals)
}

// forwardedRequest reads the original request from nginx's
// X-Original-URI and X_Svc_Method or Caddy's X-Forwarded-* headers, per
// proxy (sidecar.check_proxy). The method comes only from a header the
// proxy sets, never from the check request itself (nginx's auth_request
// subrequest and Caddy's forward_auth are always GET):
//
//   - nginx: X-Original-URI, and the method in X_Svc_Method only, a name a
//     client cannot get through nginx (HeaderNginxMethod). Without it the
//     check is refused with reason.MethodUntrusted: nginx's own
//     auth_request example sets X-Original-URI alone, and then every
//     header that names a method (X-Original-Method among them) is the
//     client's. X-Original-Method is never read;
//   - forwarded (Caddy, Traefik): X-Forwarded-Uri and X-Forwarded-Method,
//     both required;
//   - envoy: none; Envoy's http_service checks on EnvoyCheckPrefix, and
//     every request to CheckPath is refused;
//   - auto: nginx's when X-Original-URI is present, else the forwarded
//     headers, with the rules of that proxy. Both proxies pass the
//     client's other headers on, so when both sets name a URI they must
//     agree, or the request is refused rather than authorized for a
//     target the proxy will not serve.
//
// Whatever the proxy, X_Svc_Method and X-Forwarded-Method, when both are
// present, must name the same method: one of them is the client's, and
// which one cannot always be told (auto behind Caddy, say, where a client
// adds X-Original-URI and X_Svc_Method). Every other refusal carries
// reason.InputInvalid.
func forwardedRequest(r *http.Request, proxy string) (proxyRequest, convention, error) {
	pr, conv, err := originalRequest(checkNames{
		origURI:   headerValue(r.Header, canonOriginalURI),
		fwdURI:    headerValue(r.Header, canonForwardedURI),
		svcMethod: headerValue(r.Header, canonNginxMethod),
		fwdMethod: headerValue(r.Header, canonForwardedMethod),
	}, proxy)
	if err != nil {
		return pr, conv, err
	}
	pr.host = firstNonEmpty(headerValue(r.Header, canonForwardedHost), r.Host)
	pr.headers = pooledLowerHeaders(r.Header)
	pr.sourceIP = peerHost(r.RemoteAddr)
	return pr, conv, nil
}

// checkNames are the first values of the headers that name the original
// request of a check to CheckPath, empty when absent.
type checkNames struct {
	origURI, fwdURI, svcMethod, fwdMethod string
}

// originalRequest is forwardedRequest's judgement of the headers that
// name the original request: the method and target of the request to
// check, with viaProxy set, or the refusal.
func originalRequest(n checkNames, proxy string) (proxyRequest, convention, error) {
	if proxy == config.CheckProxyEnvoy {
		return proxyRequest{}, conventionForwarded, reason.New(reason.InputInvalid,
			"sidecar.check_proxy is envoy: checks come to %s/, not %s", EnvoyCheckPrefix, CheckPath)
	}
	origURI, fwdURI, svcMethod, fwdMethod := n.origURI, n.fwdURI, n.svcMethod, n.fwdMethod
	// The other proxy's URI header is the client's: ignored.
	switch proxy {
	case config.CheckProxyNginx:
		fwdURI = ""
	case config.CheckProxyForwarded:
		origURI = ""
	}
	conv := conventionForwarded
	target, method := fwdURI, fwdMethod
	if origURI != "" {
		conv, target, method = conventionNginx, origURI, svcMethod
	}
	switch {
	case target == "":
		return proxyRequest{}, conv, reason.New(reason.InputInvalid, "check request names no original URI (X-Original-URI or X-Forwarded-Uri)")
	case origURI != "" && fwdURI != "" && origURI != fwdURI:
		return proxyRequest{}, conv, reason.New(reason.InputInvalid, "X-Original-URI and X-Forwarded-Uri disagree")
	case svcMethod != "" && fwdMethod != "" && !strings.EqualFold(svcMethod, fwdMethod):
		return proxyRequest{}, conv, reason.New(reason.InputInvalid, "X_Svc_Method and X-Forwarded-Method disagree")
	case method != "":
	case conv == conventionNginx:
		// The check request's own method is the proxy's GET, never the
		// original one: judging a DELETE as that GET would allow it.
		return proxyRequest{}, conv, reason.New(reason.MethodUntrusted,
			"nginx check request names no method in X_Svc_Method: the auth_request location must set it (proxy_set_header X_Svc_Method $request_method); X-Original-Method is not read, a client can send it")
	default:
		return proxyRequest{}, conv, reason.New(reason.InputInvalid,
			"check request names no original method: the proxy must set X-Forwarded-Method")
	}
	return proxyRequest{method: method, target: target, viaProxy: true}, conv, nil
}

// peerHost is the host of a "host:port" remote address.
func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// lowerHeaders flattens h into lower-case keys, values joined with ","
// as Envoy does, leaving out the headers that name the original request.
func lowerHeaders(h http.Header) map[string]string {
	return lowerHeadersInto(make(map[string]string, len(h)), h)
}

// maxPooledHeaders is the most headers a map released to headerMaps may
// hold: clearing a map costs as much as its largest size, and a request
// with many headers is rare.
const maxPooledHeaders = 32

// headerMaps holds the maps of lowerHeaders that checks are done with
// (releaseHeaders), empty.
var headerMaps = sync.Pool{New: func() any { return make(map[string]string, headerMapSize) }}

// headerMapSize is the size a check's header map is made with: a map of
// up to 8 entries is a single group, which clear empties and a request
// refills in half the time of the table a larger size makes, and the
// headers a proxy's check carries besides those naming the original
// request are usually fewer (six from Caddy). A request with more grows
// its map, which stays that size.
const headerMapSize = 8

// pooledLowerHeaders is lowerHeaders into a map from headerMaps; the
// caller gives it back with releaseHeaders once nothing reads it.
func pooledLowerHeaders(h http.Header) map[string]string {
	if len(h) > maxPooledHeaders {
		return lowerHeaders(h)
	}
	return lowerHeadersInto(headerMaps.Get().(map[string]string), h)
}

// releaseHeaders empties m and gives it to headerMaps for another check.
// Nothing may read m after: its strings stay valid (strings are
// immutable) but its entries are gone.
func releaseHeaders(m map[string]string) {
	if m == nil || len(m) > maxPooledHeaders {
		return
	}
	clear(m)
	headerMaps.Put(m)
}

// lowerHeadersInto is lowerHeaders into out, which is empty.
func lowerHeadersInto(out map[string]string, h http.Header) map[string]string {
	for k, vs := range h {
		hk := lowerKey(k)
		if hk.control {
			continue
		}
		if len(vs) == 1 {
			out[hk.lower] = vs[0]
			continue
		}
		out[hk.lower] = strings.Join(vs, ",")
	}
	return out
}

// writeHTTP writes v's answer; vals, when not nil, holds the allowed
// answer's header values (writeAllowed).
func (s *Server) writeHTTP(w http.ResponseWriter, v verdict, conv convention, spoofed []string, vals *allowedValues) {
	h := w.Header()
	if v.allow {
		writeAllowed(h, v, conv, spoofed, vals)
		w.WriteHeader(http.StatusOK)
		return
	}
	ct, body := v.answer()
	status := writeDenied(h, v, conv, ct, body)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// asciiJSON re-escapes the non-ASCII characters of a JSON document as
// \uXXXX so that it fits in a header value unchanged.
func asciiJSON(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			sb.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			writeU(&sb, r1)
			writeU(&sb, r2)
			continue
		}
		writeU(&sb, r)
	}
	return sb.String()
}

func writeU(sb *strings.Builder, r rune) {
	const hex = "0123456789abcdef"
	sb.WriteString(`\u`)
	sb.WriteByte(hex[r>>12&0xF])
	sb.WriteByte(hex[r>>8&0xF])
	sb.WriteByte(hex[r>>4&0xF])
	sb.WriteByte(hex[r&0xF])
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
