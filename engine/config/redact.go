package config

import (
	"net/url"
	"reflect"
	"strings"
)

// RedactedMark replaces a credential or a query value in Redacted.
const RedactedMark = "REDACTED"

// Redacted returns a copy of c fit to show: in every value that is a URL
// with a scheme and a host, the user information and every query value
// are replaced by RedactedMark (tokens and signatures travel there).
// Secrets themselves are never in a Config: they are file paths.
func (c Config) Redacted() Config {
	out := c
	redactValue(reflect.ValueOf(&out).Elem())
	return out
}

func redactValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(RedactURL(v.String()))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			cp := reflect.New(v.Elem().Type())
			cp.Elem().Set(v.Elem())
			redactValue(cp.Elem())
			v.Set(cp)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				redactValue(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(cp, v)
		for i := range cp.Len() {
			redactValue(cp.Index(i))
		}
		v.Set(cp)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		cp := reflect.MakeMapWithSize(v.Type(), v.Len())
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			redactValue(e)
			cp.SetMapIndex(k, e)
		}
		v.Set(cp)
	}
}

// RedactURL returns s with the user information and the query values of
// a URL replaced by RedactedMark; anything that is not a URL with a
// scheme and a host is returned as it is.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	changed := false
	if u.User != nil {
		u.User = url.User(RedactedMark)
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{RedactedMark}
		}
		u.RawQuery = q.Encode()
		changed = true
	}
	if !changed {
		return s
	}
	return u.String()
}
