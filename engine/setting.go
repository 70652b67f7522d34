package engine

// SettingError is an error caused by a setting: it names the key and
// where its value came from, and reads like
//
//	policy.dir (svc.toml:7): policy directory /etc/svc/policies does not exist
type SettingError struct {
	// Key is the config key, such as "policy.dir".
	Key string
	// Origin is where its value came from: "svc.toml:7", "SVC_POLICY_DIR"
	// or "default" (see config.Config.Origin).
	Origin string
	// Msg says what is wrong with the value.
	Msg string
	// Err is the cause, for errors.Is and errors.As.
	Err error
}

func (e *SettingError) Error() string { return e.Key + " (" + e.Origin + "): " + e.Msg }

// Unwrap returns the cause.
func (e *SettingError) Unwrap() error { return e.Err }
