use std::path::{Path, PathBuf};

use crate::error::{InstallError, Result};

/// Environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "AGUI_ANTIGRAVITY_CACHE";

/// The directory where downloaded wheels and installed harness binaries live.
///
/// Layout: `wheels/google_antigravity-<version>-….whl` and `harness/<version>/localharness`
/// (plus `localharness.sha256`, written only after the binary was verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The default cache: `$AGUI_ANTIGRAVITY_CACHE`, else `$XDG_CACHE_HOME/agui-antigravity`,
    /// else `$HOME/.cache/agui-antigravity`.
    pub fn from_env() -> Result<Self> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let root = var(CACHE_ENV)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("agui-antigravity")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("agui-antigravity")))
            .ok_or(InstallError::NoCacheDir)?;
        Ok(Self { root })
    }

    /// A cache rooted at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where wheels are kept.
    pub fn wheels_dir(&self) -> PathBuf {
        self.root.join("wheels")
    }

    /// Where the binary of `version` is (or would be) installed.
    pub fn binary_path(&self, version: &str) -> PathBuf {
        self.root.join("harness").join(version).join("localharness")
    }

    fn marker_path(&self, version: &str) -> PathBuf {
        self.binary_path(version).with_extension("sha256")
    }

    /// The installed binary of `version`, if it was extracted and verified by this crate.
    pub fn installed_binary(&self, version: &str) -> Option<PathBuf> {
        let path = self.binary_path(version);
        (path.is_file() && self.marker_path(version).is_file() && is_executable(&path))
            .then_some(path)
    }

    pub(crate) fn mark_verified(&self, version: &str, digest: &[u8; 32]) -> Result<()> {
        let marker = self.marker_path(version);
        std::fs::write(&marker, format!("{}\n", hex::encode(digest)))
            .map_err(InstallError::io("write", &marker))
    }

    pub(crate) fn clear_verified(&self, version: &str) -> Result<()> {
        let marker = self.marker_path(version);
        match std::fs::remove_file(&marker) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(InstallError::io("remove", &marker)(e))
            }
            _ => Ok(()),
        }
    }

    /// The cached wheel of `version`, if any (any platform tag pip chose for this machine).
    pub fn find_wheel(&self, version: &str) -> Result<Option<PathBuf>> {
        let dir = self.wheels_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(InstallError::io("read directory", &dir)(e)),
        };
        let prefix = format!("google_antigravity-{version}-");
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
            })
            .collect();
        found.sort();
        Ok(found.pop())
    }

    /// A fresh private directory for pip to download into.
    pub(crate) fn staging_dir(&self) -> Result<PathBuf> {
        let dir = self
            .root
            .join(format!("staging-{}", crate::unique_suffix()));
        std::fs::create_dir_all(&dir).map_err(InstallError::io("create directory", &dir))?;
        Ok(dir)
    }

    /// Moves the wheels pip downloaded into `wheels/` (rename, so readers never see a partial file).
    pub(crate) fn adopt_wheels(&self, staging: &Path, version: &str) -> Result<()> {
        let dest_dir = self.wheels_dir();
        std::fs::create_dir_all(&dest_dir)
            .map_err(InstallError::io("create directory", &dest_dir))?;
        let prefix = format!("google_antigravity-{version}-");
        let entries =
            std::fs::read_dir(staging).map_err(InstallError::io("read directory", staging))?;
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            if name
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
            {
                let dest = dest_dir.join(&name);
                std::fs::rename(entry.path(), &dest)
                    .map_err(InstallError::io("move wheel to", &dest))?;
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_path: &Path) -> bool {
    true
}
