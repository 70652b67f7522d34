package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	// Not viper: it lower-cases map keys, and tenant ids are case-sensitive.
	toml "github.com/pelletier/go-toml/v2"
)

// File formats accepted by Parse.
const (
	FormatTOML = "toml"
	FormatYAML = "yaml"
)

// FormatOf returns the format of a config file from its extension: .toml
// is TOML, .yaml and .yml are YAML; any other extension is an error.
func FormatOf(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".toml":
		return FormatTOML, nil
	case ".yaml", ".yml":
		return FormatYAML, nil
	default:
		return "", &Error{Source: path, Msg: fmt.Sprintf("unsupported config file extension %q: use .toml, .yaml or .yml", ext)}
	}
}

// Load builds the effective configuration: the file at path (none when
// path is ""), then the SVC_* environment variables read through lookupEnv
// (os.LookupEnv when nil), then SetDefaults, then Validate. Errors are
// *Error values (or a joined list of them, see Errors); a missing file
// also matches fs.ErrNotExist.
func Load(path string, lookupEnv func(string) (string, bool)) (Config, error) {
	cfg := Config{Source: "defaults"}
	if path != "" {
		var err error
		if cfg, err = decodeFile(path); err != nil {
			return Config{}, err
		}
	}
	if err := FromEnv(&cfg, lookupEnv); err != nil {
		return Config{}, err
	}
	if err := cfg.finish(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ReadFile reads the config file at path as Load does, without looking
// at the environment: decoded, its relative paths resolved against the
// file's directory, then SetDefaults and Validate.
func ReadFile(path string) (Config, error) {
	cfg, err := decodeFile(path)
	if err != nil {
		return Config{}, err
	}
	if err := cfg.finish(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decodeFile decodes the file at path and resolves its relative paths
// against the file's directory.
func decodeFile(path string) (Config, error) {
	format, err := FormatOf(path)
	if err != nil {
		return Config{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return Config{}, &Error{Source: path, Msg: "cannot read: " + msg, Err: err}
	}
	cfg, err := decode(data, format, path)
	if err != nil {
		return Config{}, err
	}
	resolvePaths(&cfg, filepath.Dir(path))
	return cfg, nil
}

// finish applies SetDefaults, then Validate.
func (c *Config) finish() error {
	c.SetDefaults()
	return c.Validate()
}

// Parse decodes a config file's content without looking at the
// environment, then applies SetDefaults and Validate. format is FormatTOML
// or FormatYAML ("yml" is accepted too); source names the file in errors.
// Unknown keys are errors naming the full key path and, when the decoder
// knows it, the line.
func Parse(data []byte, format, source string) (Config, error) {
	cfg, err := decode(data, format, source)
	if err != nil {
		return Config{}, err
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decode strictly decodes data into a Config whose Source is source.
func decode(data []byte, format, source string) (Config, error) {
	var (
		cfg Config
		err error
	)
	switch strings.ToLower(format) {
	case FormatTOML:
		cfg, err = decodeTOML(data, source)
	case FormatYAML, "yml":
		cfg, err = decodeYAML(data, source)
	default:
		return Config{}, &Error{Source: source, Msg: fmt.Sprintf("unsupported config format %q: use %q or %q", format, FormatTOML, FormatYAML)}
	}
	if err != nil {
		return Config{}, err
	}
	cfg.Source = source
	if cfg.Lines == nil && strings.ToLower(format) == FormatTOML {
		cfg.Lines = tomlLines(data)
	}
	return cfg, nil
}

var (
	tomlMismatch = regexp.MustCompile(`^cannot decode TOML (\w+(?: \w+)?) into `)
	tomlTable    = regexp.MustCompile(`^cannot store an? (array table|table) in `)
)

func decodeTOML(data []byte, source string) (Config, error) {
	var cfg Config
	err := safely(func() error {
		dec := toml.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		return dec.Decode(&cfg)
	})
	if err == nil {
		return cfg, nil
	}
	if sme := (*toml.StrictMissingError)(nil); errors.As(err, &sme) {
		errs := make([]*Error, 0, len(sme.Errors))
		for i := range sme.Errors {
			de := &sme.Errors[i]
			line, col := de.Position()
			errs = append(errs, &Error{Source: source, Line: line, Column: col,
				Key: keyPath(de.Key()...), Msg: unknownKey("toml", de.Key()), Err: ErrUnknownKey})
		}
		return Config{}, join(errs)
	}
	if de := (*toml.DecodeError)(nil); errors.As(err, &de) {
		line, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if t, ok := typeAt(configType, "toml", de.Key()); ok && len(de.Key()) > 0 {
			if m := tomlMismatch.FindStringSubmatch(msg); m != nil {
				msg = fmt.Sprintf("must be %s, got a TOML %s", describe(t), m[1])
			} else if m := tomlTable.FindStringSubmatch(msg); m != nil {
				msg = fmt.Sprintf("must be %s, got a TOML %s", describe(t), m[1])
			}
		}
		return Config{}, &Error{Source: source, Line: line, Column: col, Key: keyPath(de.Key()...), Msg: msg, Err: err}
	}
	// A field's own decoder (a bare number where a duration belongs) fails
	// without a position; find the key by walking the document.
	var tree map[string]any
	if toml.Unmarshal(data, &tree) == nil {
		if e := findBadDuration(tree, configType, nil); e != nil {
			e.Source = source
			return Config{}, e
		}
	}
	return Config{}, &Error{Source: source, Msg: strings.TrimPrefix(err.Error(), "toml: "), Err: err}
}

// findBadDuration walks a generic TOML document along t and returns the
// first duration that does not decode, or nil.
func findBadDuration(v any, t reflect.Type, path []string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			return &Error{Key: keyPath(path...), Msg: fmt.Sprintf("must be %s, got a TOML %s", describe(t), tomlKind(v))}
		}
		if err := new(Duration).UnmarshalText([]byte(s)); err != nil {
			return &Error{Key: keyPath(path...), Msg: err.Error()}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		m, _ := v.(map[string]any)
		for k, child := range m {
			ct, ok := typeAt(t, "toml", []string{k})
			if !ok {
				continue
			}
			if e := findBadDuration(child, ct, append(path[:len(path):len(path)], k)); e != nil {
				return e
			}
		}
	case reflect.Slice:
		items, _ := v.([]any)
		for i, item := range items {
			if e := findBadDuration(item, t.Elem(), append(path[:len(path):len(path)], index(i))); e != nil {
				return e
			}
		}
	}
	return nil
}

// tomlKind names the TOML type of a generically decoded value.
func tomlKind(v any) string {
	switch v.(type) {
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	}
	return "date or time"
}

// safely runs a third-party decoder on untrusted input and turns a panic
// inside it into an error, so that bad input is never a crash.
func safely(decode func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder failed: %v", r)
		}
	}()
	return decode()
}

// MarshalTOML writes the configuration as canonical TOML: every key, in
// the order of the struct, map keys sorted, durations in Go's canonical
// form. Parsing the output yields an equal Config (Source, Overrides and Lines,
// which are not part of the file, aside).
func (c Config) MarshalTOML() ([]byte, error) {
	// plain has Config's fields but none of its methods, so the encoder
	// cannot call back into MarshalTOML.
	type plain Config
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(plain(c.withoutOlderNames())); err != nil {
		return nil, fmt.Errorf("encode config as toml: %w", err)
	}
	return buf.Bytes(), nil
}
