use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::error::{InstallError, Result};

/// An opened `google-antigravity` wheel.
pub struct Wheel {
    path: PathBuf,
    archive: zip::ZipArchive<File>,
}

impl std::fmt::Debug for Wheel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wheel")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Wheel {
    /// Opens the wheel at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(InstallError::io("open", path))?;
        let archive = zip::ZipArchive::new(file).map_err(|source| InstallError::Zip {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            archive,
        })
    }

    /// The wheel's file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Names of every member of the archive.
    pub fn member_names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .filter_map(|n| n.ok().map(|n| n.into_owned()))
            .collect()
    }

    /// Reads a whole member into memory.
    pub fn read_member(&mut self, member: &str) -> Result<Vec<u8>> {
        let mut file = self.member(member)?;
        let mut bytes = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0));
        file.read_to_end(&mut bytes)
            .map_err(InstallError::io("read from wheel", member))?;
        Ok(bytes)
    }

    fn member(&mut self, member: &str) -> Result<zip::read::ZipFile<'_, File>> {
        let wheel = self.path.clone();
        self.archive.by_name(member).map_err(|source| match source {
            zip::result::ZipError::FileNotFound => InstallError::MissingMember {
                wheel,
                member: member.to_owned(),
            },
            source => InstallError::Zip {
                path: wheel,
                source,
            },
        })
    }

    /// The sha256 of `member` as listed in the wheel's `*.dist-info/RECORD`.
    pub fn record_digest(&mut self, member: &str) -> Result<[u8; 32]> {
        let record_name = self
            .member_names()
            .into_iter()
            .find(|n| n.ends_with(".dist-info/RECORD"))
            .ok_or_else(|| InstallError::MissingMember {
                wheel: self.path.clone(),
                member: "*.dist-info/RECORD".to_owned(),
            })?;
        let record = String::from_utf8_lossy(&self.read_member(&record_name)?).into_owned();
        parse_record_digest(&record, member).ok_or_else(|| InstallError::NoRecordedHash {
            wheel: self.path.clone(),
            member: member.to_owned(),
        })
    }

    /// Extracts `member` to `dest` with Unix permissions `mode`, after checking it against the
    /// wheel's `RECORD`. Writes to a temporary file and renames it, so `dest` is never partial.
    pub fn extract_verified(&mut self, member: &str, dest: &Path, mode: u32) -> Result<[u8; 32]> {
        let expected = self.record_digest(member)?;
        let dir = dest.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(InstallError::io("create directory", dir))?;
        let tmp = dest.with_extension(format!("partial-{}", crate::unique_suffix()));
        let result = self.copy_hashed(member, &tmp, mode);
        let actual = match result {
            Ok(actual) => actual,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        if actual != expected {
            let _ = std::fs::remove_file(&tmp);
            return Err(InstallError::HashMismatch {
                wheel: self.path.clone(),
                member: member.to_owned(),
                expected: hex::encode(expected),
                actual: hex::encode(actual),
            });
        }
        std::fs::rename(&tmp, dest).map_err(InstallError::io("move into place", dest))?;
        Ok(actual)
    }

    fn copy_hashed(&mut self, member: &str, tmp: &Path, mode: u32) -> Result<[u8; 32]> {
        let mut out = File::create(tmp).map_err(InstallError::io("create", tmp))?;
        let mut input = self.member(member)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = input
                .read(&mut buf)
                .map_err(InstallError::io("read from wheel", member))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(InstallError::io("write", tmp))?;
        }
        out.flush().map_err(InstallError::io("write", tmp))?;
        set_mode(tmp, mode)?;
        Ok(hasher.finalize().into())
    }
}

/// Finds `member`'s `sha256=<urlsafe base64>` entry in a wheel `RECORD` (CSV: path,hash,size).
fn parse_record_digest(record: &str, member: &str) -> Option<[u8; 32]> {
    record.lines().find_map(|line| {
        let mut cols = line.rsplitn(3, ',');
        let (_size, hash, path) = (cols.next()?, cols.next()?, cols.next()?);
        if path.trim_matches('"') != member {
            return None;
        }
        let encoded = hash.strip_prefix("sha256=")?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded.trim_end_matches('='))
            .ok()?;
        bytes.try_into().ok()
    })
}

/// sha256 of a file on disk.
pub(crate) fn sha256_file(path: &Path) -> Result<[u8; 32]> {
    let mut file = File::open(path).map_err(InstallError::io("open", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(InstallError::io("read", path))?;
        if n == 0 {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&buf[..n]);
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(InstallError::io("chmod", path))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> Result<()> {
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const RECORD: &str = "google/antigravity/bin/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
google/antigravity/bin/localharness,sha256=ZalqKhHJFp8_HMmi2nFxgRKjWgqL5D5_KGYz1I7l7NM,131326296\n\
google_antigravity-0.1.22.dist-info/RECORD,,\n";

    fn check(member: &str, expected: Option<&str>) {
        let got = parse_record_digest(RECORD, member).map(hex::encode);
        assert_eq!(got.as_deref(), expected, "member {member}");
    }

    #[test]
    fn record_entries_are_parsed() {
        check(
            "google/antigravity/bin/localharness",
            Some("65a96a2a11c9169f3f1cc9a2da71718112a35a0a8be43e7f286633d48ee5ecd3"),
        );
        check(
            "google/antigravity/bin/__init__.py",
            Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        );
        check("google_antigravity-0.1.22.dist-info/RECORD", None);
        check("missing", None);
    }

    #[test]
    fn a_wheel_is_verified_on_extraction() {
        let dir = tempfile::tempdir().unwrap();
        let wheel_path = dir.path().join("w.whl");
        let payload = b"#!/bin/sh\necho harness\n";
        let digest: [u8; 32] = Sha256::digest(payload).into();
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        let other =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(b"other"));
        write_zip(
            &wheel_path,
            &[
                ("bin/tool", payload.as_slice()),
                (
                    "x.dist-info/RECORD",
                    format!(
                        "bin/tool,sha256={encoded},{}\nbad,sha256={other},5\n",
                        payload.len()
                    )
                    .as_bytes(),
                ),
                ("bad", b"not what the record says"),
            ],
        );
        let mut wheel = Wheel::open(&wheel_path).unwrap();
        let dest = dir.path().join("out/tool");
        assert_eq!(
            wheel.extract_verified("bin/tool", &dest, 0o755).unwrap(),
            digest
        );
        assert_eq!(std::fs::read(&dest).unwrap(), payload);
        assert_eq!(sha256_file(&dest).unwrap(), digest);

        let err = wheel
            .extract_verified("bad", &dir.path().join("out/bad"), 0o644)
            .unwrap_err();
        assert!(matches!(err, InstallError::HashMismatch { .. }), "{err}");
        assert!(
            !dir.path().join("out/bad").exists(),
            "a file that failed verification must not be left behind"
        );

        let err = wheel
            .extract_verified("absent", &dir.path().join("out/absent"), 0o644)
            .unwrap_err();
        assert!(matches!(err, InstallError::NoRecordedHash { .. }), "{err}");
    }

    /// Writes a zip archive (a stand-in wheel) with these members.
    pub(crate) fn write_zip(path: &Path, members: &[(&str, &[u8])]) {
        let mut zip = zip::ZipWriter::new(File::create(path).unwrap());
        for (name, bytes) in members {
            zip.start_file(
                *name,
                zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Stored),
            )
            .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }
}
