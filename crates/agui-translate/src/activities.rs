//! Activities: what a coding agent's built-in tools did, as AG-UI activity messages next to
//! their tool calls — a file written or edited (`file_change`: its path and a unified diff)
//! and a command (`command`: the command line, its state, exit code and output).
//!
//! The harness reports a running command only as repeated identical snapshots (one per output
//! chunk, without the output), and its output and exit code at the end; so a command's activity
//! is created when the command starts (`state: "running"`) and completed by one delta. A file
//! change is known only when its step is done (the harness sends the whole file as one diff
//! block then), so it is one snapshot.

use std::collections::{HashMap, HashSet};

use agui_types::Event;
use agui_types::{ActivityDelta, ActivitySnapshot, PatchOperation};
use harness_proto::step::{Step, StepKey, StepStatus, ToolAction, ToolKind};
use serde_json::{Map, Value, json};

use crate::ids::IdKind;
use crate::out::Out;

/// `activityType` of a file written or edited.
pub const FILE_CHANGE_ACTIVITY: &str = "file_change";
/// `activityType` of a shell command.
pub const COMMAND_ACTIVITY: &str = "command";

/// Lines of context around each change in a hunk, as `diff -u` does.
const CONTEXT: usize = 3;

/// The activities of the turn.
#[derive(Debug, Default)]
pub(crate) struct Activities {
    /// Commands whose activity says `running`: step → activity id.
    running: HashMap<StepKey, String>,
    /// Steps whose activity is complete.
    done: HashSet<StepKey>,
}

impl Activities {
    /// The activity of a built-in tool step, if it has one; `tool_call_id` is the call the
    /// activity belongs to, when it is shown.
    pub(crate) fn tool(
        &mut self,
        step: &Step,
        tool: &ToolAction,
        tool_call_id: Option<&str>,
        out: &mut Out,
    ) {
        if tool.kind != ToolKind::Builtin || self.done.contains(&step.key) {
            return;
        }
        match tool.name.as_str() {
            "edit_file" | "create_file" => self.file_change(step, tool, tool_call_id, out),
            "run_command" => self.command(step, tool, tool_call_id, out),
            _ => {}
        }
    }

    /// Every command still said to be running is marked `stopped`: the turn ended without
    /// the harness finishing its step (a halt leaves it ACTIVE for ever).
    pub(crate) fn stop_all(&mut self, out: &mut Out) {
        let mut running: Vec<(StepKey, String)> = self.running.drain().collect();
        running.sort();
        for (key, id) in running {
            out.push(delta(&id, vec![replace("/state", json!("stopped"))]));
            self.done.insert(key);
        }
    }

    fn file_change(
        &mut self,
        step: &Step,
        tool: &ToolAction,
        tool_call_id: Option<&str>,
        out: &mut Out,
    ) {
        if step.status != StepStatus::Done {
            return;
        }
        let Some(Value::Array(blocks)) = tool.result.get("diffBlock") else {
            return;
        };
        let path = tool
            .arguments
            .get("filePath")
            .and_then(Value::as_str)
            .map(|p| p.strip_prefix("file://").unwrap_or(p))
            .unwrap_or_default();
        let lines = diff_lines(blocks);
        let created = lines.iter().all(|(op, _)| *op == '+');
        let mut content = Map::new();
        if let Some(id) = tool_call_id {
            content.insert("toolCallId".into(), json!(id));
        }
        content.insert("path".into(), json!(path));
        content.insert(
            "operation".into(),
            json!(if created { "create" } else { "edit" }),
        );
        content.insert("diff".into(), json!(unified_diff(path, created, &lines)));
        let id = out.id(IdKind::Activity, &step.key);
        out.push(snapshot(id, FILE_CHANGE_ACTIVITY, content));
        self.done.insert(step.key.clone());
    }

