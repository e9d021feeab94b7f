//! How a harness process ended: a leaf every layer may name (the process that watches it, the
//! events and errors that report it).

/// How a harness process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    /// Process id.
    pub pid: u32,
    /// Exit status as text (`exit status: 0`, `signal: 9 (SIGKILL)`).
    pub status: String,
    /// Exit code, if it exited normally.
    pub code: Option<i32>,
    /// The last stderr lines, to explain a crash.
    pub stderr_tail: String,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the harness process (pid {}) exited ({})",
            self.pid, self.status
        )?;
        if !self.stderr_tail.is_empty() {
            write!(f, ". Stderr tail:\n{}", self.stderr_tail)?;
        }
        Ok(())
    }
}
