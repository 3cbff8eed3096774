//! The tap a recorder sits on: every [`Input`] the driver feeds the core, stamped with `now`,
//! and every [`Command`] the core issued, in order.
//!
//! Recording inputs rather than decoded objects is what lets a trace replay exactly: the
//! simulator feeds the same bytes to the same core and must reach the same store. The
//! vocabulary is the core's own, so what a recorder keeps is what a replay feeds back.

use reconcile_core::{Command, Input, Instant};

/// What a recorder is told of one source ([`Recorder::sources`]): its resource, from the
/// source's type and URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceResource {
    /// The API group (`""` for core), from the URL (`/api/v1/...` or `/apis/GROUP/...`);
    /// `None` for an in-process source or a URL of another shape.
    pub group: Option<String>,
    /// The resource's plural (`secrets`): the URL's collection segment.
    pub plural: Option<String>,
    /// The kind, when the source's type names it (`Secret` for a `Source<Secret>` and a
    /// `Source<PartialObjectMeta<Secret>>`, a `DynamicObject`'s `ApiResource` kind).
    pub kind: Option<String>,
    /// Whether the source asks for metadata only (`PartialObjectMetadata`).
    pub metadata_only: bool,
}

impl SourceResource {
    /// The resource of a source at `url_path` (empty for none), of `kind` when known.
    #[must_use]
    pub fn of_url(url_path: &str, kind: Option<&str>, metadata_only: bool) -> Self {
        let segments: Vec<&str> = url_path.split('/').filter(|s| !s.is_empty()).collect();
        // /api/VERSION/[namespaces/NS/]PLURAL, /apis/GROUP/VERSION/[namespaces/NS/]PLURAL
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => (Some(String::new()), rest),
            ["apis", group, _version, rest @ ..] => (Some((*group).to_owned()), rest),
            _ => (None, &[][..]),
        };
        let plural = match rest {
            [plural] | ["namespaces", _, plural] => Some((*plural).to_owned()),
            _ => None,
        };
        SourceResource {
            group: group.filter(|_| plural.is_some()),
            plural,
            kind: kind.map(str::to_owned),
            metadata_only,
        }
    }

    /// Whether the resource is core/v1 Secrets, by kind or by plural.
    #[must_use]
    pub fn is_secrets(&self) -> bool {
        let kind_says = self.kind.as_deref() == Some("Secret")
            && self.group.as_deref().is_none_or(str::is_empty);
        kind_says
            || self.group.as_deref().is_some_and(|g| {
                reconcile_trace::redact::is_secret_resource(g, None, self.plural.as_deref())
            })
    }
}

/// Receives every input and command of one controller run, in order.
///
/// Called on the driver task: keep it cheap (buffer, write in batches).
///
/// A LIST the driver decoded while it streamed in is recorded as the raw body it kept
/// ([`ListResponse::Response`](reconcile_core::ListResponse::Response) with status 200),
/// not as the decoded list it fed.
pub trait Recorder<O, P>: Send + 'static {
    /// The driver fed `input` at `now`.
    fn input(&mut self, now: Instant, input: &Input<O>);

    /// The core issued `command` at `now`.
    fn command(&mut self, now: Instant, command: &Command<O, P>);

    /// Before the run: the resource of each source, the primary first, then the secondaries
    /// in the order added (a trace's source numbering). A recorder that writes payloads uses
    /// it to know which sources are Secrets (a metadata-only Secret source included, whose
    /// payloads do not say so).
    fn sources(&mut self, sources: &[SourceResource]) {
        let _ = sources;
    }

    /// The run ended; flush.
    fn finish(&mut self, now: Instant) {
        let _ = now;
    }
}
