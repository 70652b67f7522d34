package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Origin says where the value of key (a dotted path such as "policy.dir")
// came from, for messages about a setting: the SVC_* variable that set
// it, else the file and line ("svc.toml:7"), else the file, else
// "default". Errors caused by a setting read "policy.dir (svc.toml:7): …".
func (c Config) Origin(key string) string {
	if env, ok := c.Overrides[key]; ok {
		return env
	}
	if c.line(key) == 0 {
		// A table ("sdk.oidc") that only variables created is theirs:
		// the first of them in the reference's order names it.
		for _, ev := range envTable {
			if env, ok := c.Overrides[ev.Key]; ok && strings.HasPrefix(ev.Key, key+".") {
				return env
			}
		}
	}
	if c.Source == "" || c.Source == "defaults" {
		return "default"
	}
	if line := c.line(key); line > 0 {
		return c.Source + ":" + strconv.Itoa(line)
	}
	return c.Source
}

// line is the line of the file that sets key, or of the list that holds
// it for a list element ("routes[0].methods[1]"); 0 when unknown.
func (c Config) line(key string) int {
	for key != "" {
		if line, ok := c.Lines[key]; ok {
			return line
		}
		i := strings.LastIndexByte(key, '[')
		if i <= 0 || !strings.HasSuffix(key, "]") {
			return 0
		}
		key = key[:i]
	}
	return 0
}

// Setting names key and its origin, the prefix of an error that a setting
// caused: "policy.dir (svc.toml:7)" or "policy.dir (SVC_POLICY_DIR)".
func (c Config) Setting(key string) string {
	return key + " (" + c.Origin(key) + ")"
}

// tomlLines maps every key set in a TOML document to the line where it is
// set: top-level key/values and table headers. The document has already
// decoded, so a parse error here only ends the walk early.
func tomlLines(data []byte) map[string]int {
	lines := make(map[string]int)
	var p unstable.Parser
	p.Reset(data)
	var table []string
	arrays := make(map[string]int)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			key, line := tomlKey(&p, e.Key())
			table = key
			if e.Kind == unstable.ArrayTable {
				name := keyPath(key...)
				table = with(key, index(arrays[name]))
				arrays[name]++
			}
			lines[keyPath(table...)] = line
		case unstable.KeyValue:
			key, line := tomlKey(&p, e.Key())
			lines[keyPath(append(slices.Clone(table), key...)...)] = line
		}
	}
	return lines
}

// tomlKey returns the segments of a (dotted) key and the line of its first
// segment.
func tomlKey(p *unstable.Parser, it unstable.Iterator) ([]string, int) {
	var (
		segs []string
		line int
	)
	for it.Next() {
		n := it.Node()
		if line == 0 && n.Raw.Length > 0 {
			line = p.Shape(n.Raw).Start.Line
		}
		segs = append(segs, string(n.Data))
	}
	return segs, line
}

// unknownKey is the message of an unknown key at path: "unknown key",
// with the nearest known key when one is close enough to be a likely
// misspelling or a key put in the wrong table.
func unknownKey(format string, path []string) string {
	for _, ev := range envTable {
		if ev.EnvOnly && ev.Key == keyPath(path...) {
			return "not a file key: key material is never inline in a file; set the environment variable " +
				ev.Name + ", or " + strings.TrimSuffix(ev.Key, "_pem") + "_file to a PEM file"
		}
	}
	if s := suggestKey(format, path); s != "" {
		return "unknown key (did you mean " + s + "?)"
	}
	return "unknown key"
}

// suggestKey returns the known key nearest to the unknown key at path:
// a key of the same table within a small edit distance, else a key of the
// same name in another table. "" when none is close.
func suggestKey(format string, path []string) string {
	if len(path) == 0 {
		return ""
	}
	parent, name := path[:len(path)-1], path[len(path)-1]
	if t, ok := typeAt(configType, format, parent); ok {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			best, bestDist := "", maxSuggestDistance(name)+1
			for _, field := range fieldNames(t, format) {
				if d := editDistance(strings.ToLower(name), field); d < bestDist {
					best, bestDist = field, d
				}
			}
			if best != "" {
				return keyPath(with(parent, best)...)
			}
		}
	}
	var found []string
	walkKeys(configType, format, nil, func(p []string) {
		if p[len(p)-1] == strings.ToLower(name) {
			found = append(found, keyPath(p...))
		}
	})
	if len(found) == 1 {
		return found[0]
	}
	return ""
}

// maxSuggestDistance is how many edits a misspelling may be from the key
// it is suggested for: 1 for short names, up to 3 for long ones.
func maxSuggestDistance(name string) int {
	return min(3, max(1, len(name)/4))
}

// fieldNames lists the keys of struct type t in the given format.
func fieldNames(t reflect.Type, format string) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get(format), ",")
		if f.IsExported() && name != "-" && name != "" {
			names = append(names, name)
		}
	}
	return names
}

// walkKeys calls fn with the path of every key reachable through struct
// fields from t (maps and lists, whose keys are the user's, are not
// entered).
func walkKeys(t reflect.Type, format string, path []string, fn func([]string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == durationType {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get(format), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		p := with(path, name)
		fn(p)
		walkKeys(f.Type, format, p, fn)
	}
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
