package envoy

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/internal/testkit"
)

// envoyCheckRequest is a CheckRequest as Envoy fills it: peers with socket
// addresses, the request time, the HTTP request with its headers, context
// extensions.
func envoyCheckRequest() *authv3.CheckRequest {
	sock := func(addr string, port uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: sock("10.0.0.7", 51234), Principal: "spiffe://cluster.local/ns/a/sa/b"},
		Destination: &authv3.AttributeContext_Peer{Address: sock("10.0.0.9", 8080), Service: "orders", Labels: map[string]string{"app": "orders"}},
		Request: &authv3.AttributeContext_Request{
			Time: &timestamppb.Timestamp{Seconds: 1764000000, Nanos: 123456789},
			Http: &authv3.AttributeContext_HttpRequest{
				Id: "9b1d3a4e", Method: "GET", Path: "/api/orders/42?page=2", Host: "shop.example",
				Scheme: "https", Protocol: "HTTP/2", Size: -1, Query: "page=2", Fragment: "top",
				Headers: map[string]string{
					":authority": "shop.example", ":method": "GET", ":path": "/api/orders/42?page=2",
					"authorization": "Bearer a.b.c", "accept": "application/json", "user-agent": "curl/8",
					"x-request-id": "9b1d3a4e", "x-forwarded-proto": "https", "x-envoy-attempt": "1",
					"x-b3-traceid": "80f198ee56343ba864fe8b2a57d3eff7", "caf\u00e9": "cr\u00e8me",
				},
			},
		},
		ContextExtensions: map[string]string{ExtAction: "orders:read", ExtTenant: "acme"},
	}}
}

// checkRequestCases are the messages decoded both ways; fast says whether
// the hand decoder takes them itself rather than leave them to
// proto.Unmarshal.
func checkRequestCases(t testing.TB) []struct {
	name string
	msg  *authv3.CheckRequest
	fast bool
} {
	rawHeaders := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{Method: "POST", Path: "/orders", RawBody: []byte{0, 1, 0xff},
			HeaderMap: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				{Key: "authorization", RawValue: []byte("Bearer x.y.z")},
				{Key: "x-dup", Value: "1"}, {Key: "x-dup", RawValue: []byte{0xc3, 0x28}},
				{Key: "", Value: ""},
			}}},
	}}}
	withMeta := envoyCheckRequest()
	withMeta.Attributes.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"x": {}}}
	withTLS := envoyCheckRequest()
	withTLS.Attributes.TlsSession = &authv3.AttributeContext_TLSSession{Sni: "shop.example"}
	namedPort := envoyCheckRequest()
	namedPort.Attributes.Source.Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_NamedPort{NamedPort: "http"}
	pipe := envoyCheckRequest()
	pipe.Attributes.Source.Address = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/run/x"}}}
	full := envoyCheckRequest()
	s := full.Attributes.Source.Address.GetSocketAddress()
	s.Protocol, s.ResolverName, s.Ipv4Compat, s.NetworkNamespaceFilepath = corev3.SocketAddress_UDP, "r", true, "/ns"
	full.Attributes.Source.Certificate = "-----BEGIN CERTIFICATE-----"
	full.Attributes.Request.Http.Body = "{}"
	return []struct {
		name string
		msg  *authv3.CheckRequest
		fast bool
	}{
		{"envoy", envoyCheckRequest(), true},
		{"every decoded field", full, true},
		{"raw headers", rawHeaders, true},
		{"minimal", checkReq("GET", "/", nil, nil), true},
		{"empty attributes", &authv3.CheckRequest{Attributes: &authv3.AttributeContext{}}, true},
		{"empty request", &authv3.CheckRequest{}, true},
		{"empty http", &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{}}}}, true},
		{"metadata context", withMeta, false},
		{"tls session", withTLS, false},
		{"named port", namedPort, false},
		{"pipe address", pipe, false},
	}
}

