package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/svc-dev/svc/internal/secretfile"

	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/wire"
)

// exitUnreachable is the exit code of a command that could not reach the
// sidecar at all (connection refused, no such host, timeout).
const exitUnreachable = 3

// exitInsecureToken is the exit code of a command refused before it sent
// anything: the admin token would have crossed the network in the clear
// (plain http to a host that is not loopback).
const exitInsecureToken = 4

// envSidecarURL is the environment variable that sets --sidecar's default.
const envSidecarURL = "SVC_SIDECAR_URL"

// envAdminTokenFile names a file whose content is sent as the bearer
// admin token, for sidecars whose admin endpoints are not on loopback.
const envAdminTokenFile = "SVC_ADMIN_TOKEN_FILE"

// defaultSidecarURL is --sidecar's default: SVC_SIDECAR_URL, else the
// sidecar's default HTTP listen address.
func defaultSidecarURL() string {
	if v := os.Getenv(envSidecarURL); v != "" {
		return v
	}
	return "http://localhost:7700"
}

// sidecarClient is the one client every command that talks to the
// sidecar uses: the base URL from --sidecar, the admin token from
// SVC_ADMIN_TOKEN_FILE, and one mapping of failures to exit codes.
type sidecarClient struct {
	base  *url.URL
	flag  string // the flag that gave base, named in the unreachable hint
	http  *http.Client
	token string
}

// APIError is a non-2xx answer of the sidecar, with the stable code of
// its {"error":{"code","message"}} body when it has one.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("sidecar answered %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("sidecar answered %d: %s", e.Status, e.Message)
}

// sidecarClient returns the shared client for --sidecar. Requests that
// are not streams time out after timeout.
func (a *app) sidecarClient() (*sidecarClient, error) {
	return a.sidecarClientAt(a.sidecar, "--sidecar")
}

// sidecarClientAt is the shared client for a sidecar URL given by another
// flag (flag names it in errors), such as config diff's --live.
func (a *app) sidecarClientAt(base, flag string) (*sidecarClient, error) {
	u, err := parseSidecarURL(base, flag)
	if err != nil {
		return nil, err
	}
	c := &sidecarClient{base: u, flag: flag, http: &http.Client{}}
	if f := os.Getenv(envAdminTokenFile); f != "" {
		tok, err := secretfile.Read(envAdminTokenFile, f)
		if err != nil {
			return nil, inputError(err)
		}
		c.token = tok
	}
	if c.token != "" && !loopback.SecureURL(u) {
		return nil, &exitError{code: exitInsecureToken, err: fmt.Errorf(
			"refusing to send the admin token (%s) over plain http to %s, which is not a loopback host: use an https URL, or http to localhost, 127.0.0.1 or ::1 (%s)",
			envAdminTokenFile, u.Host, flag)}
	}
	if c.token != "" {
		// A redirect to the same host keeps the Authorization header, so
		// https://sidecar redirecting to http://sidecar would send it in
		// the clear: the rule holds for every hop.
		c.http.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if !loopback.SecureURL(req.URL) {
				return &exitError{code: exitInsecureToken, err: fmt.Errorf(
					"refusing to follow the redirect to %s: the admin token (%s) would go over plain http to a host that is not loopback",
					req.URL.Redacted(), envAdminTokenFile)}
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}
	}
	return c, nil
}

// parseSidecarURL parses the sidecar URL that flag gave: http or https
// with a host, else a usage error naming the flag.
func parseSidecarURL(base, flag string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("invalid %s %q: want an http or https URL such as http://localhost:7700", flag, base)
	}
	return u, nil
}

// Do sends a request to path (with its query) and returns the response
// when its status is 2xx. Any other status is an *APIError (exit 1); a
// sidecar that cannot be reached is exit 3 with a message naming the URL.
func (c *sidecarClient) Do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	ref, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	u := c.base.ResolveReference(ref)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var refused *exitError
		if errors.As(err, &refused) {
			return nil, refused
		}
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	ae := &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	var env wire.ErrorBody
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		ae.Code, ae.Message = env.Error.Code, env.Error.Message
	}
	return nil, &exitError{code: exitFailed, err: ae}
}

// GetJSON decodes the JSON answer of GET path into out, within timeout.
func (c *sidecarClient) GetJSON(ctx context.Context, path string, timeout time.Duration, out any) error {
	return c.JSON(ctx, http.MethodGet, path, nil, timeout, out)
}

// JSON sends in (when not nil) as a JSON body and decodes the answer into
// out (when not nil), within timeout.
func (c *sidecarClient) JSON(ctx context.Context, method, path string, in any, timeout time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.Do(ctx, method, path, body, ct)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return c.unreachable(fmt.Errorf("no answer within %s", timeout))
		}
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("sidecar at %s: unreadable answer to %s: %w", c.base, path, err)}
	}
	return nil
}

// unreachable is the error of a sidecar that did not answer: it names the
// URL and says how to point core elsewhere: the flag that gave the URL,
// and for --sidecar its environment variable too.
func (c *sidecarClient) unreachable(err error) error {
	why := err.Error()
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.As(err, &op) && op.Timeout():
		why = "timed out"
	}
	hint := c.flag
	if hint == "--sidecar" {
		hint += " or " + envSidecarURL
	}
	return &exitError{code: exitUnreachable, err: fmt.Errorf("sidecar at %s is not reachable: %s (is svc-sidecar running? set %s)", c.base, why, hint)}
}

// maxStreamLine bounds one line of a stream.
const maxStreamLine = 4 << 20

// Stream opens the long-lived NDJSON stream at path (with its query) and
// calls fn with each line until the stream ends, ctx ends (nil: the user
// stopped it) or fn returns an error. opened, when set, is called once the
// sidecar has accepted the subscription. Failures map to exit codes as
// Do's do; a stream the sidecar cuts is exit 3.
func (c *sidecarClient) Stream(ctx context.Context, path string, opened func(), fn func(line []byte) error) error {
	resp, err := c.Do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	if opened != nil {
		opened()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxStreamLine)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("stream from sidecar at %s broke: %w", c.base, err)}
	}
	return &exitError{code: exitUnreachable, err: fmt.Errorf("sidecar at %s ended the stream (stopped or restarting)", c.base)}
}
