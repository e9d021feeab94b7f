//! Finding the `localharness` binary, and sharing one lookup between the pool's opens.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use harness_install::{Cache, DEFAULT_VERSION, Installer};

use crate::blocking::off_runtime;
use crate::error::{HarnessError, Result};

/// Environment variable naming the harness binary explicitly.
pub const HARNESS_PATH_ENV: &str = "ANTIGRAVITY_HARNESS_PATH";

/// Finds the harness binary, in order: `explicit` (from the caller's options),
/// `$ANTIGRAVITY_HARNESS_PATH`, the project cache (`cargo xtask fetch-harness`), a
/// `google-antigravity` wheel installed in a Python environment, `localharness` on `PATH`.
///
/// The error lists every place tried and why it did not qualify. Blocking (it may run
/// `python3`): async code calls it through `tokio::task::spawn_blocking`, as
/// [`crate::HarnessProcess::spawn`] and [`crate::HarnessPool`] do.
pub fn find_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    let mut tried = String::new();
    let mut consider = |label: &str, candidate: Option<PathBuf>| -> Option<PathBuf> {
        match candidate {
            None => {
                let _ = writeln!(tried, "  - {label}: not set / not found");
                None
            }
            Some(path) => match usable(&path) {
                Ok(()) => Some(path),
                Err(why) => {
                    let _ = writeln!(tried, "  - {label}: {} ({why})", path.display());
                    None
                }
            },
        }
    };
    if let Some(path) = explicit {
        // An explicit choice that does not work is an error, not a reason to look elsewhere.
        return consider("configured binary", Some(path.to_owned())).ok_or_else(|| {
            HarnessError::NotFound {
                tried: tried.clone(),
            }
        });
    }
    let from_env = std::env::var_os(HARNESS_PATH_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    if let Some(path) = consider(&format!("${HARNESS_PATH_ENV}"), from_env) {
        return Ok(path);
    }
    // Only a binary this project extracted and checked against the wheel's RECORD is run.
    let cache = Cache::from_env().ok();
    let cached = cache
        .as_ref()
        .and_then(|c| c.installed_binary(DEFAULT_VERSION));
    let unverified = cached.is_none()
        && cache
            .as_ref()
            .is_some_and(|c| c.binary_path(DEFAULT_VERSION).exists());
    let label = if unverified {
        "project cache (a binary is there but not verified: run `cargo xtask fetch-harness --verify`)"
    } else {
        "project cache (cargo xtask fetch-harness)"
    };
    if let Some(path) = consider(label, cached) {
        return Ok(path);
    }
    if let Some(path) = consider(
        "installed google-antigravity wheel (python3)",
        python_wheel_binary(),
    ) {
        return Ok(path);
    }
    if let Some(path) = consider("localharness on PATH", on_path("localharness")) {
        return Ok(path);
    }
    Err(HarnessError::NotFound { tried })
}

/// Like [`find_binary`], but installs the pinned version into the project cache (downloading
/// the wheel with pip) when nothing is found. Used by the server so a fresh machine works.
/// Blocking, for minutes on a slow network: async code calls it through `spawn_blocking`.
pub fn find_or_install_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    match find_binary(explicit) {
        Err(HarnessError::NotFound { .. }) if explicit.is_none() => {
            tracing::info!(
                "no localharness found; installing google-antigravity {DEFAULT_VERSION} from PyPI"
            );
            Ok(Installer::new(Cache::from_env()?, DEFAULT_VERSION).install()?)
        }
        other => other,
    }
}

/// The binary for opens that name none. Looking may run `python3`, so it happens off the
/// runtime, one lookup at a time: opens that arrive while a lookup runs take its result, a
/// failure included; an open that arrives after a failure looks again (the binary may have been
/// installed since).
pub(crate) struct SharedDiscovery {
    find: Arc<dyn Fn() -> Result<PathBuf> + Send + Sync>,
    /// Lookups finished so far: an open that waited while one finished shares its outcome.
    finished: AtomicU64,
    /// The last outcome (a failure as its message, to be shared).
    last: tokio::sync::Mutex<Option<std::result::Result<PathBuf, String>>>,
}

impl SharedDiscovery {
    /// Looks with [`find_binary`].
    pub(crate) fn new() -> Self {
        Self::with(|| find_binary(None))
    }

    /// Looks with `find` (tests use a slow or failing stand-in).
    pub(crate) fn with(find: impl Fn() -> Result<PathBuf> + Send + Sync + 'static) -> Self {
        Self {
            find: Arc::new(find),
            finished: AtomicU64::new(0),
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The binary, looked up on first use.
    pub(crate) async fn binary(&self) -> Result<PathBuf> {
        let seen = self.finished.load(Ordering::Acquire);
        let mut last = self.last.lock().await;
        match &*last {
            Some(Ok(path)) => return Ok(path.clone()),
            Some(Err(reason)) if self.finished.load(Ordering::Acquire) > seen => {
                return Err(HarnessError::BootFailed {
                    reason: reason.clone(),
                });
            }
            _ => {}
        }
        let find = self.find.clone();
        let found = off_runtime(move || find())
            .await
            .ok_or_else(|| HarnessError::BootFailed {
                reason: "the runtime shut down while looking for the harness binary".into(),
            })?;
        *last = Some(match &found {
            Ok(path) => Ok(path.clone()),
            Err(e) => Err(e.to_string()),
        });
        self.finished.fetch_add(1, Ordering::Release);
        found
    }
}

fn usable(path: &Path) -> Result<(), &'static str> {
    let meta = std::fs::metadata(path).map_err(|_| "does not exist")?;
    if !meta.is_file() {
        return Err("not a file");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err("not executable");
        }
    }
    Ok(())
}

/// The binary inside a `google-antigravity` package importable by `python3`, if any.
fn python_wheel_binary() -> Option<PathBuf> {
    let python = harness_install::python_interpreter();
    let script = "import importlib.util as u, os\n\
                  s = u.find_spec('google.antigravity')\n\
                  print(os.path.join(list(s.submodule_search_locations)[0], 'bin', 'localharness') if s else '')";
    let output = Command::new(python).args(["-c", script]).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let path = text.trim();
    (output.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// The first executable `name` on `PATH` (a non-executable file of that name is skipped, as
/// a shell would).
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| usable(p).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_binary_that_does_not_exist_is_an_error_naming_it() {
        let err = find_binary(Some(Path::new("/nonexistent/localharness")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/localharness (does not exist)"),
            "{err}"
        );
        assert!(err.contains("cargo xtask fetch-harness"), "{err}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn racing_lookups_share_one_failure_and_a_later_one_looks_again() {
        let lookups = Arc::new(AtomicU64::new(0));
        let counted = lookups.clone();
        let discovery = SharedDiscovery::with(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(100));
            Err(HarnessError::NotFound {
                tried: "  - nowhere\n".into(),
            })
        });
        let racing = futures_util::future::join_all((0..3).map(|_| discovery.binary())).await;
        assert_eq!(lookups.load(Ordering::SeqCst), 1);
        for result in racing {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("nowhere"), "{err}");
        }
        assert!(discovery.binary().await.is_err());
        assert_eq!(lookups.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_explicit_file_that_is_not_executable_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("localharness");
        std::fs::write(&file, "x").unwrap();
        let err = find_binary(Some(&file)).unwrap_err().to_string();
        assert!(err.contains("not executable"), "{err}");
    }
}
