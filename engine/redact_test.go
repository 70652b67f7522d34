package engine_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
)

func TestRedactedInputKeepsOnlySubjectTenantAndRoles(t *testing.T) {
	in := engine.Input{
		Action: "orders:read",
		User: policy.User{ID: "u-1", Role: "viewer", Roles: []string{"viewer", "billing"}, TenantID: "acme",
			Email: "alice@example.com", Claims: map[string]any{"department": "sales", "ssn": "123-45-6789"}},
		Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: "acme"},
		Request: &policy.Request{Method: "GET", Path: "/orders/o-1", Query: map[string]string{"token": "abc"},
			Headers: map[string]string{"user-agent": "curl", "x-api-key": "k-secret"}},
	}
	in.Identity = &policy.Identity{Kind: "session", ID: "u-1", TenantID: "acme", Roles: in.User.Roles,
		Issuer: "https://sso.acme.example", Method: "saml", Claims: in.User.Claims}
	got := string(engine.RedactedInput(in))
	for _, secret := range []string{"alice@example.com", "sales", "123-45-6789", "k-secret", "abc"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted input shows %q: %s", secret, got)
		}
	}
	var back engine.Input
	if err := json.Unmarshal([]byte(got), &back); err != nil {
		t.Fatal(err)
	}
	u := back.User
	if u.ID != "u-1" || u.TenantID != "acme" || len(u.Roles) != 2 || u.Role != "viewer" || u.Email != engine.Redacted ||
		u.Claims["ssn"] != engine.Redacted || back.Request.Headers["user-agent"] != "curl" || back.Action != "orders:read" {
		t.Errorf("redacted input = %+v", back)
	}
	if id := back.Identity; id == nil || id.Kind != "session" || id.Method != "saml" || id.ID != "u-1" || id.Claims["ssn"] != engine.Redacted {
		t.Errorf("redacted identity = %+v", id)
	}
	if in.User.Email != "alice@example.com" || in.Request.Headers["x-api-key"] != "k-secret" || in.User.Claims["ssn"] != "123-45-6789" ||
		in.Identity.Claims["ssn"] != "123-45-6789" {
		t.Error("RedactedInput changed the input it was given")
	}
}

// queryName is what a query parameter's name shown in a redacted input
// is made of.
var queryName = regexp.MustCompile(`^[A-Za-z0-9_.-][][A-Za-z0-9_.-]{0,63}$`)

// redactedPathByCopy is what RedactedInput writes of the path p, the
// slow way: its query's values and hidden names replaced.
func redactedPathByCopy(p string) string {
	path, query, ok := strings.Cut(p, "?")
	if !ok {
		return p
	}
	parts := strings.Split(query, "&")
	for i, part := range parts {
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && value != "" && queryName.MatchString(n) {
			parts[i] = n + "=" + engine.Redacted
		} else {
			parts[i] = engine.Redacted
		}
	}
	return path + "?" + strings.Join(parts, "&")
}

// redactedByCopy is what RedactedInput writes, the slow way: a redacted
// copy of in marshaled by encoding/json.
func redactedByCopy(in engine.Input) []byte {
	redact := func(m map[string]any) map[string]any {
		if len(m) == 0 {
			return m
		}
		c := make(map[string]any, len(m))
		for k := range m {
			c[k] = engine.Redacted
		}
		return c
	}
	if in.User.Email != "" {
		in.User.Email = engine.Redacted
	}
	in.User.Claims = redact(in.User.Claims)
	if id := in.Identity; id != nil {
		ic := *id
		ic.Claims = redact(id.Claims)
		in.Identity = &ic
	}
	if r := in.Request; r != nil {
		rc := *r
		rc.Path = redactedPathByCopy(r.Path)
		if len(r.Headers) > 0 {
			rc.Headers = maps.Clone(r.Headers)
			for k := range rc.Headers {
				switch strings.ToLower(k) {
				case "accept", "content-type", "user-agent", "x-request-id", "traceparent", ":method", ":path", ":authority":
				default:
					rc.Headers[k] = engine.Redacted
				}
			}
		}
		if len(r.Query) > 0 {
			rc.Query = make(map[string]string, len(r.Query))
			for k, v := range r.Query {
				if v == "" || !queryName.MatchString(k) {
					k = engine.Redacted
				}
				rc.Query[k] = engine.Redacted
			}
		}
		in.Request = &rc
	}
	b, _ := json.Marshal(in)
	return b
}

