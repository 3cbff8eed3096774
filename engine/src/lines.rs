//! Splits a streamed response body into lines without decoding them: each watch frame goes
//! to the core exactly as the apiserver sent it.

use bytes::{Bytes, BytesMut};

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

    #[test]
    fn refuses_a_line_past_the_bound() {
        let mut s = LineSplitter::new(4);
        let mut lines = Vec::new();
        assert!(s.push(b"abc", &mut lines).is_ok());
        assert_eq!(s.push(b"de\n", &mut lines), Err(LineTooLong { limit: 4 }));
    }
}
