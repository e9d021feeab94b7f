//! Installing the Antigravity `localharness` binary from the `google-antigravity` wheel.
//!
//! The harness is only distributed inside the PyPI wheel `google-antigravity`. This crate
//! downloads that wheel with `pip` (the one tool every machine with PyPI access has), checks the
//! binary against the sha256 the wheel's own `RECORD` lists, and keeps it in a cache directory
//! the project owns. Once cached, everything works offline.
//!
//! It is a leaf crate on purpose: `cargo xtask` (which regenerates `harness-proto`) and the
//! server both use it, so it must not depend on generated code.

mod cache;
mod error;
mod wheel;

pub use cache::{CACHE_ENV, Cache};
pub use error::{InstallError, Result};
pub use wheel::Wheel;

use std::path::PathBuf;
use std::process::Command;

/// The harness version everything in this project was verified against.
pub const DEFAULT_VERSION: &str = "0.1.22";

/// Path of the harness binary inside the wheel.
pub const BINARY_MEMBER: &str = "google/antigravity/bin/localharness";

/// Environment variable naming the Python interpreter used to run `pip` (default `python3`).
pub const PYTHON_ENV: &str = "AGUI_ANTIGRAVITY_PYTHON";

/// The Python interpreter that runs `pip` (and can locate an installed wheel):
/// `$AGUI_ANTIGRAVITY_PYTHON`, else `python3`. One definition, so every caller agrees.
pub fn python_interpreter() -> String {
    std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_owned())
}

/// A name suffix no other install in this machine uses at the same time (process id plus a
/// counter), so concurrent installs — even two in one process — never share a scratch path.
pub(crate) fn unique_suffix() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// Downloads (if needed) and installs one harness version into a [`Cache`].
#[derive(Debug, Clone)]
pub struct Installer {
    cache: Cache,
    version: String,
    python: String,
}

impl Installer {
    /// An installer for `version` into `cache`, running pip with [`python_interpreter`].
    pub fn new(cache: Cache, version: impl Into<String>) -> Self {
        Self {
            cache,
            version: version.into(),
            python: python_interpreter(),
        }
    }

    /// The cache this installer writes into.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The harness version this installer installs.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Returns the path of a verified, executable harness binary, installing it if needed.
    ///
    /// Idempotent: a binary already installed and verified is returned without touching the
    /// network. A binary whose recorded hash does not match is replaced.
    pub fn install(&self) -> Result<PathBuf> {
        if let Some(path) = self.cache.installed_binary(&self.version) {
            return Ok(path);
        }
        let wheel_path = self.ensure_wheel()?;
        let mut wheel = Wheel::open(&wheel_path)?;
        let dest = self.cache.binary_path(&self.version);
        let digest = wheel.extract_verified(BINARY_MEMBER, &dest, 0o755)?;
        self.cache.mark_verified(&self.version, &digest)?;
        tracing::info!(path = %dest.display(), version = %self.version, "installed localharness");
        Ok(dest)
    }

    /// Re-hashes an installed binary against the wheel and reinstalls it on mismatch.
    pub fn verify_or_reinstall(&self) -> Result<PathBuf> {
        if let Some(path) = self.cache.installed_binary(&self.version) {
            let wheel_path = self.ensure_wheel()?;
            let mut wheel = Wheel::open(&wheel_path)?;
            let expected = wheel.record_digest(BINARY_MEMBER)?;
            if wheel::sha256_file(&path)? == expected {
                return Ok(path);
            }
            tracing::warn!(path = %path.display(), "installed localharness does not match its wheel; reinstalling");
            self.cache.clear_verified(&self.version)?;
        }
        self.install()
    }

