package config

import (
	"encoding"
	"fmt"
	"time"
)

var (
	_ encoding.TextUnmarshaler = (*Duration)(nil)
	_ encoding.TextMarshaler   = Duration{}
)

// UnmarshalText parses a Go duration string such as "30s", "1m30s" or
// "1h". Negative durations and bare numbers (which leave the unit to a
// guess) are rejected. Both the TOML and the YAML decoder use it.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("must be a duration such as \"30s\" or \"1m\", got %q", text)
	}
	if v < 0 {
		return fmt.Errorf("must not be negative, got %q", text)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in Go's canonical form ("1m30s"), which
// UnmarshalText reads back to the same value.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}
