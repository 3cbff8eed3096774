//! Progress bars (indicatif) on stderr, only when stderr is a terminal and the command is not
//! `-q`: a log or a pipe gets no redraws, and stdout is never touched.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// `explore`'s bar over `total` seeds, or `None` when stderr is no terminal or under `-q`.
#[must_use]
pub fn seeds(total: u64, quiet: bool) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} seeds  {elapsed_precise}, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}

/// `simulate`'s and `replay`'s spinner, counting the step lines as they are written, or `None`
/// under `-q`, when stderr is no terminal, or when stdout is one (the lines themselves show
/// the progress there).
#[must_use]
pub fn steps(quiet: bool) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() || std::io::stdout().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} steps  {elapsed_precise}, {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    Some(bar)
}

/// A sink that moves `bar` by the lines written through it.
pub struct Counting {
    inner: Box<dyn std::io::Write>,
    bar: ProgressBar,
}

impl Counting {
    /// `inner`, counted on `bar`.
    #[must_use]
    pub fn new(inner: Box<dyn std::io::Write>, bar: ProgressBar) -> Self {
        Counting { inner, bar }
    }
}

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let lines = buf[..n].iter().filter(|&&b| b == b'\n').count();
        self.bar.inc(lines as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Where a run's step lines go, counted on a spinner when [`steps`] gives one; the spinner
/// is returned to be cleared at the end.
#[must_use]
pub fn step_sink(quiet: bool) -> (Box<dyn std::io::Write>, Option<ProgressBar>) {
    let sink = crate::io::step_sink(quiet);
    match steps(quiet) {
        Some(bar) => (Box::new(Counting::new(sink, bar.clone())), Some(bar)),
        None => (sink, None),
    }
}

/// A spinner saying `what` is under way, with the time it has taken, for the commands with no
/// steps to count (`report` builds its page whole, `import` converts a file whole); `None`
/// under `-q` or when stderr is no terminal. Drawn at once, then ten times a second.
#[must_use]
pub fn working(what: &str, quiet: bool) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}  {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(what.to_owned());
    bar.tick();
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    Some(bar)
}
