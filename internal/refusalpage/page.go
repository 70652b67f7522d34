package refusalpage

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Response headers of a page.
const (
	// ContentType is the media type of a page.
	ContentType = "text/html; charset=utf-8"
	// ContentSecurityPolicy allows the page nothing but its inline style:
	// no script, no image, no frame, no form, no outside asset.
	ContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// Page is what a browser is told of a refusal.
type Page struct {
	// Status is the HTTP status of the answer.
	Status int
	// Message says what happened, in one sentence.
	Message string
	// Reason is the stable reason code.
	Reason string
	// DecisionID identifies the decision, when there was one.
	DecisionID string
	// Why lists the policy's deny reasons, the same the JSON body carries,
	// so that a person sees why a page is refused.
	Why []string
	// SignInURL, when set, is the target of the page's sign-in link (the
	// login URL with return_to): a same-origin path.
	SignInURL string
	// SignInText is the link's text; default "Sign in again".
	SignInText string
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>` +
	`<html lang="en"><head><meta charset="utf-8">` +
	`<meta name="viewport" content="width=device-width,initial-scale=1">` +
	`<meta name="robots" content="noindex">` +
	`<title>{{.Status}} {{.StatusText}}</title>` +
	`<style>` +
	`body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;color:#1d2330}` +
	`main{max-width:34rem;margin:12vh auto;padding:2rem 2.25rem;background:#fff;border-radius:10px;box-shadow:0 1px 4px rgba(0,0,0,.12)}` +
	`.status{margin:0;color:#6b7280;font-size:.9rem;letter-spacing:.04em;text-transform:uppercase}` +
	`h1{margin:.25rem 0 1rem;font-size:1.5rem}` +
	`a.button{display:inline-block;padding:.55rem 1.1rem;border-radius:6px;background:#2457d6;color:#fff;text-decoration:none;font-weight:600}` +
	`a.button:hover{background:#1b45ad}` +
	`dl{margin:1.5rem 0 0;display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;font-size:.85rem;color:#4b5563}` +
	`dt{font-weight:600}dd{margin:0;word-break:break-all}code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}` +
	`</style></head><body><main>` +
	`<p class="status">{{.Status}} {{.StatusText}}</p>` +
	`<h1>{{.Message}}</h1>` +
	`{{if .SignInURL}}<p><a class="button" href="{{.SignInURL}}">{{.SignInText}}</a></p>{{end}}` +
	`<dl><dt>Reason</dt><dd><code>{{.Reason}}</code></dd>` +
	`{{if .Why}}<dt>Why</dt><dd>{{range $i, $w := .Why}}{{if $i}}<br>{{end}}<code>{{$w}}</code>{{end}}</dd>{{end}}` +
	`{{if .DecisionID}}<dt>Decision id</dt><dd><code>{{.DecisionID}}</code></dd>{{end}}</dl>` +
	`</main></body></html>`))

type pageData struct {
	Page
	StatusText string
}

// Render returns the page as a self-contained HTML document: inline style
// only, every value escaped by html/template. The document is one line of
// ASCII (other characters as numeric character references), so that it
// can also travel in a response header (X-Svc-Body, for nginx).
func Render(p Page) []byte {
	if p.SignInText == "" {
		p.SignInText = "Sign in again"
	}
	text := http.StatusText(p.Status)
	if text == "" {
		text = "Error"
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, pageData{Page: p, StatusText: text}); err != nil {
		// The template is fixed and its data plain strings: this does not
		// happen. A page that says only the status is still a page.
		return []byte(`<!doctype html><title>` + strconv.Itoa(p.Status) + `</title>`)
	}
	return asciiLine(b.Bytes())
}

// asciiLine rewrites every byte that is not printable ASCII as a numeric
// character reference. html/template leaves line breaks and non-ASCII
// characters of the data as they are; in the text and attribute contexts
// the template puts data in, a reference means the same character.
func asciiLine(b []byte) []byte {
	clean := true
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		c := b[i]
		if c >= 0x20 && c < 0x7f {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		if r == utf8.RuneError && n <= 1 {
			r = 0xFFFD
		}
		out = append(out, "&#"...)
		out = strconv.AppendInt(out, int64(r), 10)
		out = append(out, ';')
	}
	return out
}

// Write answers w with the page and status p.Status, never cached. The
// caller sets any other header (Location, WWW-Authenticate) first.
func Write(w http.ResponseWriter, p Page) {
	body := Render(p)
	h := w.Header()
	SetHeaders(h)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// SetHeaders sets the headers of a page answer on h: Content-Type, the
// Content-Security-Policy, nosniff and no-store.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", ContentType)
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}