    fn command(
        &mut self,
        step: &Step,
        tool: &ToolAction,
        tool_call_id: Option<&str>,
        out: &mut Out,
    ) {
        let finished = step.is_final();
        let exit_code = tool.result.get("exitCode").and_then(Value::as_i64);
        let output = tool
            .result
            .get("combinedOutput")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let state = if !finished {
            "running"
        } else if step.status == StepStatus::Error || exit_code.is_some_and(|c| c != 0) {
            "failed"
        } else {
            "completed"
        };
        if let Some(id) = self.running.get(&step.key) {
            if finished {
                let mut patch = vec![replace("/state", json!(state))];
                if let Some(code) = exit_code {
                    patch.push(add("/exitCode", json!(code)));
                }
                patch.push(replace("/output", json!(output)));
                out.push(delta(id, patch));
                self.running.remove(&step.key);
                self.done.insert(step.key.clone());
            }
            return;
        }
        let mut content = Map::new();
        if let Some(id) = tool_call_id {
            content.insert("toolCallId".into(), json!(id));
        }
        let argument = |name: &str| tool.arguments.get(name).and_then(Value::as_str);
        content.insert(
            "command".into(),
            json!(argument("commandLine").unwrap_or_default()),
        );
        if let Some(cwd) = argument("workingDir").filter(|d| !d.is_empty()) {
            content.insert("cwd".into(), json!(cwd));
        }
        content.insert("state".into(), json!(state));
        if let Some(code) = exit_code.filter(|_| finished) {
            content.insert("exitCode".into(), json!(code));
        }
        content.insert("output".into(), json!(output));
        let id = out.id(IdKind::Activity, &step.key);
        out.push(snapshot(id.clone(), COMMAND_ACTIVITY, content));
        if finished {
            self.done.insert(step.key.clone());
        } else {
            self.running.insert(step.key.clone(), id);
        }
    }
}

fn snapshot(message_id: String, activity_type: &str, content: Map<String, Value>) -> Event {
    Event::ActivitySnapshot(ActivitySnapshot {
        message_id,
        activity_type: activity_type.to_owned(),
        content,
        ..ActivitySnapshot::default()
    })
}

fn delta(message_id: &str, patch: Vec<PatchOperation>) -> Event {
    Event::ActivityDelta(ActivityDelta {
        message_id: message_id.to_owned(),
        activity_type: COMMAND_ACTIVITY.to_owned(),
        patch,
        ..ActivityDelta::default()
    })
}

fn replace(path: &str, value: Value) -> PatchOperation {
    PatchOperation::Replace {
        path: path.to_owned(),
        value,
    }
}

fn add(path: &str, value: Value) -> PatchOperation {
    PatchOperation::Add {
        path: path.to_owned(),
        value,
    }
}

/// The lines of the harness's diff blocks as (`' '`, `'-'` or `'+'`, text). The harness sends
/// the whole file, its final newline as a last empty line, which is dropped.
fn diff_lines(blocks: &[Value]) -> Vec<(char, String)> {
    let mut lines: Vec<(char, String)> = blocks
        .iter()
        .filter_map(|b| b.get("lines").and_then(Value::as_array))
        .flatten()
        .map(|line| {
            let op = match line.get("action").and_then(Value::as_str) {
                Some("LINE_ACTION_INSERT") => '+',
                Some("LINE_ACTION_DELETE") => '-',
                _ => ' ',
            };
            let text = line.get("text").and_then(Value::as_str).unwrap_or_default();
            (op, text.to_owned())
        })
        .collect();
    if lines.last().is_some_and(|(_, text)| text.is_empty()) {
        lines.pop();
    }
    lines
}

