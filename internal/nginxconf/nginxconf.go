// Package nginxconf reads an nginx configuration for what the sidecar's
// HTTP check relies on nginx to do. With nginx's auth_request, the check
// takes the original method only from the header X_Svc_Method, which the
// configuration sets (proxy_set_header X_Svc_Method $request_method) and
// which no client can send, because nginx drops client header names
// holding an underscore. Two directives turn that dropping off, and a
// configuration that checks without setting the header gets every check
// refused; Lint finds all three. With client certificates, a check must
// not carry the client's own X-Forwarded-Client-Cert either: nginx passes
// client headers on to an auth_request, and the sidecar believes that
// header from a proxy listed in sidecar.trusted_proxies.
package nginxconf

import (
	"fmt"
	"strings"
)

// MethodHeader is the header that names the original method of an nginx
// auth_request check (envoy.HeaderNginxMethod).
const MethodHeader = "X_Svc_Method"

// ClientCertHeader is the header in which a proxy hands the sidecar's
// HTTP check the client certificate it verified.
const ClientCertHeader = "X-Forwarded-Client-Cert"

// Sidecar is what Lint needs to know of the sidecar behind the
// configuration.
type Sidecar struct {
	// ReadsClientCert: the sidecar judges client certificates
	// (client_certs.trust_domains) and believes ClientCertHeader from
	// this nginx (listed in sidecar.trusted_proxies).
	ReadsClientCert bool
}

// Finding is one problem of a configuration: the directive and the line
// it starts on, and what it breaks.
type Finding struct {
	Line      int
	Directive string
	Msg       string
}

func (f Finding) String() string { return fmt.Sprintf("%d: %s: %s", f.Line, f.Directive, f.Msg) }

// directive is one simple directive: its words, unquoted, and its line.
type directive struct {
	line  int
	words []string
}

// Lint reports, in file order:
//
//   - underscores_in_headers on, and ignore_invalid_headers off: nginx
//     then passes a client's X_Svc_Method on to the check, and the client
//     picks the method a request is judged as;
//   - an auth_request without a proxy_set_header of X_Svc_Method anywhere
//     in the file: every check is refused (400 method-untrusted);
//   - when the sidecar reads client certificates from this nginx, an
//     auth_request without a proxy_set_header of X-Forwarded-Client-Cert
//     anywhere in the file: a client's own header reaches the check, and
//     the client is taken for the workload it names;
//   - when the sidecar reads client certificates from this nginx,
//     ssl_verify_client optional_no_ca in a file that passes the client's
//     certificate on in X-Forwarded-Client-Cert and reads
//     $ssl_client_verify nowhere: nginx lets a certificate no trusted CA
//     signed through, and a client with a self-signed one is taken for
//     the workload it names.
//
// Files named by include are not read; lint each of them too.
func Lint(data []byte, sc Sidecar) []Finding {
	var out []Finding
	authLine, setsMethod, setsCert := 0, false, false
	// noCALine is the line of ssl_verify_client optional_no_ca; passesCert
	// says some proxy_set_header gives X-Forwarded-Client-Cert a value,
	// readsVerify that $ssl_client_verify is read anywhere.
	noCALine, passesCert, readsVerify := 0, false, false
	for _, d := range directives(string(data)) {
		for _, w := range d.words {
			if strings.Contains(w, verifyVariable) {
				readsVerify = true
			}
		}
		name := d.words[0]
		arg := func(i int) string {
			if i < len(d.words) {
				return d.words[i]
			}
			return ""
		}
		switch {
		case name == "underscores_in_headers" && strings.EqualFold(arg(1), "on"):
			out = append(out, Finding{d.line, name, "nginx passes client headers whose names hold an underscore on, so a client's " +
				MethodHeader + " reaches the check and picks the method its request is judged as; leave it off"})
		case name == "ignore_invalid_headers" && strings.EqualFold(arg(1), "off"):
			out = append(out, Finding{d.line, name, "nginx passes client headers with invalid names, those holding an underscore among them, on, so a client's " +
				MethodHeader + " reaches the check and picks the method its request is judged as; leave it on"})
		case name == "auth_request" && !strings.EqualFold(arg(1), "off") && authLine == 0:
			authLine = d.line
		case name == "proxy_set_header" && strings.EqualFold(arg(1), MethodHeader):
			setsMethod = true
		case name == "proxy_set_header" && strings.EqualFold(arg(1), ClientCertHeader):
			setsCert = true
			passesCert = passesCert || arg(2) != ""
		case name == "ssl_verify_client" && strings.EqualFold(arg(1), "optional_no_ca") && noCALine == 0:
			noCALine = d.line
		}
	}
	if authLine > 0 && !setsMethod {
		out = append(out, Finding{authLine, "auth_request", "no location sets " + MethodHeader +
			": the sidecar refuses every check (400 method-untrusted); add proxy_set_header " + MethodHeader +
			" $request_method; to the location that proxies to /check"})
	}
	if authLine > 0 && sc.ReadsClientCert && !setsCert {
		out = append(out, Finding{authLine, "auth_request", "no location sets " + ClientCertHeader +
			": nginx passes a client's own on to the check, and the sidecar, which reads client certificates from this nginx" +
			" (sidecar.trusted_proxies), takes the client for the workload it names; add proxy_set_header " + ClientCertHeader +
			` ""; (or the certificate nginx verified) to the location that proxies to /check`})
	}
	if noCALine > 0 && sc.ReadsClientCert && passesCert && !readsVerify {
		out = append(out, Finding{noCALine, "ssl_verify_client", "optional_no_ca lets a certificate that no trusted CA signed through " +
			"($ssl_client_verify FAILED:...), and this file passes the client's certificate to the check in " + ClientCertHeader +
			" without reading " + verifyVariable + ": the sidecar, which judges only the SPIFFE ID a certificate names, takes a client with a" +
			" self-signed certificate for the workload it names; use ssl_verify_client on, or pass the certificate only when " +
			verifyVariable + " is SUCCESS"})
	}
	return out
}

// verifyVariable is nginx's outcome of the client certificate's
// verification: SUCCESS, FAILED:reason or NONE.
const verifyVariable = "$ssl_client_verify"

// directives splits an nginx configuration into its simple directives
// (block openings count as directives too), without comments. Quoted
// strings keep their spaces, ';', '{' and '#'.
func directives(s string) []directive {
	var out []directive
	var words []string
	var word strings.Builder
	inWord, line, start := false, 1, 0
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endDirective := func() {
		endWord()
		if len(words) > 0 {
			out = append(out, directive{line: start, words: words})
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n':
			endWord()
			line++
		case c == ' ' || c == '\t' || c == '\r':
			endWord()
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			i--
		case c == ';' || c == '{' || c == '}':
			endDirective()
		case (c == '"' || c == '\'') && !inWord:
			if len(words) == 0 {
				start = line
			}
			inWord = true
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				if s[i] == '\n' {
					line++
				}
				word.WriteByte(s[i])
			}
		default:
			if len(words) == 0 && !inWord {
				start = line
			}
			inWord = true
			word.WriteByte(c)
		}
	}
	endDirective()
	return out
}
