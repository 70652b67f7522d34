package authz_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/reason"
)

// TestClientResourceAttributes sends attributes of Go types a JSON
// encoder accepts over both transports: the policy sees them as JSON
// values and allows only the owner. Attributes that are not JSON are an
// input error before anything is sent.
func TestClientResourceAttributes(t *testing.T) {
	p := servertest.NewIDP(t)
	srv := servertest.NewServer(t, servertest.NewEngine(t, p, func(c *config.Config) { c.Policy.Dir = "testdata/resource-attributes" }))
	alice := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	type meta struct {
		Region string `json:"region"`
	}
	for _, addr := range []string{servertest.ServeGRPC(t, srv), servertest.ServeHTTP(t, srv)} {
		c := newClient(t, addr, authz.FailClosed)
		for _, tc := range []struct {
			owner string
			allow bool
		}{{"alice", true}, {"bob", false}} {
			got, err := c.Authorize(t.Context(), authz.AuthorizeRequest{Token: alice, Action: "orders:update", Resource: authz.Resource{
				ID: "o-1", Attributes: map[string]any{"owner": tc.owner, "status": "open", "tags": []string{"a"}, "meta": meta{"eu"}, "n": 3},
			}})
			if err != nil || got.Allowed != tc.allow {
				t.Fatalf("%s: owner %s: %+v, %v; want allowed=%v", addr, tc.owner, got, err, tc.allow)
			}
		}
		_, err := c.Authorize(t.Context(), authz.AuthorizeRequest{Token: alice, Action: "orders:update", Resource: authz.Resource{
			Attributes: map[string]any{"owner": func() {}},
		}})
		if !errors.Is(err, &reason.Error{Code: reason.InputInvalid}) || errors.Is(err, authz.ErrUnavailable) {
			t.Fatalf("%s: attributes that are not JSON: %v, want input-invalid", addr, err)
		}
	}
}

func TestNormalizedAttributes(t *testing.T) {
	req := authz.AuthorizeRequest{Action: "orders:read", Resource: authz.Resource{Attributes: map[string]any{
		"owner": "alice", "n": 1.5, "i": 7, "tags": []string{"a"}, "none": nil,
	}}}
	n, err := req.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"owner": "alice", "n": json.Number("1.5"), "i": json.Number("7"), "tags": []any{"a"}, "none": nil}
	if diff := cmp.Diff(want, n.Resource.Attributes); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	req.Resource.Attributes = map[string]any{}
	if n, err := req.Normalized(); err != nil || n.Resource.Attributes != nil {
		t.Errorf("empty attributes: %v, %v", n.Resource.Attributes, err)
	}
	for name, attrs := range map[string]map[string]any{
		"key of 129 bytes":  {strings.Repeat("k", 129): 1},
		"invalid UTF-8 key": {"\xff": 1},
		"5 deep":            {"a": []any{[]any{[]any{[]any{1}}}}},
		"16 KiB":            {"a": strings.Repeat("x", 16<<10)},
		"NaN":               {"a": nanValue()},
	} {
		req.Resource.Attributes = attrs
		_, err := req.Normalized()
		var re *reason.Error
		if !errors.As(err, &re) || re.Code != reason.InputInvalid || !strings.Contains(re.Error(), "resource.attributes") {
			t.Errorf("%s: %v, want input-invalid naming resource.attributes", name, err)
		}
		if _, err := req.ProtoChecked(); err == nil {
			t.Errorf("%s: ProtoChecked accepted it", name)
		}
		if r := req.Proto(); r.GetResource().GetAttributes() != nil {
			t.Errorf("%s: Proto kept the attributes", name)
		}
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

// FuzzResourceAttributes decodes arbitrary JSON as attributes: every
// request is either rejected with input-invalid or normalized within the
// bounds, converts to the wire message and back to the same attributes.
func FuzzResourceAttributes(f *testing.F) {
	for _, s := range []string{`{"owner":"alice"}`, `{"a":{"b":{"c":[1,2.5e3,null,true]}}}`, `{"a":[[[[1]]]]}`,
		`{"\u0000":1}`, `{"k":"` + strings.Repeat("x", 100) + `"}`, `{"n":-0.0,"m":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var attrs map[string]any
		if json.Unmarshal(data, &attrs) != nil {
			return
		}
		req := authz.AuthorizeRequest{Action: "orders:read", Resource: authz.Resource{Attributes: attrs}}
		n, err := req.Normalized()
		if err != nil {
			var re *reason.Error
			if !errors.As(err, &re) || re.Code != reason.InputInvalid {
				t.Fatalf("error %v is not input-invalid", err)
			}
			return
		}
		a := n.Resource.Attributes
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) > authz.MaxAttributes || len(raw) > authz.MaxAttributesSize {
			t.Fatalf("out of bounds: %d attributes, %d bytes", len(a), len(raw))
		}
		if d := depth(a); d > authz.MaxAttributesDepth {
			t.Fatalf("depth %d", d)
		}
		msg, err := n.ProtoChecked()
		if err != nil {
			t.Fatalf("normalized attributes do not convert: %v", err)
		}
		back, err := authz.AuthorizeRequestFromProto(msg).Normalized()
		if err != nil {
			t.Fatalf("attributes from the wire rejected: %v", err)
		}
		if len(back.Resource.Attributes) != len(a) {
			t.Fatalf("wire round trip: %v, want %v", back.Resource.Attributes, a)
		}
	})
}

func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depth(e))
		}
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
	default:
		return 0
	}
	return d + 1
}
