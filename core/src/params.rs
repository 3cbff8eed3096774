//! What to LIST and WATCH: namespace, selectors, timeout. Below every module that sends a
//! request, so the reflector and the commands name it without depending on the config.

use std::fmt;

/// What to LIST and WATCH (kube-runtime's `watcher::Config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchParams {
    /// Namespace, or all namespaces when `None`.
    pub namespace: Option<String>,
    /// `labelSelector`, applied server-side to LIST and WATCH alike.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `timeoutSeconds`, sent on every WATCH (default 300).
    pub timeout_seconds: u32,
}

impl Default for WatchParams {
    fn default() -> Self {
        WatchParams {
            namespace: None,
            label_selector: None,
            field_selector: None,
            timeout_seconds: 300,
        }
    }
}

impl WatchParams {
    /// Watches everything in `namespace`.
    #[must_use]
    pub fn namespaced(namespace: impl Into<String>) -> Self {
        WatchParams {
            namespace: Some(namespace.into()),
            ..WatchParams::default()
        }
    }

    /// Sets the label selector.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Sets the field selector.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Sets `timeoutSeconds`.
    #[must_use]
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = seconds;
        self
    }
}

impl fmt::Display for WatchParams {
    /// Renders the scoping as a suffix: ` ns=a labels=x=y`, empty when unscoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ns) = &self.namespace {
            write!(f, " ns={ns}")?;
        }
        if let Some(l) = &self.label_selector {
            write!(f, " labels={l}")?;
        }
        if let Some(s) = &self.field_selector {
            write!(f, " fields={s}")?;
        }
        Ok(())
    }
}