// redactInputCases are inputs of every shape: empty, nil and full maps,
// strings that need escaping, a header spelled in capitals.
func redactInputCases() []engine.Input {
	full := engine.Input{
		Action: "orders:read",
		User: policy.User{ID: "u-1", Role: "viewer", Roles: []string{"viewer", "<b>&"}, TenantID: "acme",
			Email: "alice@example.com", Claims: map[string]any{"department": "sales", "n": 3.0, "z": nil, "a": []any{1}}},
		Resource: policy.Resource{Type: "orders", ID: "o-\"1\"\n", Tenant: "acme", Attributes: map[string]any{
			"owner": "u-1", "status": "<archived>&", "size": json.Number("12.50"), "n": 3.0, "none": nil,
			"tags": []any{"a", true}, "meta": map[string]any{"z": "\u2028\xff", "a": map[string]any{}}}},
		Tenant: policy.Tenant{ID: "acme", Plan: "free"},
		Request: &policy.Request{Method: "GET", Path: "/orders/o-1\u2028", Host: "h", Query: map[string]string{"b": "1", "a": "2"},
			Headers:  map[string]string{"User-Agent": "curl", "x-api-key": "k", ":path": "/o?\xff", "accept": "*/*"},
			SourceIP: "10.0.0.1", CanonicalPath: "/orders/o-1", Format: "json"},
		Identity: &policy.Identity{Kind: "jwt", ID: "u-1", TenantID: "acme", Roles: []string{"viewer"},
			Issuer: "https://idp", Method: "RS256", Claims: map[string]any{"k": "v"}},
	}
	bare := engine.Input{Request: &policy.Request{Query: map[string]string{}, Headers: map[string]string{}},
		Identity: &policy.Identity{Roles: []string{}, Claims: map[string]any{}}}
	bare.User.Claims = map[string]any{}
	bare.User.Roles = []string{}
	bare.Resource.Attributes = map[string]any{}
	// Maps past what is sorted on the stack.
	many := full
	req := *full.Request
	req.Headers, req.Query = map[string]string{}, map[string]string{}
	many.User.Claims = map[string]any{}
	for i := range 40 {
		req.Headers[fmt.Sprintf("X-H-%02d", i)] = "v"
		req.Query[fmt.Sprintf("q%02d", 40-i)] = "v"
		many.User.Claims[fmt.Sprintf("c%02d", i)] = i
	}
	req.Headers["Accept"], req.Headers["user-agent"] = "*/*", "curl"
	many.Request = &req
	// Query names that are data, on the stack and past it.
	names := full
	nreq := *full.Request
	nreq.Query = secretQueryNames()
	nreq.Path = "/orders/1?access_token=SECRET&page=2&SECRETQUERY&%zz=x&&a%3DSECRET=1&ids[]=&x=\u2028#f"
	names.Request = &nreq
	manyNames := full
	mreq := *full.Request
	mreq.Query = secretQueryNames()
	for i := range 30 {
		mreq.Query[fmt.Sprintf("tok%02d", i)] = ""
		mreq.Query[fmt.Sprintf("q%02d", i)] = "v"
	}
	manyNames.Request = &mreq
	return []engine.Input{{}, full, bare, many, names, manyNames}
}

// secretQueryNames is a query whose names hold data ("SECRET"), with
// names a redacted input shows.
func secretQueryNames() map[string]string {
	return map[string]string{
		"SECRETQUERY3cccc":                 "",
		"access_token=SECRET":              "x",
		"[SECRET]":                         "x",
		"a SECRET":                         "x",
		"SECRET" + strings.Repeat("x", 60): "x",
		"[REDACTED]":                       "x",
		"filter[status]":                   "open",
		"ids[]":                            "1,2",
		"page":                             "2",
		"Z.z-9_":                           "y",
	}
}