/// A unified diff (`diff -u` style, 3 lines of context) of `path` from its changed lines.
fn unified_diff(path: &str, created: bool, lines: &[(char, String)]) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut diff = if created {
        format!("--- /dev/null\n+++ b/{name}\n")
    } else {
        format!("--- a/{name}\n+++ b/{name}\n")
    };
    let changed: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].0 != ' ').collect();
    // Old and new line numbers before each line.
    let mut before = Vec::with_capacity(lines.len());
    let (mut old, mut new) = (0usize, 0usize);
    for (op, _) in lines {
        before.push((old, new));
        match op {
            '-' => old += 1,
            '+' => new += 1,
            _ => {
                old += 1;
                new += 1;
            }
        }
    }
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut last = changed[k];
        while k + 1 < changed.len() && changed[k + 1] <= last + 2 * CONTEXT + 1 {
            k += 1;
            last = changed[k];
        }
        k += 1;
        let end = (last + CONTEXT + 1).min(lines.len());
        let hunk = &lines[start..end];
        let old_len = hunk.iter().filter(|(op, _)| *op != '+').count();
        let new_len = hunk.iter().filter(|(op, _)| *op != '-').count();
        let (old_before, new_before) = before[start];
        // An empty side names the line before the hunk, as `diff -u` does.
        let old_start = if old_len == 0 {
            old_before
        } else {
            old_before + 1
        };
        let new_start = if new_len == 0 {
            new_before
        } else {
            new_before + 1
        };
        diff.push_str(&format!(
            "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
        ));
        for (op, text) in hunk {
            diff.push(*op);
            diff.push_str(text);
            diff.push('\n');
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(lines: &[(&str, &str)]) -> Vec<Value> {
        let lines: Vec<Value> = lines
            .iter()
            .map(|(action, text)| json!({"text": text, "action": action}))
            .collect();
        vec![json!({"startLine": 0, "endLine": 0, "lines": lines})]
    }

    const INS: &str = "LINE_ACTION_INSERT";
    const DEL: &str = "LINE_ACTION_DELETE";
    const NONE: &str = "LINE_ACTION_NONE";

    #[test]
    fn a_new_file_is_one_hunk_from_nothing() {
        let lines = diff_lines(&block(&[(INS, "a"), (INS, ""), (INS, "b"), (INS, "")]));
        assert_eq!(
            unified_diff("/w/x.py", true, &lines),
            "--- /dev/null\n+++ b/x.py\n@@ -0,0 +1,3 @@\n+a\n+\n+b\n"
        );
    }

    #[test]
    fn an_edit_in_a_long_file_keeps_three_lines_of_context() {
        // 40 lines, rows 20–21 replaced by one (as the harness reports it: the whole file).
        let mut rows: Vec<(&str, String)> = Vec::new();
        for i in 1..=19 {
            rows.push((NONE, format!("row {i}")));
        }
        rows.push((DEL, "row 20".into()));
        rows.push((DEL, "row 21".into()));
        rows.push((INS, "rows 20-21".into()));
        for i in 22..=40 {
            rows.push((NONE, format!("row {i}")));
        }
        rows.push((NONE, String::new()));
        let borrowed: Vec<(&str, &str)> = rows.iter().map(|(a, t)| (*a, t.as_str())).collect();
        let lines = diff_lines(&block(&borrowed));
        assert_eq!(
            unified_diff("/w/f.txt", false, &lines),
            "--- a/f.txt\n+++ b/f.txt\n@@ -17,8 +17,7 @@\n row 17\n row 18\n row 19\n-row 20\n-row 21\n+rows 20-21\n row 22\n row 23\n row 24\n"
        );
    }

    #[test]
    fn distant_changes_get_separate_hunks() {
        let mut rows = vec![(DEL, "old 1"), (INS, "new 1")];
        rows.extend(std::iter::repeat_n((NONE, "same"), 10));
        rows.extend([(INS, "added at the end"), (NONE, "")]);
        let lines = diff_lines(&block(&rows));
        let diff = unified_diff("/w/g", false, &lines);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("@@ -1,4 +1,4 @@\n-old 1\n+new 1\n same\n same\n same\n"));
        assert!(diff.contains("@@ -9,3 +9,4 @@\n same\n same\n same\n+added at the end\n"));
    }
}
