//! Which encoding a source asks the apiserver for: JSON, or Kubernetes protobuf.

/// The encoding a source asks the apiserver for (client-go's `rest.Config.ContentType`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// `application/json`, newline-delimited on WATCH.
    #[default]
    Json,
    /// `application/vnd.kubernetes.protobuf`, length-prefixed frames on WATCH; only for types
    /// with a protobuf decoder ([`Object::protobuf`](crate::Object::protobuf)). The server
    /// may still answer JSON (it does for custom resources), which is then decoded as JSON.
    Protobuf,
}

impl WireFormat {
    /// `json` or `protobuf`, as a trace header writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::Json => "json",
            WireFormat::Protobuf => "protobuf",
        }
    }

    /// The format `as_str` names.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "json" => Some(WireFormat::Json),
            "protobuf" => Some(WireFormat::Protobuf),
            _ => None,
        }
    }
}
