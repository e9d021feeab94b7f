//! `cargo xtask import-captures`: copies the host ↔ harness frames of reference captures into
//! `fixtures/harness-frames/`, the golden data of `harness-proto`'s round-trip test.
//!
//! Only protocol data is kept (WebSocket text frames and the stdio handshake); driver notes,
//! timings and upgrade headers are dropped. Each output line is
//! `{"seq", "conn"?, "channel": "ws"|"stdin"|"stdout", "dir": "in"|"out", "raw"?, "frame"?, "len"?}`
//! where `in` is host → harness.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::util::{GeneratedFile, sync_generated, workspace_root};

const OUT_DIR: &str = "fixtures/harness-frames";

/// Arguments of `import-captures`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Directory of capture `*.jsonl` files (the shared reference captures).
    #[arg(long, default_value = "../shared/captures")]
    from: PathBuf,
    /// Fail if the fixtures differ from what the captures give, instead of writing.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let from = workspace_root().join(&args.from);
    let mut names: Vec<PathBuf> = std::fs::read_dir(&from)
        .with_context(|| format!("reading {}", from.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && !p.to_string_lossy().ends_with(".model-requests.jsonl")
        })
        .collect();
    names.sort();
    let mut files = Vec::new();
    for path in names {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut out = String::new();
        for (n, line) in text.lines().enumerate() {
            let record: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}", path.display(), n + 1))?;
            if let Some(kept) = keep(&record) {
                out.push_str(&kept.to_string());
                out.push('\n');
            }
        }
        if !out.is_empty() {
            let name = path.file_name().expect("read_dir entries have names");
            files.push(GeneratedFile {
                path: PathBuf::from(OUT_DIR).join(name),
                contents: out,
            });
        }
    }
    sync_generated(
        &files,
        &[PathBuf::from(OUT_DIR)],
        args.check,
        "import-captures",
    )
}

/// The protocol part of one capture record, or `None` for notes and metadata.
fn keep(record: &serde_json::Value) -> Option<serde_json::Value> {
    let channel = record.get("channel")?.as_str()?;
    let dir = match record.get("dir")?.as_str()? {
        "host->harness" => "in",
        "harness->host" => "out",
        _ => return None,
    };
    let mut out = serde_json::Map::new();
    out.insert("seq".into(), record.get("seq")?.clone());
    if let Some(conn) = record.get("conn") {
        out.insert("conn".into(), conn.clone());
    }
    out.insert("channel".into(), channel.into());
    out.insert("dir".into(), dir.into());
    match channel {
        "ws" => {
            out.insert("raw".into(), record.get("raw")?.clone());
        }
        "stdin" | "stdout" => {
            out.insert("frame".into(), record.get("frame")?.clone());
            out.insert("len".into(), record.get("length_prefix_le")?.clone());
            // Host paths were redacted from stdin bytes; keep the bytes only where present.
            if let Some(raw) = record
                .get("raw")
                .and_then(|r| r.as_str())
                .filter(|r| r.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                out.insert("raw".into(), raw.into());
            }
        }
        _ => return None,
    }
    Some(out.into())
}
