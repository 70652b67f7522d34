package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Difference is one key whose value differs between two configurations.
// A or B is nil when the key is set on one side only.
type Difference struct {
	Key string  `json:"key"`
	A   *string `json:"a"`
	B   *string `json:"b"`
	// Redacted is true when the values differ only in redacted parts
	// (URL user information or query values), so A and B read alike.
	Redacted bool `json:"redacted,omitempty"`
}

// Flatten returns every key of c that holds a value, as its dotted path
// (the form errors use: "sdk.fail_mode", "sidecar.routes[0].path",
// "tenants.acme.plan") mapped to the value written as in a TOML file.
// Empty lists, empty tables and unset optional tables have no keys, so
// that a file and its twin in the other format flatten alike.
func (c Config) Flatten() map[string]string {
	out := map[string]string{}
	flattenValue(reflect.ValueOf(c), nil, out)
	return out
}

// Diff compares two configurations key by key and reports the values
// with URL credentials redacted (Redacted); a change in a credential
// alone is still a difference, marked Redacted. Apply SetDefaults to both
// first to compare effective configurations. Differences are sorted by
// key.
func Diff(a, b Config) []Difference {
	fa, fb := a.Flatten(), b.Flatten()
	ra, rb := a.Redacted().Flatten(), b.Redacted().Flatten()
	keys := slices.Sorted(maps.Keys(fa))
	for k := range fb {
		if _, ok := fa[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diffs []Difference
	for _, k := range keys {
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka && okb && va == vb {
			continue
		}
		d := Difference{Key: k}
		if oka {
			r := ra[k]
			d.A = &r
		}
		if okb {
			r := rb[k]
			d.B = &r
		}
		d.Redacted = oka && okb && *d.A == *d.B
		diffs = append(diffs, d)
	}
	return diffs
}

func flattenValue(v reflect.Value, path []string, out map[string]string) {
	if v.Type() == durationType {
		out[keyPath(path...)] = strconv.Quote(v.Interface().(Duration).String())
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			flattenValue(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if t.Field(i).IsExported() && name != "-" && name != "" {
				flattenValue(v.Field(i), with(path, name), out)
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			flattenValue(v.MapIndex(k), with(path, k.String()), out)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return
		}
		if e := v.Type().Elem(); e.Kind() == reflect.Struct {
			for i := range v.Len() {
				flattenValue(v.Index(i), with(path, index(i)), out)
			}
			return
		}
		items := make([]string, v.Len())
		for i := range v.Len() {
			items[i] = scalar(v.Index(i))
		}
		out[keyPath(path...)] = "[" + strings.Join(items, ", ") + "]"
	default:
		out[keyPath(path...)] = scalar(v)
	}
}

func scalar(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	}
	return fmt.Sprint(v.Interface())
}
