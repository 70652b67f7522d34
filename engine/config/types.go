package config

import (
	"reflect"
	"strings"
)

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[Duration]()
)

// fieldByTag returns the field of struct type t whose tag (for the given
// format: "toml" or "yaml") names key.
func fieldByTag(t reflect.Type, format, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get(format), ",")
		if f.IsExported() && name != "-" && name != "" && name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// typeAt follows a key path from type t and returns the type found there.
// Index segments ("[0]") step into lists; a plain segment applied to a
// list steps into its elements first, as TOML array tables do.
func typeAt(t reflect.Type, format string, path []string) (reflect.Type, bool) {
	for _, seg := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if strings.HasPrefix(seg, "[") {
			if t.Kind() != reflect.Slice {
				return nil, false
			}
			t = t.Elem()
			continue
		}
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, format, seg)
			if !ok {
				return nil, false
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return t, true
}

// describe names what a value of type t must look like in a config file.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return `a duration string such as "30s"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Struct {
			return "a list of tables"
		} else if e.Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return t.String()
}
