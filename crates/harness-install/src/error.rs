use std::path::PathBuf;

/// Result alias for this crate.
pub type Result<T, E = InstallError> = std::result::Result<T, E>;

/// Everything that can go wrong while finding, downloading or extracting the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// No cache directory could be chosen.
    #[error(
        "cannot choose a cache directory for the harness: set AGUI_ANTIGRAVITY_CACHE (or HOME / XDG_CACHE_HOME)"
    )]
    NoCacheDir,

    /// The Python interpreter used for `pip` could not be started.
    #[error(
        "could not run `{python} -m pip`: {source}. Install Python 3 with pip (for example `apt install python3-pip`), \
         point AGUI_ANTIGRAVITY_PYTHON at an interpreter that has pip, or set ANTIGRAVITY_HARNESS_PATH to an existing localharness binary"
    )]
    PythonMissing {
        /// The interpreter that was tried.
        python: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },

    /// `pip download` ran but failed (usually no network access to PyPI, or no pip module).
    #[error(
        "pip could not download the google-antigravity wheel ({status}); command: `{command}`. \
         Check that pip is installed for that interpreter (for example `apt install python3-pip`) and that \
         PyPI is reachable (a proxy may need PIP_INDEX_URL), or set ANTIGRAVITY_HARNESS_PATH to an existing \
         localharness binary. pip said:\n{stderr_tail}"
    )]
    PipFailed {
        /// The command line that was run.
        command: String,
        /// Its exit status.
        status: String,
        /// The last lines pip wrote to stderr.
        stderr_tail: String,
    },

    /// pip succeeded but no wheel for the requested version appeared.
    #[error("no google-antigravity {version} wheel for this platform was found in {} after pip ran", dir.display())]
    WheelNotFound {
        /// The requested version.
        version: String,
        /// Where the wheel was expected.
        dir: PathBuf,
    },

    /// The wheel is not a readable zip archive.
    #[error("{} is not a readable wheel: {source}", path.display())]
    Zip {
        /// The wheel file.
        path: PathBuf,
        /// The archive error.
        #[source]
        source: zip::result::ZipError,
    },

    /// A file expected inside the wheel is missing.
    #[error("{} does not contain {member}; is it a google-antigravity wheel for this platform?", wheel.display())]
    MissingMember {
        /// The wheel file.
        wheel: PathBuf,
        /// The missing member path.
        member: String,
    },

    /// The wheel's `RECORD` has no usable sha256 for a member.
    #[error("the RECORD of {} lists no sha256 for {member}", wheel.display())]
    NoRecordedHash {
        /// The wheel file.
        wheel: PathBuf,
        /// The member without a hash.
        member: String,
    },

    /// A member's content does not match the hash recorded in the wheel.
    #[error(
        "{member} in {} does not match the sha256 in the wheel's RECORD (expected {expected}, got {actual}); \
         delete the wheel and run `cargo xtask fetch-harness` again",
        wheel.display()
    )]
    HashMismatch {
        /// The wheel file.
        wheel: PathBuf,
        /// The member that failed verification.
        member: String,
        /// The hash listed in `RECORD` (hex).
        expected: String,
        /// The hash of the extracted bytes (hex).
        actual: String,
    },

    /// A filesystem operation failed.
    #[error("could not {action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "create directory".
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl InstallError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }
}

/// The last `lines` lines of `text`, for error messages.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
