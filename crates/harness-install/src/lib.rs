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

/// Downloads (if needed) and installs one harness version into a [`Cache`].
#[derive(Debug, Clone)]
pub struct Installer {
    cache: Cache,
    version: String,
    python: String,
}

impl Installer {
    /// An installer for `version` into `cache`, using `$AGUI_ANTIGRAVITY_PYTHON` or `python3`.
    pub fn new(cache: Cache, version: impl Into<String>) -> Self {
        let python = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_owned());
        Self {
            cache,
            version: version.into(),
            python,
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
