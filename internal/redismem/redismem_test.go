package redismem_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/internal/redismem"
	"github.com/svc-dev/svc/internal/testkit/redistest"
)

// A real redis-server, as configured by CONFIG SET: the default never
// evicts; a bound with an evicting policy does, volatile ones included
// (every key the sidecar writes has an expiry); a bound with noeviction
// does not.
func TestReadRealServer(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Start(t)})
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		maxmemory, policy string
		evicts            bool
	}{
		{"0", "noeviction", false},
		{"0", "allkeys-lru", false},
		{"100mb", "noeviction", false},
		{"100mb", "allkeys-lru", true},
		{"100mb", "volatile-lru", true},
		{"100mb", "volatile-ttl", true},
		{"100mb", "allkeys-random", true},
	} {
		if err := c.ConfigSet(ctx, "maxmemory", tc.maxmemory).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := redismem.Read(ctx, c)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.maxmemory, tc.policy, err)
		}
		if m.Policy != tc.policy || m.Evicts() != tc.evicts || (tc.maxmemory == "0") != (m.MaxMemory == 0) {
			t.Errorf("maxmemory %s, policy %s: %+v evicts %v, want evicts %v", tc.maxmemory, tc.policy, m, m.Evicts(), tc.evicts)
		}
	}
}

func TestParse(t *testing.T) {
	m, err := redismem.Parse("# Memory\r\nused_memory:1000\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\nmaxmemory_policy:volatile-lru\r\n")
	if err != nil || m.MaxMemory != 104857600 || m.Policy != "volatile-lru" || !m.Evicts() {
		t.Fatalf("Parse = %+v, %v", m, err)
	}
	for _, bad := range []string{
		"",
		"# Memory\r\nused_memory:1000\r\n",
		"maxmemory:0\r\n",
		"maxmemory_policy:noeviction\r\n",
		"maxmemory:-1\r\nmaxmemory_policy:noeviction\r\n",
		"maxmemory:lots\r\nmaxmemory_policy:noeviction\r\n",
		"maxmemory:0\r\nmaxmemory_policy:\r\n",
		"maxmemory:0\r\nmaxmemory_policy:No Eviction\x1b[31m\r\n",
	} {
		if m, err := redismem.Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", bad, m)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n")
	f.Add("maxmemory:104857600\nmaxmemory_policy:allkeys-lru\n")
	f.Add("maxmemory:x\n")
	f.Fuzz(func(t *testing.T, info string) {
		m, err := redismem.Parse(info)
		if err != nil {
			return
		}
		if m.MaxMemory < 0 || m.Policy == "" {
			t.Fatalf("Parse(%q) = %+v without an error", info, m)
		}
	})
}
