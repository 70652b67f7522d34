package envoy

import (
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/internal/testkit/noopauthz"
)

// BenchmarkDecodeAnswer measures what an answer costs a Go client that
// decodes it with protobuf, as make bench-compare's load generator does:
// the sidecar's allowed answer (four upstream headers, one to remove,
// the dynamic metadata Struct) against the no-op server's empty OK.
func BenchmarkDecodeAnswer(b *testing.B) {
	noop, err := noopauthz.Server{}.Check(b.Context(), &authv3.CheckRequest{})
	if err != nil {
		b.Fatal(err)
	}
	noopBytes, err := proto.Marshal(noop)
	if err != nil {
		b.Fatal(err)
	}
	allowed := NewCheckAnswer(allowedResult("user-0417", "acme", []string{"viewer"}, "0b7f4d2c9e1a4f3b8c6d5e4f3a2b1c0d"), nil)
	cases := []struct {
		name string
		wire []byte
	}{
		{"noop", noopBytes},
		{"sidecar-allowed", encodeAnswer(b, allowed)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.wire)))
			for b.Loop() {
				var resp authv3.CheckResponse
				if err := proto.Unmarshal(c.wire, &resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
