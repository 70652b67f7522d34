package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/util"
)

// Load reads a policy set from a directory: every .rego file under it
// (recursively, skipping *_test.rego files and hidden directories) and
// every data.json, data.yaml or data.yml file, merged into data at the path
// of its directory relative to dir, as OPA bundles do. dir may also name a
// single .rego file. File names in errors and in Files start with dir.
// Unless opts allow them, a call to one of NetworkBuiltins does not
// compile.
func Load(dir string, opts ...Option) (*Set, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, &Error{Problems: []Problem{{File: dir, Code: CodeLoad, Msg: loadMsg(err)}}}
	}
	if !st.IsDir() {
		if !strings.HasSuffix(dir, ".rego") {
			return nil, &Error{Problems: []Problem{{File: dir, Code: CodeLoad, Msg: "not a directory or a .rego file"}}}
		}
		src, err := os.ReadFile(dir)
		if err != nil {
			return nil, &Error{Problems: []Problem{{File: dir, Code: CodeLoad, Msg: loadMsg(err)}}}
		}
		name := filepath.ToSlash(dir)
		return build([]string{name}, map[string]string{name: string(src)}, nil, optionsOf(opts))
	}
	prefix := filepath.ToSlash(filepath.Clean(dir))
	return loadFS(os.DirFS(dir), ".", func(rel string) string { return path.Join(prefix, rel) }, optionsOf(opts))
}

// LoadFS is Load on a file system: it reads the tree rooted at name in
// fsys ("." for all of it). File names are fsys paths.
func LoadFS(fsys fs.FS, name string, opts ...Option) (*Set, error) {
	return loadFS(fsys, path.Clean(name), func(p string) string { return p }, optionsOf(opts))
}

// loadFS walks root in fsys; display turns an fsys path into the file name
// shown in errors and used for modules.
func loadFS(fsys fs.FS, root string, display func(string) string, o options) (*Set, error) {
	sources := map[string]string{}
	data := map[string]any{}
	var files []string
	var problems []Problem
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			problems = append(problems, Problem{File: display(p), Code: CodeLoad, Msg: loadMsg(err)})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		base := d.Name()
		if p != root && strings.HasPrefix(base, ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		switch {
		case strings.HasSuffix(base, "_test.rego"):
			return nil
		case strings.HasSuffix(base, ".rego"):
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				problems = append(problems, Problem{File: display(p), Code: CodeLoad, Msg: loadMsg(err)})
				return nil
			}
			sources[display(p)] = string(src)
			files = append(files, display(p))
		case base == "data.json" || base == "data.yaml" || base == "data.yml":
			if err := mergeDataFile(fsys, root, p, data); err != nil {
				problems = append(problems, Problem{File: display(p), Code: CodeData, Msg: err.Error()})
				return nil
			}
			files = append(files, display(p))
		}
		return nil
	})
	if err != nil {
		problems = append(problems, Problem{File: display(root), Code: CodeLoad, Msg: loadMsg(err)})
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	if len(sources) == 0 {
		return nil, &Error{Problems: []Problem{{File: display(root), Code: CodeLoad, Msg: "no policy files (*.rego) found"}}}
	}
	slices.Sort(files)
	// The data files were decoded here, into maps of their own.
	o.decodedJSON = true
	return build(files, sources, data, o)
}

// mergeDataFile decodes the data file at p and merges it into data at the
// path of p's directory relative to root.
func mergeDataFile(fsys fs.FS, root, p string, data map[string]any) error {
	raw, err := fs.ReadFile(fsys, p)
	if err != nil {
		return errors.New(loadMsg(err))
	}
	var doc any
	if strings.HasSuffix(p, ".json") {
		err = util.UnmarshalJSON(raw, &doc)
	} else {
		err = util.Unmarshal(raw, &doc)
	}
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if doc == nil {
		return nil // an empty YAML file adds nothing
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("top level must be an object, got %s", jsonKind(doc))
	}
	rel := path.Dir(p)
	if root != "." {
		rel = strings.TrimPrefix(strings.TrimPrefix(rel, root), "/")
	}
	var keys []string
	if rel != "." && rel != "" {
		keys = strings.Split(rel, "/")
	}
	return mergeAt(data, keys, obj)
}

// mergeAt merges obj into data under keys, creating objects on the way.
// Two files may fill the same object but never set the same leaf.
func mergeAt(data map[string]any, keys []string, obj map[string]any) error {
	dst := data
	for i, k := range keys {
		next, ok := dst[k]
		if !ok {
			m := map[string]any{}
			dst[k] = m
			dst = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("data path %q is already set to a %s", strings.Join(keys[:i+1], "."), jsonKind(next))
		}
		dst = m
	}
	return mergeObjects(dst, obj, keys)
}

func mergeObjects(dst, src map[string]any, at []string) error {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		v := src[k]
		here := append(slices.Clip(at), k)
		old, exists := dst[k]
		if !exists {
			dst[k] = v
			continue
		}
		om, ok1 := old.(map[string]any)
		nm, ok2 := v.(map[string]any)
		if !ok1 || !ok2 {
			return fmt.Errorf("data path %q is set by more than one data file", strings.Join(here, "."))
		}
		if err := mergeObjects(om, nm, here); err != nil {
			return err
		}
	}
	return nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	default:
		return "number"
	}
}

// loadMsg describes a file system error without repeating the path, which
// the Problem carries already.
func loadMsg(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}
