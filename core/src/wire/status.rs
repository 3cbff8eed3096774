//! `metav1.Status`, the apiserver's error object: the parts of it that decide what to do
//! next, read from JSON ([`frame`](crate::frame)) and protobuf ([`protobuf`](crate::protobuf))
//! alike.

use std::fmt;

/// The parts of a `metav1.Status` that decide what to do next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `code`: the HTTP status it stands for (410 for an expired cursor).
    pub code: Option<i32>,
    /// `reason`, for example `Expired` (older servers say `Gone`).
    pub reason: Option<String>,
    /// `message`, human-readable.
    pub message: Option<String>,
    /// `details.causes[].reason` (Go's `StatusCause.Type`), for example
    /// `ResourceVersionTooLarge`.
    pub causes: Vec<String>,
}

impl Status {
    /// A cursor that is too old: code 410, or reason `Expired` / `Gone`.
    #[must_use]
    pub fn is_expired(&self) -> bool {
        self.code == Some(410) || matches!(self.reason.as_deref(), Some("Expired" | "Gone"))
    }

    /// A cursor from the future: code 504, or the `ResourceVersionTooLarge` cause.
    #[must_use]
    pub fn is_too_large(&self) -> bool {
        self.code == Some(504) || self.causes.iter().any(|c| c == "ResourceVersionTooLarge")
    }

    /// The cursor can never be served again: relist.
    #[must_use]
    pub fn cursor_unusable(&self) -> bool {
        self.is_expired() || self.is_too_large()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{code}")?,
            None => f.write_str("-")?,
        }
        if let Some(reason) = &self.reason {
            write!(f, " {reason}")?;
        }
        for cause in &self.causes {
            write!(f, " [{cause}]")?;
        }
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}
