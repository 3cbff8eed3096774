//! Splits a streamed response body into frames without decoding them: newline-delimited
//! JSON lines, or the length-prefixed frames of a protobuf watch. Each frame goes to the
//! core exactly as the apiserver sent it (a protobuf frame without its prefix).

use bytes::{Buf, Bytes, BytesMut};

/// A line longer than the bound: the stream cannot be trusted past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a watch line exceeded {limit} bytes without a newline")]
pub struct LineTooLong {
    /// The bound that was exceeded.
    pub limit: usize,
}

/// Accumulates chunks and yields complete, non-empty lines (without their `\n`).
///
/// Bounded: at most `max_line` bytes are held between two newlines.
#[derive(Debug)]
pub struct LineSplitter {
    partial: BytesMut,
    max_line: usize,
}

impl LineSplitter {
    /// A splitter that refuses lines longer than `max_line` bytes.
    #[must_use]
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            partial: BytesMut::new(),
            max_line,
        }
    }

    /// Adds `chunk` and appends every line it completes to `lines`.
    ///
    /// # Errors
    /// [`LineTooLong`] when the bytes since the last newline exceed the bound.
    pub fn push(&mut self, chunk: &[u8], lines: &mut Vec<Bytes>) -> Result<(), LineTooLong> {
        let mut rest = chunk;
        // memchr scans a word (or a vector) at a time: a watch line is several KB, and a
        // byte-by-byte scan was a seventh of the whole per-frame cost.
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let (head, tail) = rest.split_at(at);
            self.check(head.len())?;
            self.partial.extend_from_slice(head);
            let line = self.partial.split().freeze();
            if !is_blank(&line) {
                lines.push(line);
            }
            rest = &tail[1..];
        }
        self.check(rest.len())?;
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// The unterminated last line, if any, once the body has ended.
    pub fn finish(&mut self) -> Option<Bytes> {
        let line = self.partial.split().freeze();
        (!is_blank(&line)).then_some(line)
    }

    fn check(&self, more: usize) -> Result<(), LineTooLong> {
        if self.partial.len() + more > self.max_line {
            return Err(LineTooLong {
                limit: self.max_line,
            });
        }
        Ok(())
    }
}

/// A length-prefixed watch stream that cannot be trusted past this point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameSplitError {
    /// A frame's prefix declares more than the bound; nothing of it was buffered.
    #[error("a watch frame declares {length} bytes, over the bound of {limit}")]
    TooLong {
        /// The declared length.
        length: u32,
        /// The bound.
        limit: usize,
    },
    /// The body ended inside a frame (Go's framer says `io.ErrUnexpectedEOF`).
    #[error("the watch stream ended inside a frame: {have} of {want} bytes")]
    Truncated {
        /// Bytes of the frame (its 4-byte prefix included) that arrived.
        have: usize,
        /// Bytes it needed (4 while the prefix itself is incomplete).
        want: usize,
    },
}

/// Splits a protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`) into
/// frames: each a 4-byte big-endian length and that many bytes, as apimachinery's
/// `LengthDelimitedFrameReader` reads them. Frames come out without their prefix.
///
/// Bounded: a frame whose prefix declares more than `max_frame` bytes is refused as soon as
/// the prefix is in, before any of it is buffered; at most one incomplete frame is held.
/// Whole frames inside a chunk are sliced from it, not copied.
#[derive(Debug)]
pub struct FrameSplitter {
    partial: BytesMut,
    max_frame: usize,
}

/// The length prefix of a frame.
const PREFIX: usize = 4;

impl FrameSplitter {
    /// A splitter that refuses frames longer than `max_frame` bytes.
    #[must_use]
    pub fn new(max_frame: usize) -> Self {
        FrameSplitter {
            partial: BytesMut::new(),
            max_frame,
        }
    }

    /// The length the prefix at the start of `bytes` declares, checked against the bound.
    fn length(&self, bytes: &[u8]) -> Result<usize, FrameSplitError> {
        let prefix: [u8; PREFIX] = [bytes[0], bytes[1], bytes[2], bytes[3]];
        let length = u32::from_be_bytes(prefix);
        match usize::try_from(length) {
            Ok(n) if n <= self.max_frame => Ok(n),
            _ => Err(FrameSplitError::TooLong {
                length,
                limit: self.max_frame,
            }),
        }
    }

