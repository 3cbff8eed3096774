//! What the cases read off a controller's tape (the engine's in-memory recorder): watch
//! frames, opens, ends, cursors and LISTs, as queries over [`Tape::all`], for a controller
//! of any kind.

use std::collections::BTreeSet;

use reconcile_core::pod::PodView;
use reconcile_core::{Command, Input, SourceId};
use reconcile_engine::tape::Tape as EngineTape;
use reconcile_trace::Recorded;

/// The tape of the cell controller under test.
pub type Tape = EngineTape<PodView, String>;

/// One watch frame, as far as a case cares: type, object name, resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`.
    pub kind: String,
    /// `object.metadata.name`, or `""`.
    pub name: String,
    /// `object.metadata.resourceVersion`, or `""`.
    pub resource_version: String,
}

/// The queries the cases make of a [`Tape`].
pub trait TapeExt {
    /// Every watch line so far, decoded just enough to read its type, name and version.
    fn frames(&self) -> Vec<Frame>;

    /// How many watches were answered 200 and started streaming.
    fn watches_opened(&self) -> usize;

    /// How many watches ended (cleanly or not).
    fn watch_ends(&self) -> usize;

    /// The cursor of every WATCH sent, in order.
    fn watch_cursors(&self) -> Vec<String>;

    /// The watch lines of `source`'s streams so far (a controller with secondary sources
    /// watches one collection per source).
    fn frames_of(&self, source: SourceId) -> Vec<Frame>;

    /// How many LISTs of `source` were sent: 1 for its first sync, one more per relist.
    fn lists_of(&self, source: SourceId) -> usize;
}

impl<O: Clone, P: Clone> TapeExt for EngineTape<O, P> {
    fn frames(&self) -> Vec<Frame> {
        self.all()
            .iter()
            .filter_map(|(_, r)| match r {
                Recorded::Input(Input::WatchLine { line, .. }) => Some(frame(line)),
                _ => None,
            })
            .collect()
    }

    fn frames_of(&self, of: SourceId) -> Vec<Frame> {
        // A WATCH command names its source and its stream; the lines name the stream only.
        let mut streams = BTreeSet::new();
        let mut frames = Vec::new();
        for (_, record) in self.all() {
            match record {
                Recorded::Command(Command::Watch { stream, source, .. }) if source == of => {
                    streams.insert(stream);
                }
                Recorded::Input(Input::WatchLine { stream, line }) if streams.contains(&stream) => {
                    frames.push(frame(&line));
                }
                _ => {}
            }
        }
        frames
    }

    fn lists_of(&self, of: SourceId) -> usize {
        self.all()
            .iter()
            .filter(|(_, r)| matches!(r, Recorded::Command(Command::List { source, .. }) if *source == of))
            .count()
    }

    fn watches_opened(&self) -> usize {
        self.all()
            .iter()
            .filter(|(_, r)| matches!(r, Recorded::Input(Input::WatchOpened { .. })))
            .count()
    }

    fn watch_ends(&self) -> usize {
        self.all()
            .iter()
            .filter(|(_, r)| matches!(r, Recorded::Input(Input::WatchEnd { .. })))
            .count()
    }

    fn watch_cursors(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter_map(|(_, r)| match r {
                Recorded::Command(Command::Watch {
                    resource_version, ..
                }) => Some(resource_version),
                _ => None,
            })
            .collect()
    }
}

fn frame(line: &[u8]) -> Frame {
    let value: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    Frame {
        kind: text(&value["type"]),
        name: text(&value["object"]["metadata"]["name"]),
        resource_version: text(&value["object"]["metadata"]["resourceVersion"]),
    }
}
