package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"
)

// Report describes a config file for `core config validate`.
type Report struct {
	// KeyCount is the number of leaf keys set in the file: scalars and
	// lists of scalars count once each, tables and lists of tables count
	// what they hold.
	KeyCount int
	// Warnings are settings that are valid but probably not what was
	// meant, such as tenants left on the default rate limit.
	Warnings []string
}

// Inspect checks a config file's content like Parse and reports its key
// count and warnings: one for each tenant under [tenants] without a
// rate_limit.per_tenant entry, and one when rate_limit.default_rpm is
// unset (none when rate_limit.disabled is true). When the file decodes
// but fails validation, the report is still filled and the validation
// error returned with it.
func Inspect(data []byte, format, source string) (Report, error) {
	cfg, err := decode(data, format, source)
	if err != nil {
		return Report{}, err
	}
	tree, err := genericTree(data, format)
	if err != nil {
		return Report{}, &Error{Source: source, Msg: err.Error(), Err: err}
	}
	rep := Report{KeyCount: countLeaves(tree)}

	rl, _ := tree["rate_limit"].(map[string]any)
	if !cfg.RateLimit.Disabled {
		def := cfg.RateLimit.DefaultRPM
		if rl["default_rpm"] == nil {
			def = DefaultRPM
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("rate_limit.default_rpm unset: %d rpm applies", def))
		}
		for _, id := range slices.Sorted(maps.Keys(cfg.Tenants)) {
			if _, ok := cfg.RateLimit.PerTenant[id]; !ok {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s unset: default %d rpm applies",
					keyPath("rate_limit", "per_tenant", id), def))
			}
		}
	}

	cfg.SetDefaults()
	return rep, cfg.Validate()
}

// genericTree decodes an already strictly decoded file into plain maps.
func genericTree(data []byte, format string) (map[string]any, error) {
	var tree map[string]any
	var err error
	if strings.EqualFold(format, FormatTOML) {
		err = toml.Unmarshal(data, &tree)
	} else {
		err = yaml.Unmarshal(data, &tree)
	}
	return tree, err
}

// countLeaves counts the keys of v that hold a value rather than a table.
func countLeaves(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 0
		for _, c := range v {
			n += countLeaves(c)
		}
		return n
	case map[any]any: // a YAML mapping with keys that are not all strings
		n := 0
		for _, c := range v {
			n += countLeaves(c)
		}
		return n
	case []any:
		if len(v) == 0 {
			return 1
		}
		n := 0
		for _, c := range v {
			switch c.(type) {
			case map[string]any, map[any]any:
			default:
				return 1
			}
			n += countLeaves(c)
		}
		return n
	case nil:
		return 0
	}
	return 1
}