// A path sent with its query (Authorize's) is shown with the query's
// values redacted and its names as the query map shows them.
func TestRedactedPath(t *testing.T) {
	for _, c := range []struct{ name, path, want string }{
		{"no query", "/orders/1", "/orders/1"},
		{"values", "/orders/1?access_token=SECRET&page=2", "/orders/1?access_token=[REDACTED]&page=[REDACTED]"},
		{"name without value", "/orders/1?SECRET&page=2", "/orders/1?[REDACTED]&page=[REDACTED]"},
		{"empty value", "/orders/1?SECRET=", "/orders/1?[REDACTED]"},
		{"encoded '='", "/orders/1?access_token%3DSECRET", "/orders/1?[REDACTED]"},
		{"encoded name", "/orders/1?%70age=2", "/orders/1?page=[REDACTED]"},
		{"bad escape", "/orders/1?%zzSECRET=1", "/orders/1?[REDACTED]"},
		{"empty query and parts", "/orders/1?&&", "/orders/1?&&"},
		{"fragment", "/orders/1?a=1#SECRET", "/orders/1?a=[REDACTED]"},
		{"second '?'", "/orders/1?a=1?SECRET", "/orders/1?a=[REDACTED]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := engine.RedactedPath(c.path); got != c.want {
				t.Errorf("RedactedPath(%q) = %q, want %q", c.path, got, c.want)
			}
		})
	}
	in := engine.Input{Request: &policy.Request{Method: "GET", Path: "/orders/1?access_token=SECRET"}}
	if got := engine.RedactedInput(in); strings.Contains(string(got), "SECRET") {
		t.Errorf("redacted input shows the path's query: %s", got)
	}
	if in.Request.Path != "/orders/1?access_token=SECRET" {
		t.Errorf("RedactedInput changed the policy input's path: %q", in.Request.Path)
	}
}

// A query parameter's name is shown only when it is made like one and
// its parameter has a value; the other names are one member Redacted.
func TestRedactedInputHidesQueryNamesThatAreData(t *testing.T) {
	in := engine.Input{Request: &policy.Request{Method: "GET", Path: "/orders/1", Query: secretQueryNames()}}
	got := engine.RedactedInput(in)
	if strings.Contains(string(got), "SECRET") {
		t.Errorf("redacted input shows a query name that is data: %s", got)
	}
	var back engine.Input
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, k := range []string{"[REDACTED]", "filter[status]", "ids[]", "page", "Z.z-9_"} {
		want[k] = engine.Redacted
	}
	if !maps.Equal(back.Request.Query, want) {
		t.Errorf("query = %v, want %v", back.Request.Query, want)
	}
}

// RedactedInput writes the bytes encoding/json writes for the redacted
// copy of its input.
func TestRedactedInputMatchesEncodingJSON(t *testing.T) {
	for i, in := range redactInputCases() {
		if got, want := engine.RedactedInput(in), redactedByCopy(in); string(got) != string(want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzRedactedInput(f *testing.F) {
	f.Add("orders:read", "u-1", "sales", "x-api-key", "k", "/orders/1", `{"owner":"u-1"}`)
	f.Add("", "\xff", "<&>", "User-Agent", "\u2028", "", `{"b":[1.50,null,{"z":"<"}],"a":true}`)
	f.Fuzz(func(t *testing.T, action, user, claim, header, value, path, attrs string) {
		in := engine.Input{Action: action, User: policy.User{ID: user, Roles: []string{claim},
			Claims: map[string]any{claim: value}, Email: value},
			Resource: policy.Resource{Attributes: map[string]any{value: claim}},
			Request: &policy.Request{Path: path, Headers: map[string]string{header: value, "accept": claim},
				Query: map[string]string{value: claim}}}
		dec := json.NewDecoder(strings.NewReader(attrs))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) == nil && m != nil {
			in.Resource.Attributes = m
		}
		got := engine.RedactedInput(in)
		if want := redactedByCopy(in); string(got) != string(want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("not JSON: %s", got)
		}
	})
}

func BenchmarkRedactedInput(b *testing.B) {
	in := redactInputCases()[1]
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		buf = engine.AppendRedactedInput(buf[:0], &in)
	}
}
