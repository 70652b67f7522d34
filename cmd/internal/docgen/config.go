package docgen

import (
	"fmt"
	"go/ast"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"

	"github.com/svc-dev/svc/engine/config"
)

// ConfigKey is one key of the configuration file.
type ConfigKey struct {
	Key     string // dotted path, such as "sdk.jwks_url" or "sidecar.routes[].path"
	Env     string // the SVC_* variable that overrides it, if any
	Default string // the value SetDefaults gives it, as in a TOML file
	Meaning string // the doc comment of its field
	Note    string // "(table)" for a table, "(environment only)" for a variable without a key
}

// ConfigKeys walks config.Config by its toml tags and returns every key
// in file order, with the environment variable of config.EnvVars, the
// default of SetDefaults and the meaning from the field's doc comment in
// engine/config. Keys set only from the environment follow at the end.
func ConfigKeys(root string) ([]ConfigKey, error) {
	docs, err := fieldDocs(filepath.Join(root, "engine", "config"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	envHelp := map[string]string{}
	for _, v := range config.EnvVars() {
		env[v.Key], envHelp[v.Key] = v.Name, v.Help
	}
	flat := defaultsWith(1)
	// A default computed from the machine (half the CPUs, say) is not a
	// fact of the page: its doc comment says how it is computed.
	for k, v := range defaultsWith(64) {
		if flat[k] != v {
			flat[k] = "(from the machine)"
		}
	}

	var keys []ConfigKey
	seen := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			doc := stripName(docs[t.Name()+"."+f.Name], f.Name)
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				keys = append(keys, ConfigKey{Key: key, Note: "(table)", Meaning: doc})
				walk(ft.Elem(), key+".")
				continue
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(config.Duration{}):
				walk(ft, key+".")
				continue
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+".<id>.")
				continue
			case ft.Kind() == reflect.Map:
				key += ".<id>"
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+"[].")
				continue
			}
			seen[key] = true
			keys = append(keys, ConfigKey{Key: key, Env: env[key], Default: flat[key], Meaning: doc})
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	for _, v := range config.EnvVars() {
		if !seen[v.Key] {
			keys = append(keys, ConfigKey{Key: v.Key, Note: "(environment only)", Env: v.Name, Meaning: v.Help})
		}
	}
	for i, k := range keys {
		if k.Meaning == "" {
			return nil, fmt.Errorf("config key %s has no doc comment to say what it means", k.Key)
		}
		keys[i] = k
	}
	return keys, nil
}

// defaultsWith returns the flattened defaults, every optional table
// present, as SetDefaults computes them with GOMAXPROCS at procs.
func defaultsWith(procs int) map[string]string {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	c := config.Config{SDK: config.SDK{SAML: &config.SAML{}}}
	c.SetDefaults()
	return c.Flatten()
}

// fieldDocs maps "Type.Field" of the struct types in dir to the field's
// doc comment; a field without one shares the comment of the field
// declared before it (TLSCertFile and TLSKeyFile, say).
func fieldDocs(dir string) (map[string]string, error) {
	files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			prev := ""
			for _, fl := range st.Fields.List {
				d := docText(fl.Doc)
				if d == "" {
					d = prev
				}
				prev = d
				for _, name := range fl.Names {
					docs[ts.Name.Name+"."+name.Name] = d
				}
			}
			return false
		})
	}
	return docs, nil
}

// ConfigTable renders the keys as the table of docs/configuration.md.
func ConfigTable(keys []ConfigKey) string {
	var b strings.Builder
	b.WriteString("| key | env | default | meaning |\n|---|---|---|---|\n")
	for _, k := range keys {
		def := Code(k.Default)
		switch k.Default {
		case `""`:
			def = ""
		case "(from the machine)":
			def = k.Default
		}
		key := Code(k.Key)
		if k.Note != "" {
			key += " " + k.Note
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", key, Code(k.Env), Cell(def), Cell(k.Meaning))
	}
	return b.String()
}
