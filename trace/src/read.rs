//! Reading a trace or a capture from a file or a pipe, bounded: in bytes as a whole, in bytes
//! per line, with line ends of any kind (LF, CRLF, a lone CR) counted the same way everywhere
//! a line is named.

use std::io::{self, Read};

use crate::TraceError;

/// The largest input read: far above any capture, low enough that a stray argument (a disk
/// image, `/dev/zero`) is refused instead of filling memory.
pub const MAX_INPUT: u64 = 1 << 30;

/// The longest line read, in bytes: a trace's LIST body is one line, so this is far above
/// any watch frame (an object is at most about 1.5 MiB in etcd) and above a LIST of tens of
/// thousands of real pods (a few KiB each), yet a line of garbage is refused at this many
/// bytes, naming its line, instead of being held whole.
pub const MAX_LINE: usize = 256 << 20;

/// The UTF-8 byte order mark, which some editors write first; readers skip it.
pub const BOM: char = '\u{feff}';

/// How much one read may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes in all.
    pub max_bytes: u64,
    /// Bytes on one line (its line end not counted).
    pub max_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: MAX_INPUT,
            max_line: MAX_LINE,
        }
    }
}

/// `text` without a leading UTF-8 byte order mark.
#[must_use]
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// The lines of `text`, numbered from 1, each ended by LF, CRLF or a lone CR (without its
/// line end); no empty last line after a final line end, as [`str::lines`].
#[must_use]
pub fn numbered_lines(text: &str) -> Lines<'_> {
    Lines {
        rest: text,
        number: 0,
    }
}

/// The iterator of [`numbered_lines`].
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    rest: &'a str,
    number: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        self.number += 1;
        let rest = self.rest;
        match rest.find(['\n', '\r']) {
            None => {
                self.rest = "";
                Some((self.number, rest))
            }
            Some(i) => {
                let end = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                self.rest = &rest[i + end..];
                Some((self.number, &rest[..i]))
            }
        }
    }
}

