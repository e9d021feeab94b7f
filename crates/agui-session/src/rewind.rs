//! Rewinding a fork's files: what the agent's file tools changed after the fork point, undone.
//!
//! What a rewind needs is already kept: every change the file tools made is a `file_change`
//! activity in the thread's messages, with its path and a unified diff (3 lines of context).
//! A rewind reverse-applies those diffs, newest first, to the files as they are now: each hunk's
//! new side must be found where the diff put it, else the file changed since (a command, or the
//! user) and it is left alone and reported. A file a tool created is removed. So nothing more
//! is stored for rewinds (no per-turn copies: no disk beyond the messages, hence nothing to
//! bound within `workspace_max_mb`), at the price that a file changed since by other means is
//! not restored. Commands' changes are never rewound: a rewind says how many commands ran after
//! the point.
//!
//! Pure and total: no input makes it panic.

use std::collections::BTreeMap;

use agui_types::Message;
use serde_json::Value;

/// One file change a file tool made, from its activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileChange {
    /// The path the tool named (absolute, as the agent saw it).
    pub(crate) path: String,
    /// The unified diff.
    pub(crate) diff: String,
}

/// What was done after a point, oldest first: the file changes, and how many commands ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct After {
    /// The file tools' changes, oldest first.
    pub(crate) changes: Vec<FileChange>,
    /// Commands that ran (their changes are not rewound).
    pub(crate) commands: usize,
}

/// The file changes and commands among `messages` (activities of the agent's tools).
pub(crate) fn after(messages: &[Message]) -> After {
    let mut found = After::default();
    for message in messages {
        let Message::Activity(activity) = message else {
            continue;
        };
        match activity.activity_type.as_str() {
            agui_translate::FILE_CHANGE_ACTIVITY => {
                let text = |key: &str| {
                    activity
                        .content
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                found.changes.push(FileChange {
                    path: text("path"),
                    diff: text("diff"),
                });
            }
            agui_translate::COMMAND_ACTIVITY => found.commands += 1,
            _ => {}
        }
    }
    found
}

/// What rewinding one file comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restore {
    /// Write this content.
    Write(Vec<u8>),
    /// Remove the file (a tool created it).
    Remove,
}

/// The changes to one file, newest first, undone on its `current` content (`None`: it does not
/// exist now). `Err` says why it cannot be restored.
pub(crate) fn undo(current: Option<&[u8]>, newest_first: &[&str]) -> Result<Restore, String> {
    let Some(current) = current else {
        return Err("it no longer exists".into());
    };
    let text = std::str::from_utf8(current).map_err(|_| "it is not text now".to_owned())?;
    let trailing_newline = text.ends_with('\n');
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for (k, diff) in newest_first.iter().enumerate() {
        let created = diff.starts_with("--- /dev/null");
        let hunks = parse(diff).ok_or_else(|| "its recorded change cannot be read".to_owned())?;
        for hunk in hunks.iter().rev() {
            let new_side: Vec<&str> = hunk
                .lines
                .iter()
                .filter(|(op, _)| *op != '-')
                .map(|(_, t)| t.as_str())
                .collect();
            let old_side: Vec<String> = hunk
                .lines
                .iter()
                .filter(|(op, _)| *op != '+')
                .map(|(_, t)| t.clone())
                .collect();
            let at = if new_side.is_empty() {
                hunk.new_start
            } else {
                hunk.new_start.saturating_sub(1)
            };
            let end = at + new_side.len();
            let here = lines.get(at..end).map(|s| s.iter().map(String::as_str));
            if !here.is_some_and(|h| h.eq(new_side.iter().copied())) {
                return Err("it was changed since by other means (a command, or an upload)".into());
            }
            lines.splice(at..end, old_side);
        }
        if created && k + 1 == newest_first.len() {
            // The oldest change created it: nothing of it was there before.
            return if lines.is_empty() {
                Ok(Restore::Remove)
            } else {
                Err("it was changed since by other means (a command, or an upload)".into())
            };
        }
    }
    let mut out = lines.join("\n");
    if trailing_newline && !out.is_empty() {
        out.push('\n');
    }
    Ok(Restore::Write(out.into_bytes()))
}

/// The changes of `after`, grouped by path, each newest first.
pub(crate) fn by_path(changes: &[FileChange]) -> BTreeMap<String, Vec<&str>> {
    let mut paths: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for change in changes.iter().rev() {
        paths
            .entry(change.path.clone())
            .or_default()
            .push(change.diff.as_str());
    }
    paths
}

struct Hunk {
    new_start: usize,
    lines: Vec<(char, String)>,
}

/// The hunks of a unified diff; `None` when it is not one.
fn parse(diff: &str) -> Option<Vec<Hunk>> {
    let mut hunks = Vec::new();
    for line in diff.lines() {
        if line.starts_with("--- ") || line.starts_with("+++ ") {
            continue;
        }
        if let Some(header) = line.strip_prefix("@@ ") {
            // -a,b +c,d @@
            let new = header.split_whitespace().nth(1)?.strip_prefix('+')?;
            let start = new.split(',').next()?.parse().ok()?;
            hunks.push(Hunk {
                new_start: start,
                lines: Vec::new(),
            });
            continue;
        }
        let hunk = hunks.last_mut()?;
        let mut chars = line.chars();
        let op = chars.next().unwrap_or(' ');
        if !matches!(op, ' ' | '+' | '-') {
            return None;
        }
        hunk.lines.push((op, chars.as_str().to_owned()));
    }
    Some(hunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDIT: &str = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    const CREATE: &str = "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n";

    #[test]
    fn an_edit_is_undone() {
        let now = b"one\nTWO\nthree\n";
        assert_eq!(
            undo(Some(now), &[EDIT]),
            Ok(Restore::Write(b"one\ntwo\nthree\n".to_vec()))
        );
    }

    #[test]
    fn two_edits_are_undone_newest_first() {
        let second = "--- a/f.txt\n+++ b/f.txt\n@@ -2,2 +2,3 @@\n TWO\n+four\n three\n";
        let now = b"one\nTWO\nfour\nthree\n";
        assert_eq!(
            undo(Some(now), &[second, EDIT]),
            Ok(Restore::Write(b"one\ntwo\nthree\n".to_vec()))
        );
    }

    #[test]
    fn a_created_file_is_removed_and_one_changed_since_is_left_alone() {
        assert_eq!(
            undo(Some(b"hello\nworld\n"), &[CREATE]),
            Ok(Restore::Remove)
        );
        assert!(undo(Some(b"hello\nthere\n"), &[CREATE]).is_err());
        assert!(undo(Some(b"one\nTHREE\nthree\n"), &[EDIT]).is_err());
        assert!(undo(None, &[EDIT]).is_err());
        assert!(undo(Some(b"\xff\xfe"), &[EDIT]).is_err());
        assert!(undo(Some(b"x"), &["@@ nonsense"]).is_err());
    }
}
