package samlgw

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/sharedkey"
)

func TestRequestIDs(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ids := &requestIDs{keys: sharedkey.Static([]byte(strings.Repeat("k", 32))), now: clock, ttl: RequestTTL}
	other := &requestIDs{keys: sharedkey.Static([]byte(strings.Repeat("o", 32))), now: clock, ttl: RequestTTL}
	ctx := context.Background()
	id, err := ids.mint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := ids.mint(ctx); id2 == id {
		t.Fatal("two mints gave the same id")
	}
	fromOther, _ := other.mint(ctx)
	flip := func(s string) string {
		b, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, requestIDPrefix))
		b[nonceLen+3] ^= 1 // the expiry
		return requestIDPrefix + base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name string
		id   string
		at   time.Time
		ok   bool
	}{
		{"fresh", id, now, true},
		{"just before expiry plus skew", id, now.Add(RequestTTL + 29*time.Second), true},
		{"expired", id, now.Add(RequestTTL + 30*time.Second), false},
		{"another key", fromOther, now, false},
		{"expiry changed", flip(id), now, false},
		{"crewjam's own id shape", "id-0123456789abcdef0123456789abcdef01234567", now, false},
		{"not base64", requestIDPrefix + "!!!", now, false},
		{"truncated", id[:len(id)-2], now, false},
		{"empty", "", now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.at
			v := &requestIDs{keys: ids.keys, now: func() time.Time { return at }, ttl: RequestTTL}
			_, ok, err := v.verify(ctx, tt.id, 30*time.Second)
			if err != nil || ok != tt.ok {
				t.Fatalf("verify = %v, %v; want %v", ok, err, tt.ok)
			}
		})
	}
}
