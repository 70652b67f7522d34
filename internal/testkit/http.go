package testkit

import (
	"io"
	"net/http"
	"testing"
)

// Do sends req with client (http.DefaultClient when nil) and returns the
// answer with its body read and closed; a failure to send or to read
// fails t.
func Do(t testing.TB, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return resp, body
}

// Get is Do of a GET of url.
func Get(t testing.TB, client *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, client, req)
}
