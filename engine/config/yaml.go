package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

var (
	yamlLineMsg  = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlMismatch = regexp.MustCompile(`^cannot unmarshal (!!\w+)`)
	yamlNoField  = regexp.MustCompile(`^field (.*) not found in type `)
)

// yamlTags names YAML's core tags in words.
var yamlTags = map[string]string{
	"!!str": "a string", "!!int": "an integer", "!!float": "a number", "!!bool": "a boolean",
	"!!seq": "a list", "!!map": "a mapping", "!!null": "null", "!!timestamp": "a timestamp",
	"!!binary": "binary data",
}

// decodeYAML decodes one YAML document. The document is walked first, so
// that unknown keys and bad durations are reported with their full key
// path and line; the struct is then filled by a decoder with KnownFields
// set, whose type errors are mapped back to keys through their lines.
func decodeYAML(data []byte, source string) (Config, error) {
	var root yaml.Node
	err := safely(func() error {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&root); err != nil {
			return err
		}
		var extra yaml.Node
		switch err := dec.Decode(&extra); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		default:
			return fmt.Errorf("line %d: a config file holds one YAML document, found another", extra.Line)
		}
	})
	if errors.Is(err, io.EOF) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, yamlError(err, source, nil)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode && !isYAMLNull(doc) {
		return Config{}, &Error{Source: source, Line: doc.Line, Column: doc.Column,
			Msg: "the top level must be a mapping of tables such as sdk:"}
	}

	w := yamlWalker{source: source, lines: make(map[int]yamlLine), keyLines: make(map[string]int), seen: make(map[yamlSeen]bool)}
	w.walk(doc, configType, nil)
	if len(w.errs) > 0 {
		return Config{}, join(w.errs)
	}

	var cfg Config
	err = safely(func() error {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		return dec.Decode(&cfg)
	})
	if err != nil {
		return Config{}, yamlError(err, source, w.lines)
	}
	cfg.Lines = w.keyLines
	return cfg, nil
}

// yamlError turns a yaml.v3 error into *Error values, using lines (which
// maps a line to the key whose value starts there) to name the key.
func yamlError(err error, source string, lines map[int]yamlLine) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	errs := make([]*Error, 0, len(msgs))
	for _, msg := range msgs {
		e := &Error{Source: source, Msg: msg, Err: err}
		if m := yamlLineMsg.FindStringSubmatch(msg); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = m[2]
		}
		if li, ok := lines[e.Line]; ok && e.Line > 0 {
			if m := yamlMismatch.FindStringSubmatch(e.Msg); m != nil {
				e.Key = li.key
				e.Msg = fmt.Sprintf("must be %s, got %s", describe(li.t), tagWords(m[1]))
			}
		}
		if m := yamlNoField.FindStringSubmatch(e.Msg); m != nil {
			e.Msg, e.Err = fmt.Sprintf("unknown key %q", m[1]), ErrUnknownKey
		}
		errs = append(errs, e)
	}
	return join(errs)
}

func tagWords(tag string) string {
	if w, ok := yamlTags[tag]; ok {
		return w
	}
	return tag
}

type yamlLine struct {
	key string
	t   reflect.Type
}

type yamlSeen struct {
	n *yaml.Node
	t reflect.Type
}

// yamlWalker checks a YAML node tree against the Config type.
type yamlWalker struct {
	source string
	errs   []*Error
	// lines maps a line to the deepest key whose value starts on it.
	lines map[int]yamlLine
	// keyLines maps a key to the line of its value (Config.Lines).
	keyLines map[string]int
	// seen bounds the walk through aliases: each anchored node is walked
	// at most once per type, so alias bombs cost nothing here.
	seen map[yamlSeen]bool
}

func (w *yamlWalker) walk(n *yaml.Node, t reflect.Type, path []string) {
	if n.Kind == yaml.AliasNode {
		k := yamlSeen{n.Alias, t}
		if n.Alias == nil || w.seen[k] {
			return
		}
		w.seen[k] = true
		n = n.Alias
	}
	if len(path) > 0 {
		w.lines[n.Line] = yamlLine{key: keyPath(path...), t: t}
		if _, ok := w.keyLines[keyPath(path...)]; !ok {
			w.keyLines[keyPath(path...)] = n.Line
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isYAMLNull(n) {
		return
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			w.fail(n, path, "must be "+describe(t)+", got "+tagWords(n.ShortTag()), nil)
			return
		}
		if err := new(Duration).UnmarshalText([]byte(n.Value)); err != nil {
			w.fail(n, path, err.Error(), nil)
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		w.mapping(n, t, path, func(k, v *yaml.Node) {
			f, ok := fieldByTag(t, "yaml", k.Value)
			if !ok {
				w.fail(k, with(path, k.Value), unknownKey("yaml", with(path, k.Value)), ErrUnknownKey)
				return
			}
			w.walk(v, f.Type, with(path, k.Value))
		})
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		w.mapping(n, t, path, func(k, v *yaml.Node) {
			w.walk(v, t.Elem(), with(path, k.Value))
		})
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			w.walk(item, t.Elem(), with(path, index(i)))
		}
	}
	// Other mismatches of node and type are left to the decoder, whose
	// error is mapped back to the key through w.lines.
}

// mapping calls fn for each key and value of mapping n, walking the
// mappings merged in with "<<" as if they were written in place.
func (w *yamlWalker) mapping(n *yaml.Node, t reflect.Type, path []string, fn func(k, v *yaml.Node)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, m := range merged {
				w.walk(m, t, path)
			}
			continue
		}
		fn(k, v)
	}
}

func (w *yamlWalker) fail(n *yaml.Node, path []string, msg string, cause error) {
	w.errs = append(w.errs, &Error{Source: w.source, Line: n.Line, Column: n.Column,
		Key: keyPath(path...), Msg: msg, Err: cause})
}

func isYAMLNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// with returns path extended by seg without sharing path's array.
func with(path []string, seg string) []string {
	return append(path[:len(path):len(path)], seg)
}