/// The 1-based line `offset` falls on and its 1-based byte in that line, counting line ends
/// as [`numbered_lines`] does.
#[must_use]
pub fn line_and_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let mut line = 1;
    let mut start = 0;
    let mut i = 0;
    while i < before.len() {
        match before[i] {
            b'\r' if before.get(i + 1) == Some(&b'\n') => {
                line += 1;
                i += 2;
                start = i;
                continue;
            }
            // A CR last in `before` whose LF is `offset` itself: the line ends there.
            b'\r' | b'\n' => {
                line += 1;
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    (line, before.len() - start + 1)
}

/// Where a streaming read is in its input: the line and how long it is so far.
struct Position {
    line: usize,
    line_len: usize,
    after_cr: bool,
}

/// Reads `reader` whole, at most `limits.max_bytes` bytes and `limits.max_line` bytes on any
/// line, stopping at the first byte past a limit (so `/dev/zero` or a line of garbage is
/// refused without being held). A UTF-16 byte order mark and a NUL byte (never in JSON text,
/// always in binary input) are refused at once, naming their line.
///
/// # Errors
/// A [`TraceError`] naming `name` and, unless the whole input is at fault, the line.
pub fn read_bounded<R: Read>(name: &str, reader: R, limits: Limits) -> Result<Vec<u8>, TraceError> {
    read_bounded_with(name, reader, limits, 0)
}

/// [`read_bounded`], with room for `expected` bytes reserved up front (a regular file's
/// length, from its metadata).
///
/// # Errors
/// As [`read_bounded`].
pub fn read_bounded_with<R: Read>(
    name: &str,
    reader: R,
    limits: Limits,
    expected: u64,
) -> Result<Vec<u8>, TraceError> {
    let err = |line: usize, message: String| TraceError {
        file: name.to_owned(),
        line,
        message,
    };
    let mut out = Vec::new();
    let reserve = |out: &mut Vec<u8>, n: usize| {
        out.try_reserve(n).map_err(|_| {
            err(
                0,
                format!(
                    "cannot hold {} bytes in memory (read so far: {})",
                    out.len() + n,
                    out.len()
                ),
            )
        })
    };
    reserve(
        &mut out,
        usize::try_from(expected.min(limits.max_bytes)).unwrap_or(0),
    )?;
    let mut reader = reader.take(limits.max_bytes.saturating_add(1));
    let mut chunk = vec![0u8; 64 * 1024];
    let mut at = Position {
        line: 1,
        line_len: 0,
        after_cr: false,
    };
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(0, e.to_string())),
        };
        if out.len() as u64 + n as u64 > limits.max_bytes {
            return Err(err(
                0,
                format!(
                    "larger than {} bytes, the most reconcile-sim reads",
                    limits.max_bytes
                ),
            ));
        }
        let bytes = &chunk[..n];
        if out.is_empty() && (bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]))
        {
            return Err(err(
                1,
                "starts with a UTF-16 byte order mark: a trace or capture is UTF-8 text".into(),
            ));
        }
        for &b in bytes {
            match b {
                b'\n' if at.after_cr => at.after_cr = false,
                b'\n' | b'\r' => {
                    at.line += 1;
                    at.line_len = 0;
                    at.after_cr = b == b'\r';
                }
                0 => {
                    return Err(err(
                        at.line,
                        format!(
                            "a NUL byte at byte {} of the line: a trace or capture is JSON text, \
                             which never holds one (binary input?)",
                            at.line_len + 1
                        ),
                    ));
                }
                _ => {
                    at.after_cr = false;
                    at.line_len += 1;
                    if at.line_len > limits.max_line {
                        return Err(err(
                            at.line,
                            format!(
                                "longer than {} bytes, the most one line may hold",
                                limits.max_line
                            ),
                        ));
                    }
                }
            }
        }
        reserve(&mut out, n)?;
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        max_bytes: 1 << 20,
        max_line: 1 << 10,
    };

    #[test]
    fn line_ends_of_every_kind_number_lines_alike() {
        let text = "a\nb\r\nc\rd\r\re";
        let lines: Vec<_> = numbered_lines(text).collect();
        assert_eq!(
            lines,
            [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, ""), (6, "e")]
        );
        assert_eq!(numbered_lines("x\n").count(), 1);
        let offset = text.find('e').unwrap();
        assert_eq!(line_and_column(text.as_bytes(), offset), (6, 1));
        assert_eq!(line_and_column(b"ab\r\ncd", 5), (2, 2));
        assert_eq!(line_and_column(b"ab", 0), (1, 1));
    }

    #[test]
    fn a_bom_is_stripped() {
        assert_eq!(strip_bom("\u{feff}{}"), "{}");
        assert_eq!(strip_bom("{}"), "{}");
    }

    #[test]
    fn an_over_long_line_is_named_without_reading_on() {
        // Three good lines, then one of garbage far past the cap: stopped at the cap + 1.
        let reader =
            io::Cursor::new(b"{}\r\n{}\r{}\n".to_vec()).chain(io::repeat(b'x').take(1 << 30));
        let mut counted = Counting {
            inner: reader,
            read: 0,
        };
        let e = read_bounded("x", &mut counted, SMALL).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x:4: longer than 1024 bytes, the most one line may hold"
        );
        assert!(counted.read < 128 * 1024, "read {} bytes", counted.read);
    }

    #[test]
    fn an_endless_input_is_refused_at_the_limit_plus_one() {
        let lines = io::repeat(b'\n').take(u64::MAX);
        let mut counted = Counting {
            inner: lines,
            read: 0,
        };
        let e = read_bounded("p", &mut counted, SMALL).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p: larger than 1048576 bytes, the most reconcile-sim reads"
        );
        assert!(counted.read <= SMALL.max_bytes + 1, "read {}", counted.read);
    }

    #[test]
    fn zeros_and_utf16_are_refused_at_once() {
        let e = read_bounded("z", io::repeat(0).take(u64::MAX), SMALL).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(
            e.message.starts_with("a NUL byte at byte 1 of the line"),
            "{e}"
        );
        let e = read_bounded("u", &b"\xff\xfe{\0}\0"[..], SMALL).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("u:1: starts with a UTF-16 byte order mark"),
            "{e}"
        );
        let e = read_bounded("n", &b"{}\r\n{\0}"[..], SMALL).unwrap_err();
        assert_eq!((e.line, e.message.contains("byte 2")), (2, true), "{e}");
    }

    #[test]
    fn input_within_the_limits_is_read_whole() {
        let text = b"\xef\xbb\xbf{}\r\n{}\r{}\n".to_vec();
        assert_eq!(read_bounded("x", &text[..], SMALL).unwrap(), text);
    }

    /// Counts the bytes handed out.
    struct Counting<R> {
        inner: R,
        read: u64,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }
}
