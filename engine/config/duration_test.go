package config

import (
	"testing"
	"time"

	toml "github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"
)

func TestDurationUnmarshalText(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "1m30s", want: 90 * time.Second},
		{in: "1.5h", want: 90 * time.Minute},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "0", want: 0},
		{in: "0s", want: 0},
		{in: "-1s", wantErr: `must not be negative, got "-1s"`},
		{in: "30", wantErr: `must be a duration such as "30s" or "1m", got "30"`},
		{in: "", wantErr: `must be a duration such as "30s" or "1m", got ""`},
		{in: "1d", wantErr: `must be a duration such as "30s" or "1m", got "1d"`},
		{in: "9999999999h", wantErr: `must be a duration such as "30s" or "1m", got "9999999999h"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			err := d.UnmarshalText([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || d.Duration != tt.want {
				t.Fatalf("got %v, %v; want %v", d.Duration, err, tt.want)
			}
			text, _ := d.MarshalText()
			var back Duration
			if err := back.UnmarshalText(text); err != nil || back != d {
				t.Errorf("round trip through %q gave %v, %v", text, back.Duration, err)
			}
		})
	}
}

func TestDurationInFormats(t *testing.T) {
	type doc struct {
		D Duration `toml:"d" yaml:"d"`
	}
	tests := []struct {
		name    string
		decode  func([]byte, any) error
		encode  func(any) ([]byte, error)
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"toml", toml.Unmarshal, toml.Marshal, "d = \"1m5s\"\n", 65 * time.Second, false},
		{"toml negative", toml.Unmarshal, toml.Marshal, "d = \"-1m\"\n", 0, true},
		{"toml integer", toml.Unmarshal, toml.Marshal, "d = 5\n", 0, true},
		{"yaml", yaml.Unmarshal, yaml.Marshal, "d: 1m5s\n", 65 * time.Second, false},
		{"yaml quoted", yaml.Unmarshal, yaml.Marshal, "d: \"2h\"\n", 2 * time.Hour, false},
		{"yaml negative", yaml.Unmarshal, yaml.Marshal, "d: -1m\n", 0, true},
		{"yaml integer", yaml.Unmarshal, yaml.Marshal, "d: 5\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v doc
			err := tt.decode([]byte(tt.in), &v)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decode: err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if v.D.Duration != tt.want {
				t.Fatalf("decoded %v, want %v", v.D.Duration, tt.want)
			}
			out, err := tt.encode(v)
			if err != nil {
				t.Fatal(err)
			}
			var back doc
			if err := tt.decode(out, &back); err != nil || back != v {
				t.Errorf("re-decoding %q gave %v, %v", out, back.D.Duration, err)
			}
		})
	}
}