    /// Adds `chunk` and appends every frame it completes to `frames`.
    ///
    /// # Errors
    /// [`FrameSplitError::TooLong`] when a prefix declares more than the bound.
    pub fn push(&mut self, chunk: &Bytes, frames: &mut Vec<Bytes>) -> Result<(), FrameSplitError> {
        let mut rest = chunk.clone();
        if !self.partial.is_empty() {
            if self.partial.len() < PREFIX {
                let take = (PREFIX - self.partial.len()).min(rest.len());
                self.partial.extend_from_slice(&rest[..take]);
                rest.advance(take);
                if self.partial.len() < PREFIX {
                    return Ok(());
                }
            }
            let want = PREFIX + self.length(&self.partial)?;
            let take = (want - self.partial.len()).min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            rest.advance(take);
            if self.partial.len() < want {
                return Ok(());
            }
            let mut frame = self.partial.split();
            frame.advance(PREFIX);
            frames.push(frame.freeze());
        }
        while rest.len() >= PREFIX {
            let want = PREFIX + self.length(&rest)?;
            if rest.len() < want {
                break;
            }
            frames.push(rest.slice(PREFIX..want));
            rest.advance(want);
        }
        // Less than one frame, whose declared length (if in) passed the bound.
        self.partial.extend_from_slice(&rest);
        Ok(())
    }

    /// Ends the stream.
    ///
    /// # Errors
    /// [`FrameSplitError::Truncated`] when it ended inside a frame.
    pub fn finish(&mut self) -> Result<(), FrameSplitError> {
        let have = self.partial.len();
        if have == 0 {
            return Ok(());
        }
        let want = if have < PREFIX {
            PREFIX
        } else {
            PREFIX + self.length(&self.partial)?
        };
        self.partial.clear();
        Err(FrameSplitError::Truncated { have, want })
    }
}

/// Whether a response's `Content-Type` is Kubernetes protobuf (any parameters, such as
/// `;stream=watch`, aside).
#[must_use]
pub fn is_protobuf_content_type(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|t| {
        t.trim()
            .eq_ignore_ascii_case(reconcile_core::protobuf::MEDIA_TYPE)
    })
}

/// How a WATCH body is cut into frames, as its response's `Content-Type` says: whatever was
/// asked for, a source that asked for protobuf is answered in JSON for a custom resource.
#[derive(Debug)]
pub enum WatchSplitter {
    /// Newline-delimited JSON.
    Lines(LineSplitter),
    /// Length-prefixed protobuf.
    Frames(FrameSplitter),
}

impl WatchSplitter {
    /// The splitter for a WATCH answered with `content_type`, refusing frames (or lines)
    /// longer than `max_frame` bytes.
    #[must_use]
    pub fn for_content_type(content_type: &str, max_frame: usize) -> Self {
        if is_protobuf_content_type(content_type) {
            WatchSplitter::Frames(FrameSplitter::new(max_frame))
        } else {
            WatchSplitter::Lines(LineSplitter::new(max_frame))
        }
    }

    /// Whether this splits protobuf frames.
    #[must_use]
    pub fn is_protobuf(&self) -> bool {
        matches!(self, WatchSplitter::Frames(_))
    }

    /// Adds `chunk` and appends every frame it completes to `frames`.
    ///
    /// # Errors
    /// A line or frame over the bound, as text.
    pub fn push(&mut self, chunk: &Bytes, frames: &mut Vec<Bytes>) -> Result<(), String> {
        match self {
            WatchSplitter::Lines(s) => s.push(chunk, frames).map_err(|e| e.to_string()),
            WatchSplitter::Frames(s) => s.push(chunk, frames).map_err(|e| e.to_string()),
        }
    }

    /// Ends the stream: the last unterminated JSON line, if any.
    ///
    /// # Errors
    /// A protobuf stream that ended inside a frame, as text.
    pub fn finish(&mut self) -> Result<Option<Bytes>, String> {
        match self {
            WatchSplitter::Lines(s) => Ok(s.finish()),
            WatchSplitter::Frames(s) => s.finish().map(|()| None).map_err(|e| e.to_string()),
        }
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::new(64);
        let mut lines = Vec::new();
        for c in chunks {
            s.push(c, &mut lines).unwrap();
        }
        lines.extend(s.finish());
        lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect()
    }

