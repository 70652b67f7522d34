package policy

// DecodedJSON says that the data given to FromModules was decoded from
// JSON or YAML by OPA's util.UnmarshalJSON or util.Unmarshal (a bundle's
// data, data files) and is the set's to keep: the set then neither copies
// it nor converts it through JSON, which for a large data document costs
// as much time as decoding it and a second copy of it in memory while
// the set is built. The set consumes it: its objects are emptied as their
// members become the store's values. Data of any other origin must not be
// given with it.
func DecodedJSON() Option {
	return func(o *options) { o.decodedJSON = true }
}

// Revision gives the set the revision rev (a bundle's) when it is built,
// as Set.WithRevision does afterwards, and spares the digest of the
// sources and data that is the default revision: for a large data
// document, an encoding of all of it. An empty rev keeps the default.
func Revision(rev string) Option {
	return func(o *options) { o.revision = rev }
}

// setData returns the data document of a set: data itself when it was
// decoded from JSON already (an empty object for nil), else a JSON copy
// of it (jsonData).
func setData(data map[string]any, decoded bool) (map[string]any, error) {
	if !decoded {
		return jsonData(data)
	}
	if data == nil {
		return map[string]any{}, nil
	}
	return data, nil
}

// WithCompactData gives the set data, built by a CompactDataBuilder (a
// bundle's data files, read as they are unpacked), in place of the data
// document given to FromModules, which must be nil. Data of at least
// 1 MiB of JSON stays compact; smaller data is converted to AST values.
func WithCompactData(data *CompactData) Option {
	return func(o *options) { o.compact = data }
}