// decodeBoth decodes b with UnmarshalCheckRequest and proto.Unmarshal and
// fails t when they disagree on the error or the message.
func decodeBoth(t *testing.T, b []byte) {
	t.Helper()
	var got, want authv3.CheckRequest
	gotErr := UnmarshalCheckRequest(append([]byte(nil), b...), &got)
	wantErr := proto.Unmarshal(b, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("error %v, proto.Unmarshal's %v", gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if diff := cmp.Diff(&want, &got, protocmp.Transform()); diff != "" {
		t.Fatalf("decoded message differs from proto.Unmarshal's (-want +got):\n%s", diff)
	}
}

func TestUnmarshalCheckRequestMatchesProto(t *testing.T) {
	for _, tc := range checkRequestCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			decodeBoth(t, b)
			var req authv3.CheckRequest
			if fast := decodeCheckRequest(b, &req); fast != tc.fast {
				t.Errorf("hand decoder took the request: %v, want %v", fast, tc.fast)
			}
			// Fields repeated on the wire merge (messages) or replace
			// (scalars), and map keys keep their last value.
			twice, err := proto.MarshalOptions{}.MarshalAppend(b, tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			decodeBoth(t, twice)
		})
	}
}

// TestUnmarshalCheckRequestOddWire feeds wire data no marshaler writes:
// every answer must still be proto.Unmarshal's, never a panic.
func TestUnmarshalCheckRequestOddWire(t *testing.T) {
	envoy, err := proto.Marshal(envoyCheckRequest())
	if err != nil {
		t.Fatal(err)
	}
	msg := func(num protowire.Number, inner []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), inner)
	}
	http := func(inner []byte) []byte { return msg(1, msg(4, msg(2, inner))) }
	cases := map[string][]byte{
		"truncated":               envoy[:len(envoy)-3],
		"bad tag":                 {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"field zero":              {0x00, 0x00},
		"unknown top-level field": append(append([]byte(nil), envoy...), protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7)...),
		"unknown http field":      http(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)),
		"fixed64 field":           http(protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), 1)),
		"method as varint":        http(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1)),
		"size as bytes":           http(msg(9, []byte("x"))),
		"invalid utf-8 method":    http(msg(2, []byte{0xc3, 0x28})),
		"invalid utf-8 header":    http(msg(3, append(msg(1, []byte("k")), msg(2, []byte{0xff})...))),
		"header without key":      http(msg(3, msg(2, []byte("v")))),
		"header entry extra":      http(msg(3, append(msg(1, []byte("k")), msg(3, []byte("x"))...))),
		"group":                   http(protowire.AppendTag(nil, 2, protowire.StartGroupType)),
		"header map bad value":    http(msg(13, msg(1, msg(2, []byte{0xff})))),
		"header map truncated":    http(msg(13, append(msg(1, msg(1, []byte("a"))), 0x0a, 0x05))),
		"negative size":           http(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), ^uint64(0))),
		"empty":                   {},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) { decodeBoth(t, b) })
	}
}

// FuzzUnmarshalCheckRequest checks the hand decoder against
// proto.Unmarshal on any bytes: the same error or none, the same message.
func FuzzUnmarshalCheckRequest(f *testing.F) {
	for _, tc := range checkRequestCases(f) {
		b, err := proto.Marshal(tc.msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, r := range loadCheckRequests(f) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(decodeBoth)
}

// TestUnmarshalCheckRequestAllocs guards the hand decoder's allocations on
// Envoy's request: the block of messages, the headers map, the context
// extensions map and the destination's labels (see
// BenchmarkUnmarshalCheckRequest for proto.Unmarshal's).
func TestUnmarshalCheckRequestAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	b, err := proto.Marshal(envoyCheckRequest())
	if err != nil {
		t.Fatal(err)
	}
	var req authv3.CheckRequest
	allocs := testing.AllocsPerRun(100, func() {
		if err := UnmarshalCheckRequest(b, &req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 10 {
		t.Errorf("UnmarshalCheckRequest: %v allocations, want at most 10", allocs)
	}
}

// BenchmarkUnmarshalCheckRequest decodes Envoy's request by hand and by
// proto.Unmarshal.
func BenchmarkUnmarshalCheckRequest(b *testing.B) {
	wire, err := proto.Marshal(envoyCheckRequest())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		decode func([]byte, *authv3.CheckRequest) error
	}{
		{"hand", UnmarshalCheckRequest},
		{"proto", func(b []byte, r *authv3.CheckRequest) error { return proto.Unmarshal(b, r) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req authv3.CheckRequest
				if err := bc.decode(wire, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
