package harness

import (
	"context"
	"fmt"
	"iter"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/svc-dev/svc/internal/testkit"
)

// ChromiumPath is where Debian's chromium package (scripts/test-packages.txt)
// installs the browser.
const ChromiumPath = "/usr/bin/chromium"

// BrowserFlags are the command-line flags the browser runs with, besides a
// fresh --user-data-dir: headless, and nothing that would reach outside
// the machine (the tests have no outside network) or differ between runs.
var BrowserFlags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
}

// Browser is a headless Chromium driven over the DevTools protocol, with a
// profile of its own (cookies, cache) that lives as long as the test.
type Browser struct {
	ctx context.Context
	out *testkit.SyncBuffer

	mu        sync.Mutex
	documents []DocumentResponse
}

// DocumentResponse is one answer the browser got for a page it navigated
// to (the main frame's document), redirects included.
type DocumentResponse struct {
	URL      string
	Status   int64
	MIMEType string
}

// StartBrowser starts Chromium for the test, skipping it (failing under CI)
// when Chromium is not installed. The browser and its profile go when the
// test ends; its output is logged when the test fails.
func StartBrowser(t testing.TB) *Browser {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		Missing(t, "chromium", "Debian package chromium: apt-get install chromium")
	}
	b := &Browser{out: &testkit.SyncBuffer{}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(b.out),
		// The test's environment less proxy settings: every request goes
		// straight to loopback.
		chromedp.Env(baseEnv()...),
		chromedp.NoInheritEnv,
	}
	for _, f := range BrowserFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if t.Failed() || os.Getenv("E2E_VERBOSE") != "" {
			t.Logf("chromium output:\n%s", clip(b.out.String(), 16<<10))
		}
	})
	// The first Run starts the browser; it must not carry a timeout, or
	// the timeout would end the browser.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium did not start: %v\n%s", err, b.out.String())
	}
	b.ctx = ctx
	go b.recordDocuments(chromedp.Events(ctx, network.ResponseReceived))
	return b
}

func (b *Browser) recordDocuments(events iter.Seq2[network.EventResponseReceived, error]) {
	for ev, err := range events {
		if err != nil {
			return
		}
		if ev.Type != network.ResourceTypeDocument || ev.Response == nil {
			continue
		}
		b.mu.Lock()
		b.documents = append(b.documents, DocumentResponse{URL: ev.Response.URL, Status: ev.Response.Status, MIMEType: ev.Response.MimeType})
		b.mu.Unlock()
	}
}

// Documents returns the document answers the browser got so far, oldest
// first. Redirects (3xx) are not among them: the browser reports the
// answer it rendered.
func (b *Browser) Documents() []DocumentResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]DocumentResponse(nil), b.documents...)
}

// Do runs actions in the browser's tab, failing the test after timeout.
func (b *Browser) Do(t testing.TB, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v (at %s)", err, b.location())
	}
}

// Navigate opens url in the tab, as typing it in the address bar does, and
// waits for the page's load.
func (b *Browser) Navigate(t testing.TB, url string) {
	t.Helper()
	b.Do(t, 30*time.Second, chromedp.Navigate(url))
}

// Click clicks the first element that the CSS selector matches, once it
// is visible.
func (b *Browser) Click(t testing.TB, css string) {
	t.Helper()
	b.Do(t, 30*time.Second, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
}

// Page is what the tab shows: its address, title and visible text.
type Page struct {
	URL, Title, Text string
}

func (p Page) String() string {
	return fmt.Sprintf("%s (title %q): %s", p.URL, p.Title, clip(p.Text, 2000))
}

// WaitPage waits until the tab shows a loaded page for which ok holds
// (auto-posted forms and redirects take the browser through several) and
// returns it; after timeout it fails the test with the last page seen.
func (b *Browser) WaitPage(t testing.TB, timeout time.Duration, ok func(Page) bool) Page {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last Page
	for {
		p, err := b.page()
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("browser: the expected page never showed; last %s (error %v)", last, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pageState is what page reads in one evaluation, so that address and
// text come from the same document.
type pageState struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	Text  string `json:"text"`
	Ready string `json:"ready"`
}

func (b *Browser) page() (Page, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](
		`({url: location.href, title: document.title, text: document.body ? document.body.innerText : "", ready: document.readyState})`))
	if err != nil {
		return Page{}, err
	}
	if s.Ready != "complete" {
		return Page{}, fmt.Errorf("%s is %s", s.URL, s.Ready)
	}
	return Page{URL: s.URL, Title: s.Title, Text: s.Text}, nil
}

func (b *Browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "unknown"
	}
	return loc
}

// HTML returns the outer HTML of the tab's document.
func (b *Browser) HTML(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return s
}

// Cookies returns the cookies the browser would send to url, as its
// cookie store holds them (flags and expiry included).
func (b *Browser) Cookies(t testing.TB, url string) []*network.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		t.Fatalf("browser cookies: %v", err)
	}
	return res.Cookies
}

// Cookie returns the named cookie the browser would send to url, or nil.
func (b *Browser) Cookie(t testing.TB, url, name string) *network.Cookie {
	t.Helper()
	for _, c := range b.Cookies(t, url) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// SetCookie stores a cookie for url in the browser, as a response from
// url setting it would.
func (b *Browser) SetCookie(t testing.TB, url string, c network.SetCookieParams) {
	t.Helper()
	c.URL = url
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, network.SetCookie, c); err != nil {
		t.Fatalf("browser set cookie: %v", err)
	}
}

// ClearCookies empties the browser's cookie store, as a fresh profile.
func (b *Browser) ClearCookies(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatalf("browser clear cookies: %v", err)
	}
}