    #[test]
    fn joins_lines_split_across_chunks_and_skips_blank_ones() {
        assert_eq!(
            split(&[b"{\"a\"", b":1}\n\n{\"b\":2}\n{\"c", b"\":3}"]),
            ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]
        );
    }

    fn frames(stream: &[u8], chunk: usize, max: usize) -> Result<Vec<Vec<u8>>, FrameSplitError> {
        let mut s = FrameSplitter::new(max);
        let mut frames = Vec::new();
        for c in stream.chunks(chunk.max(1)) {
            s.push(&Bytes::copy_from_slice(c), &mut frames)?;
        }
        s.finish()?;
        Ok(frames.iter().map(|f| f.to_vec()).collect())
    }

    fn prefixed(parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            out.extend((p.len() as u32).to_be_bytes());
            out.extend(*p);
        }
        out
    }

    #[test]
    fn frames_come_out_whole_whatever_the_chunking() {
        let stream = prefixed(&[b"abc", b"", b"\n\x00k8s", &[7; 300]]);
        for chunk in [1, 2, 3, 4, 5, 7, 64, 1000] {
            assert_eq!(
                frames(&stream, chunk, 1000).unwrap(),
                [b"abc".to_vec(), vec![], b"\n\x00k8s".to_vec(), vec![7; 300]],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn an_oversized_or_truncated_frame_is_an_error() {
        let stream = prefixed(&[b"ok", &[1; 101]]);
        for chunk in [1, 3, 200] {
            assert_eq!(
                frames(&stream, chunk, 100),
                Err(FrameSplitError::TooLong {
                    length: 101,
                    limit: 100
                })
            );
        }
        // A prefix of u32::MAX is refused before anything of it is buffered.
        let mut s = FrameSplitter::new(100);
        let mut out = Vec::new();
        assert!(s.push(&Bytes::from_static(&[0xff; 4]), &mut out).is_err());
        let stream = prefixed(&[b"abc", b"defg"]);
        for cut in 1..stream.len() {
            if cut == 7 {
                continue; // between the frames
            }
            let result = frames(&stream[..cut], 2, 100);
            assert!(
                matches!(result, Err(FrameSplitError::Truncated { have, .. }) if have > 0),
                "cut at {cut}: {result:?}"
            );
        }
        assert_eq!(
            frames(&stream[..9], 100, 100),
            Err(FrameSplitError::Truncated { have: 2, want: 4 })
        );
    }

    #[test]
    fn refuses_a_line_past_the_bound() {
        let mut s = LineSplitter::new(4);
        let mut lines = Vec::new();
        assert!(s.push(b"abc", &mut lines).is_ok());
        assert_eq!(s.push(b"de\n", &mut lines), Err(LineTooLong { limit: 4 }));
    }
    #[test]
    fn the_content_type_picks_the_splitter() {
        for (ct, protobuf) in [
            ("application/vnd.kubernetes.protobuf;stream=watch", true),
            ("Application/Vnd.Kubernetes.Protobuf", true),
            ("application/json", false),
            ("application/json;stream=watch", false),
            ("", false),
        ] {
            assert_eq!(is_protobuf_content_type(ct), protobuf, "{ct}");
            assert_eq!(
                WatchSplitter::for_content_type(ct, 16).is_protobuf(),
                protobuf,
                "{ct}"
            );
        }
        let mut frames = Vec::new();
        let mut s = WatchSplitter::for_content_type("application/vnd.kubernetes.protobuf", 16);
        s.push(&Bytes::from_static(b"\0\0\0\x02ab\0\0"), &mut frames)
            .unwrap();
        assert_eq!(frames, vec![Bytes::from_static(b"ab")]);
        assert!(s.finish().is_err(), "ended inside a prefix");
        let mut s = WatchSplitter::for_content_type("application/json", 16);
        s.push(&Bytes::from_static(b"{}\n{"), &mut frames).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(s.finish(), Ok(Some(Bytes::from_static(b"{"))));
    }
}
