package config

import (
	"path/filepath"
	"reflect"
	"strings"
)

// resolvePaths makes the relative file and directory paths of a
// configuration read from a file relative to that file's directory, so
// that `svc-sidecar --config /etc/svc/svc.toml` reads the same files from
// any working directory. A path setting is a string key whose name ends
// in _file or _dir, policy.dir, api_keys.file, or audit.destination when
// it names a file.
// Values set afterwards from SVC_* variables or flags are not touched:
// they resolve against the working directory, as a shell user expects.
func resolvePaths(c *Config, dir string) {
	resolveIn(reflect.ValueOf(c).Elem(), dir)
	if d := c.Audit.Destination; d != "" && !isAuditStream(d) {
		c.Audit.Destination = resolvePath(d, dir)
	}
}

// isAuditStream reports whether an audit.destination names no file.
func isAuditStream(d string) bool {
	return d == AuditStdout || d == AuditStderr || d == AuditOff
}

func resolveIn(v reflect.Value, dir string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			resolveIn(v.Elem(), dir)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if fv.Kind() == reflect.String && isPathKey(name) {
				fv.SetString(resolvePath(fv.String(), dir))
				continue
			}
			resolveIn(fv, dir)
		}
	case reflect.Slice:
		for i := range v.Len() {
			resolveIn(v.Index(i), dir)
		}
	case reflect.Map:
		// Map values are not addressable: tables of tables hold no paths
		// today; a path setting in one would need its own handling.
	}
}

// isPathKey reports whether a key names a file or directory.
func isPathKey(name string) bool {
	return name == "dir" || name == "file" || strings.HasSuffix(name, "_file") || strings.HasSuffix(name, "_dir")
}

func resolvePath(p, dir string) string {
	if p == "" || filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// PathKeys lists the dotted keys of the path settings (see resolvePaths)
// outside lists: what a test of every file a configuration names walks.
func PathKeys() []string {
	var keys []string
	walkKeys(reflect.TypeFor[Config](), "toml", nil, func(p []string) {
		if isPathKey(p[len(p)-1]) || strings.Join(p, ".") == "audit.destination" {
			keys = append(keys, strings.Join(p, "."))
		}
	})
	return keys
}
