package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestExampleFile loads svc.example.toml and checks that it mentions every
// key of the configuration, set or commented out.
func TestExampleFile(t *testing.T) {
	const path = "../../svc.example.toml"
	cfg, err := Load(path, noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.DevMode() {
		t.Error("the example runs in development mode; it should show a production setup")
	}
	text := string(readFile(t, path))
	// The text under each table header, set or commented out ("# [x.y]"),
	// by the table's name with map keys as "<id>".
	sections := map[string]string{}
	header := regexp.MustCompile(`^#?\s*\[\[?([^\]]+)\]\]?\s*$`)
	current := ""
	for _, l := range strings.Split(text, "\n") {
		if m := header.FindStringSubmatch(l); m != nil {
			current = m[1]
			continue
		}
		sections[current] += l + "\n"
	}
	for name, body := range sections {
		// [tenants.acme] documents the keys of tenants.<id>.
		for _, k := range allKeys(configType, nil) {
			if k.table && tableMatches(k.path, name) {
				sections[tableName(k.path)] += body
			}
		}
	}
	for _, k := range allKeys(configType, nil) {
		var re string
		switch {
		case k.table:
			segs := make([]string, len(k.path))
			for i, s := range k.path {
				segs[i] = regexp.QuoteMeta(s)
				if s == "<id>" {
					segs[i] = `[^.\]]+`
				}
			}
			re = `(?m)^#?\s*\[\[?` + strings.Join(segs, `\.`) + `[.\]]`
		case k.path[len(k.path)-1] == "<id>":
			continue
		default:
			// In its own table's section: a key documented under another
			// table would be refused there.
			re = `(?m)^(#\s*)*` + regexp.QuoteMeta(k.path[len(k.path)-1]) + `\s*=`
			if !regexp.MustCompile(re).MatchString(sections[tableName(k.path[:len(k.path)-1])]) {
				t.Errorf("svc.example.toml does not document %s in its table", strings.Join(k.path, "."))
			}
			continue
		}
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("svc.example.toml does not document %s", strings.Join(k.path, "."))
		}
	}
}

// tableName is the dotted name of a table's path.
func tableName(path []string) string { return strings.Join(path, ".") }

// tableMatches reports a header name ("tenants.acme") that names the
// table of path ("tenants", "<id>"), not being that path's own name.
func tableMatches(path []string, name string) bool {
	segs := strings.Split(name, ".")
	if len(segs) != len(path) || tableName(path) == name {
		return false
	}
	for i, s := range path {
		if s != "<id>" && s != segs[i] {
			return false
		}
	}
	return true
}

type keyInfo struct {
	path  []string
	table bool
}

// allKeys lists the tables and leaf keys of t by their TOML names; map
// keys are written "<id>".
func allKeys(t reflect.Type, path []string) []keyInfo {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
		t = t.Elem()
	}
	switch {
	case t == durationType:
	case t.Kind() == reflect.Struct:
		var out []keyInfo
		if len(path) > 0 {
			out = append(out, keyInfo{path: path, table: true})
		}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if name != "-" && name != "" {
				out = append(out, allKeys(t.Field(i).Type, with(path, name))...)
			}
		}
		return out
	case t.Kind() == reflect.Map:
		return append([]keyInfo{{path: path, table: true}}, allKeys(t.Elem(), with(path, "<id>"))...)
	}
	return []keyInfo{{path: path}}
}

// TestExampleYAMLTwin: svc.example.yaml is the YAML twin of
// svc.example.toml (docs/cli.md diffs the two): every setting the TOML
// file makes, the YAML file makes too, with the same effect.
func TestExampleYAMLTwin(t *testing.T) {
	toml, yaml := parseFile(t, "../../svc.example.toml"), parseFile(t, "../../svc.example.yaml")
	if d := Diff(toml, yaml); len(d) != 0 {
		t.Errorf("svc.example.toml and svc.example.yaml differ after defaults; bring the YAML file along: %+v", d)
	}
}

// TestExampleYAMLTwinKeys: the two example files set the same keys. Equal
// values after defaults (TestExampleYAMLTwin) miss a key that one file
// sets to its default and the other leaves out.
func TestExampleYAMLTwinKeys(t *testing.T) {
	keys := func(path, format string) map[string]bool {
		tree, err := genericTree(readFile(t, path), format)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out := map[string]bool{}
		leafKeys(tree, "", out)
		return out
	}
	toml, yaml := keys("../../svc.example.toml", FormatTOML), keys("../../svc.example.yaml", FormatYAML)
	if len(toml) < 10 {
		t.Fatalf("svc.example.toml sets only %d keys: %v", len(toml), toml)
	}
	for k := range toml {
		if !yaml[k] {
			t.Errorf("svc.example.toml sets %s, svc.example.yaml does not", k)
		}
	}
	for k := range yaml {
		if !toml[k] {
			t.Errorf("svc.example.yaml sets %s, svc.example.toml does not", k)
		}
	}
}

// leafKeys adds the dotted path of every key of v that holds a value to
// out; a list of tables counts as one key per item index.
func leafKeys(v any, prefix string, out map[string]bool) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			leafKeys(c, join(k), out)
		}
	case map[any]any:
		for k, c := range v {
			leafKeys(c, join(fmt.Sprint(k)), out)
		}
	case []any:
		tables := false
		for i, c := range v {
			switch c.(type) {
			case map[string]any, map[any]any:
				tables = true
				leafKeys(c, join(fmt.Sprintf("[%d]", i)), out)
			}
		}
		if !tables {
			out[prefix] = true
		}
	default:
		out[prefix] = true
	}
}

// TestExampleYAMLDocumentsEveryKey: svc.example.yaml mentions every key
// of the configuration, set or commented out, as TestExampleFile asks of
// svc.example.toml: the twin tests compare what the files set and miss
// a table documented in comments in one file only.
func TestExampleYAMLDocumentsEveryKey(t *testing.T) {
	const path = "../../svc.example.yaml"
	lines := strings.Split(string(readFile(t, path)), "\n")
	// documented reports a line "[# ]name:" for each segment of the
	// path in turn, each indented deeper than its parent's, the map
	// keys ("<id>") being any name.
	documented := func(keyPath []string) bool {
		var find func(from, minIndent int, segs []string) bool
		find = func(from, minIndent int, segs []string) bool {
			if len(segs) == 0 {
				return true
			}
			for i := from; i < len(lines); i++ {
				body := strings.TrimLeft(strings.TrimPrefix(strings.TrimLeft(lines[i], " "), "#"), " ")
				indent := len(lines[i]) - len(body)
				name, value, ok := strings.Cut(strings.TrimPrefix(body, "- "), ":")
				if !ok || name == "" || strings.ContainsAny(name, " \t(") {
					continue // prose
				}
				if indent < minIndent {
					return false // the parent's block ended
				}
				if name == segs[0] || segs[0] == "<id>" {
					if v := strings.TrimSpace(value); strings.HasPrefix(v, "{") {
						return true // a flow map names its keys inline
					}
					if find(i+1, indent+1, segs[1:]) {
						return true
					}
				}
			}
			return false
		}
		return find(0, 0, keyPath)
	}
	for _, k := range allKeys(configType, nil) {
		if !documented(k.path) {
			t.Errorf("svc.example.yaml does not document %s", strings.Join(k.path, "."))
		}
	}
}
