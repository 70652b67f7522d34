package sidecar

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
)

// deadlineConn is a connection whose deadlines the front may set; the
// fuzz test reads from a buffer instead.
type deadlineConn struct{ net.Conn }

func (deadlineConn) SetReadDeadline(time.Time) error { return nil }

// frontRead reads the first request of raw as the front does: fast is
// false when it leaves the request to net/http.
func frontRead(raw []byte) (fc *frontConn, closeAfter, fast bool) {
	f := &front{std: &http.Server{ReadHeaderTimeout: time.Second, IdleTimeout: time.Second}}
	fc = &frontConn{f: f, c: deadlineConn{}, remote: "192.0.2.1:1234"}
	fc.br = bufio.NewReaderSize(bytes.NewReader(raw), frontBufSize)
	n, ok := fc.readHeader()
	if !ok {
		return fc, false, false
	}
	closeAfter, fast = fc.parse(n)
	return fc, closeAfter, fast
}

// FuzzFrontReadsAsNetHTTP feeds raw bytes to the front's request reader:
// it must not panic, and whatever it answers itself net/http must read
// the same way: the same method, path, query and host, the same headers
// as the check sees them (lower-case, repeated ones joined, the first
// value of those it reads one value of) and the same wish to close.
// Anything else is net/http's to read (handed over).
func FuzzFrontReadsAsNetHTTP(f *testing.F) {
	for _, seed := range []string{
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-Forwarded-Method: GET\r\nX-Forwarded-Uri: /a\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-Original-URI: /a\r\nX_Svc_Method: DELETE\r\nx_svc_method: GET\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-Forwarded-Uri: /a\r\nX-Forwarded-Uri: /b\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-Forwarded-Uri: /\xff\xfe\r\nX-Bad: \xc3\x28\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nPragma: no-cache\r\nConnection: close\r\n\r\n",
		"POST /check/envoy/orders/7?x=1&y=%20 HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n",
		"GET /check/envoy/a/../b HTTP/1.1\r\nHost: svc\r\n\r\n",
		"GET /check/envoy//a HTTP/1.1\r\nHost: svc\r\n\r\n",
		"GET /check/envoy/%2e%2e/x HTTP/1.1\r\nHost: svc\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nHost: other\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-A: b\r\n folded\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX A: b\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-A: b\x00c\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-A:   padded \t\r\n\r\n",
		"GET /check HTTP/1.0\r\nHost: svc\r\n\r\n",
		"GET http://svc/check HTTP/1.1\r\nHost: svc\r\n\r\n",
		"GET /check HTTP/1.1\r\n\r\n",
		"HEAD /check HTTP/1.1\r\nHost: svc\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
		"GET /v1/status HTTP/1.1\r\nHost: svc\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nX-Forwarded-Uri: /a\nX-Other: b\r\n\r\n",
		"GET /check HTTP/1.1\r\nHost: svc\r\nUser-Agent: a\r\nuser-agent: b\r\nTracestate: x=1\r\nBaggage: k=v\r\nBAGGAGE: k2=v2\r\n\r\n",
		"GET /check HTTP/1.1\nHost: svc\n\n",
		"GET /check HTTP/1.1\r\nHost: [::1]:80\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fc, closeAfter, fast := frontRead(raw)
		if !fast {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("front reads %q, net/http refuses it: %v", raw, err)
		}
		fr := &fc.req
		if fr.Method != req.Method || fr.Path != req.URL.EscapedPath() || fr.RawQuery != req.URL.RawQuery || fr.Host != req.Host {
			t.Fatalf("front reads %s %s ? %s on %s, net/http %s %s ? %s on %s", fr.Method, fr.Path, fr.RawQuery, fr.Host,
				req.Method, req.URL.EscapedPath(), req.URL.RawQuery, req.Host)
		}
		if cleanPath(req.URL.Path) != req.URL.Path {
			t.Fatalf("front answers %q, which ServeMux redirects", req.URL.Path)
		}
		if closeAfter != req.Close {
			t.Fatalf("front closes after %q: %v, net/http: %v", raw, closeAfter, req.Close)
		}
		if got, want := fr.Baggage(), req.Header.Values("Baggage"); !slices.Equal(got, want) {
			t.Fatalf("baggage: front %q, net/http %q", got, want)
		}
		want := map[string]string{}
		for k, vs := range req.Header {
			lk := strings.ToLower(k)
			if first, ok := fr.First(lk); ok && first != vs[0] {
				t.Fatalf("first %s: front %q, net/http %q", k, first, vs[0])
			}
			switch lk {
			case "x-original-uri", "x_svc_method", "x-forwarded-uri", "x-forwarded-method":
				continue
			}
			want[lk] = strings.Join(vs, ",")
		}
		got := fr.Headers()
		if len(got) != len(want) {
			t.Fatalf("headers: front %q, net/http %q", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("header %s: front %q, net/http %q", k, got[k], v)
			}
		}
	})
}

// cleanPath is ServeMux's: the canonical path, its trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// BenchmarkFrontRead measures the front's reading of a check as Caddy's
// forward_auth sends it, with an RS256 token's length.
func BenchmarkFrontRead(b *testing.B) {
	raw := []byte("GET /check HTTP/1.1\r\nHost: 127.0.0.1:7700\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Authorization: Bearer " + strings.Repeat("eyJhbGciOiJSUzI1NiJ9", 30) + "\r\n" +
		"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Host: shop.example\r\nX-Forwarded-Method: GET\r\n" +
		"X-Forwarded-Proto: https\r\nX-Forwarded-Uri: /orders/7\r\nAccept-Encoding: gzip\r\n\r\n")
	f := &front{std: &http.Server{ReadHeaderTimeout: time.Second, IdleTimeout: time.Second}}
	fc := &frontConn{f: f, c: deadlineConn{}, remote: "192.0.2.1:1234"}
	rd := bytes.NewReader(raw)
	fc.br = bufio.NewReaderSize(rd, frontBufSize)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(raw)
		fc.br.Reset(rd)
		n, _ := fc.readHeader()
		if _, fast := fc.parse(n); !fast {
			b.Fatal("not read")
		}
	}
}

// BenchmarkFrontWrite measures the writing of an allowed check's answer.
func BenchmarkFrontWrite(b *testing.B) {
	var w frontWriter
	bw := bufio.NewWriter(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		h := w.Header()
		for _, k := range []string{"Cache-Control", "X-Svc-User-Id", "X-Svc-Tenant-Id", "X-Svc-Roles", "X-Svc-Decision-Id", "X-Svc-Fail-Open", "X-Svc-Identity"} {
			h[k] = []string{"value"}
		}
		w.WriteHeader(http.StatusOK)
		_ = w.writeTo(bw, false)
	}
}
