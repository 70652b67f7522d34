use std::fmt;

use serde::Deserialize;

/// An error of the engine: a stable kebab-case reason code and a message
/// (never token or key material).
///
/// Reasons: `config-invalid` (the configuration file or an `SVC_*`
/// variable), `engine-start-failed` (the engine, its telemetry or audit
/// log could not start), `input-invalid` (the policy input), `policy-error`
/// (the policy could not decide), `engine-closed`, `engine-failed` (the
/// engine's answer could not be read).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Error {
    pub reason: String,
    pub message: String,
}

impl Error {
    pub(crate) fn new(reason: &str, message: impl Into<String>) -> Self {
        Error {
            reason: reason.to_string(),
            message: message.into(),
        }
    }

    /// The stable reason code.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.reason, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// The error document of the engine: {"error": {"reason", "message"}}.
#[derive(Deserialize)]
pub(crate) struct ErrorDoc {
    pub error: Error,
}