    /// Returns the cached wheel for this version, downloading it with pip when absent.
    pub fn ensure_wheel(&self) -> Result<PathBuf> {
        if let Some(path) = self.cache.find_wheel(&self.version)? {
            return Ok(path);
        }
        let staging = self.cache.staging_dir()?;
        let requirement = format!("google-antigravity=={}", self.version);
        let args = [
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--dest",
        ];
        let mut command = Command::new(&self.python);
        command.args(args).arg(&staging).arg(&requirement);
        let shown = format!(
            "{} {} {} {requirement}",
            self.python,
            args.join(" "),
            staging.display()
        );
        tracing::info!(command = %shown, "downloading the google-antigravity wheel");
        let output = command
            .output()
            .map_err(|source| InstallError::PythonMissing {
                python: self.python.clone(),
                source,
            })?;
        if !output.status.success() {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(InstallError::PipFailed {
                command: shown,
                status: output.status.to_string(),
                stderr_tail: error::tail(&String::from_utf8_lossy(&output.stderr), 15),
            });
        }
        let moved = self.cache.adopt_wheels(&staging, &self.version);
        let _ = std::fs::remove_dir_all(&staging);
        moved?;
        self.cache
            .find_wheel(&self.version)?
            .ok_or_else(|| InstallError::WheelNotFound {
                version: self.version.clone(),
                dir: self.cache.wheels_dir(),
            })
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use sha2::{Digest as _, Sha256};

    use super::*;

    const PAYLOAD: &[u8] = b"#!/bin/sh\necho harness\n";

    /// An installer whose `python` is given (the tests never reach PyPI).
    fn installer(cache: &Cache, python: &str) -> Installer {
        Installer {
            cache: cache.clone(),
            version: DEFAULT_VERSION.to_owned(),
            python: python.to_owned(),
        }
    }

    /// Puts a wheel holding [`PAYLOAD`] as the harness binary into the cache, as pip would.
    fn cache_wheel(cache: &Cache) -> PathBuf {
        let dir = cache.wheels_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!(
            "google_antigravity-{DEFAULT_VERSION}-py3-none-manylinux_2_17_x86_64.whl"
        ));
        let digest =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(PAYLOAD));
        let record = format!("{BINARY_MEMBER},sha256={digest},{}\n", PAYLOAD.len());
        wheel::tests::write_zip(
            &path,
            &[
                (BINARY_MEMBER, PAYLOAD),
                (
                    &format!("google_antigravity-{DEFAULT_VERSION}.dist-info/RECORD"),
                    record.as_bytes(),
                ),
            ],
        );
        path
    }

    #[test]
    fn installs_from_a_cached_wheel_offline_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let wheel = cache_wheel(&cache);
        // An interpreter that cannot start: any attempt to run pip would fail the install.
        let installer = installer(&cache, "/nonexistent/python3");

        let path = installer.install().unwrap();
        assert_eq!(path, cache.binary_path(DEFAULT_VERSION));
        assert_eq!(std::fs::read(&path).unwrap(), PAYLOAD);
        // Recorded as verified, and executable.
        assert_eq!(cache.installed_binary(DEFAULT_VERSION), Some(path.clone()));

        // Once installed, neither the wheel nor pip is needed again.
        std::fs::remove_file(wheel).unwrap();
        assert_eq!(installer.install().unwrap(), path);
        assert_eq!(std::fs::read(&path).unwrap(), PAYLOAD);
    }

    #[test]
    fn verify_or_reinstall_repairs_a_corrupted_binary() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        cache_wheel(&cache);
        let installer = installer(&cache, "/nonexistent/python3");
        let path = installer.install().unwrap();
        std::fs::write(&path, b"corrupted").unwrap();

        assert_eq!(installer.verify_or_reinstall().unwrap(), path);
        assert_eq!(std::fs::read(&path).unwrap(), PAYLOAD);
    }

    #[test]
    fn a_missing_python_is_an_error_that_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let err = installer(&cache, "/nonexistent/python3")
            .install()
            .unwrap_err();
        assert!(matches!(err, InstallError::PythonMissing { .. }), "{err}");
        let message = err.to_string();
        for hint in [PYTHON_ENV, "ANTIGRAVITY_HARNESS_PATH", "pip"] {
            assert!(message.contains(hint), "{message:?} should mention {hint}");
        }
        assert!(cache.installed_binary(DEFAULT_VERSION).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_failing_pip_is_an_error_that_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        // `false -m pip download …` exits 1, like pip without network access.
        let err = installer(&cache, "false").install().unwrap_err();
        assert!(matches!(err, InstallError::PipFailed { .. }), "{err}");
        let message = err.to_string();
        for hint in [
            "PyPI",
            "python3-pip",
            "ANTIGRAVITY_HARNESS_PATH",
            "pip download",
        ] {
            assert!(message.contains(hint), "{message:?} should mention {hint}");
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(leftovers.is_empty(), "staging left behind: {leftovers:?}");
    }
}
