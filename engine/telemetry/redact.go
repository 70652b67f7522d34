package telemetry

import (
	"log/slog"
	"net/http"
	"strings"
)

// Redacted replaces the value of a sensitive attribute.
const Redacted = "[REDACTED]"

// sensitiveKeys name attributes whose values never reach a log line,
// compared case-insensitively. Besides credentials by name, they cover the
// HTTP headers that carry them and the SAML form field.
var sensitiveKeys = []string{
	"authorization", "proxy-authorization", "x-api-key", "api_key",
	"token", "access_token", "id_token", "refresh_token",
	"password", "secret", "client_secret", "private_key",
	"cookie", "set-cookie",
	"assertion", "samlresponse",
}

// Sensitive reports whether an attribute named key has its value redacted.
func Sensitive(key string) bool {
	for _, k := range sensitiveKeys {
		if len(k) == len(key) && strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// redact returns a with its value redacted when its key is sensitive, and
// with sensitive members of groups and of string-keyed maps redacted. The
// bool reports whether anything changed, so that unchanged records are
// passed on as they are.
func redact(a slog.Attr) (slog.Attr, bool) {
	if Sensitive(a.Key) {
		return slog.String(a.Key, Redacted), true
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		members := v.Group()
		var out []slog.Attr
		for i, m := range members {
			rm, changed := redact(m)
			if !changed {
				continue
			}
			if out == nil {
				out = append(make([]slog.Attr, 0, len(members)), members...)
			}
			out[i] = rm
		}
		if out != nil {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
		}
	case slog.KindAny:
		if rv, changed := redactMap(v.Any()); changed {
			return slog.Any(a.Key, rv), true
		}
	}
	if v.Kind() != a.Value.Kind() {
		// A LogValuer resolved to something else; pass the resolved value
		// on so that it is not resolved (and possibly redacted) twice.
		return slog.Attr{Key: a.Key, Value: v}, true
	}
	return a, false
}

// redactMap copies string-keyed maps that hold a sensitive key, such as
// request headers logged whole, with those values replaced.
func redactMap(x any) (any, bool) {
	switch m := x.(type) {
	case http.Header:
		return redactMapOf(m, []string{Redacted})
	case map[string][]string:
		return redactMapOf(m, []string{Redacted})
	case map[string]string:
		return redactMapOf(m, Redacted)
	case map[string]any:
		return redactMapOf[map[string]any](m, Redacted)
	}
	return x, false
}

func redactMapOf[M ~map[string]V, V any](m M, replacement V) (M, bool) {
	var out M
	for k := range m {
		if !Sensitive(k) {
			continue
		}
		if out == nil {
			out = make(M, len(m))
			for k2, v := range m {
				out[k2] = v
			}
		}
		out[k] = replacement
	}
	if out == nil {
		return m, false
	}
	return out, true
}
