package reason

// Codes of the Rust crate's C interface (sdk/rust/capi), beside the
// engine's own: the "reason" of its error answers.
const (
	// ConfigInvalid: the configuration file or an SVC_* variable is
	// wrong.
	ConfigInvalid Code = "config-invalid"
	// EngineStartFailed: the configuration loaded but the engine, its
	// telemetry or its audit log could not start.
	EngineStartFailed Code = "engine-start-failed"
	// EngineClosed: the handle names no open engine.
	EngineClosed Code = "engine-closed"
	// InputTooLarge: a length given to the interface is more than it
	// accepts for that argument; nothing was read.
	InputTooLarge Code = "input-too-large"
	// EnginePanic: the call failed on an internal error (a recovered
	// panic, logged to standard error); the engine stays usable.
	EnginePanic Code = "engine-panic"
)
