//! Records the frames of scripted scenarios with the real harness (what `cargo xtask record`
//! runs): for each scenario of `gemini_script::scenarios`, starts the scripted model and a
//! harness, plays the turns, answers tools and questions as the scenario says, and writes every
//! WebSocket frame — normalised so re-recording gives the same file — to
//! `<out>/<scenario>.jsonl`, one `{"in": InputEvent}` or `{"out": OutputEvent}` per line.
//!
//! ```sh
//! cargo run -p harness-client --example record -- fixtures/steps plain_text two_turns
//! cargo run -p harness-client --example record -- fixtures/steps --all
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gemini_script::scenarios::{self, Scenario, TurnEnd as Expected};
use harness_client::proto::lh::{
    AgentBehavior, LifecycleHook, harness_config::SessionContinuationMode,
};
use harness_client::{
    Answer, BuiltinTool, CallContext, Callbacks, ConnectOptions, Conversation, ConversationConfig,
    ConversationEvent, CustomTool, FrameDirection, HarnessProcess, HookRequest, HookResponse,
    ModelEndpoint, ProcessOptions, QuestionAnswer, QuestionRequest, ToolCallRequest, ToolOutcome,
    policy,
};
use serde_json::Value;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A fixed conversation id keeps re-recordings comparable and lets "re-attach" turns resume.
const CONVERSATION_ID: &str = "00000000000000000000000000000f1e";

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(
        args.next()
            .ok_or("usage: record <out dir> (--all | <scenario>...)")?,
    );
    let names: Vec<String> = args.collect();
    let chosen: Vec<Scenario> = if names.iter().any(|n| n == "--all") {
        scenarios::all()
    } else {
        names
            .iter()
            .map(|n| scenarios::by_name(n).ok_or_else(|| format!("unknown scenario `{n}`")))
            .collect::<Result<_, _>>()?
    };
    if chosen.is_empty() {
        return Err("name at least one scenario, or --all".into());
    }
    std::fs::create_dir_all(&out)?;
    for scenario in chosen {
        let lines = record(&scenario)
            .await
            .map_err(|e| format!("scenario {}: {e}", scenario.name))?;
        let path = out.join(format!("{}.jsonl", scenario.name));
        std::fs::write(&path, lines.join("\n") + "\n")?;
        eprintln!("recorded {} ({} frames)", path.display(), lines.len());
    }
    Ok(())
}

/// Answers tool calls and questions with the scenario's canned values.
struct Host(scenarios::HostSetup);

#[async_trait]
impl Callbacks for Host {
    async fn tool_call(&self, _ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        self.pause().await;
        match self.0.tool_result(&call.name) {
            Some(result) => ToolOutcome::json(result.clone()),
            None => ToolOutcome::error(format!("the scenario has no result for `{}`", call.name)),
        }
    }

    async fn hook(&self, _ctx: &CallContext, _request: HookRequest) -> HookResponse {
        self.pause().await;
        HookResponse::Allow {
            modified_args: None,
        }
    }

    async fn question(&self, _ctx: &CallContext, request: QuestionRequest) -> QuestionAnswer {
        self.pause().await;
        let Some(response) = &self.0.question_answer else {
            return QuestionAnswer::Answers(vec![Answer::Unanswered; request.questions.len()]);
        };
        let answers = response["answers"].as_array().cloned().unwrap_or_default();
        QuestionAnswer::Answers(
            answers
                .iter()
                .map(|a| match a.get("multipleChoiceAnswer") {
                    Some(mc) => Answer::Choice {
                        selected: mc["selectedChoiceIndices"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|i| i.as_u64().and_then(|i| u32::try_from(i).ok()))
                            .collect(),
                        freeform: mc["freeformResponse"].as_str().map(str::to_owned),
                    },
                    None => Answer::Unanswered,
                })
                .collect(),
        )
    }
}

impl Host {
    /// Waits the scenario's answer delay, so the frames the harness sends while a request
    /// waits are recorded.
    async fn pause(&self) {
        if self.0.answer_delay_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(self.0.answer_delay_ms)).await;
        }
    }
}

fn builtin(key: &str) -> Result<BuiltinTool, Error> {
    Ok(match key {
        "find" => BuiltinTool::FindFile,
        "runCommand" => BuiltinTool::RunCommand,
        "subagents" => BuiltinTool::Subagents,
        "userQuestions" => BuiltinTool::AskQuestion,
        "fileEdit" => BuiltinTool::EditFile,
        "viewFile" => BuiltinTool::ViewFile,
        "writeToFile" => BuiltinTool::CreateFile,
        "grepSearch" => BuiltinTool::SearchDirectory,
        "listDir" => BuiltinTool::ListDirectory,
        "generateImage" => BuiltinTool::GenerateImage,
        "searchWeb" => BuiltinTool::SearchWeb,
        "readUrlContent" => BuiltinTool::ReadUrlContent,
        "manageTask" => BuiltinTool::ManageTask,
        "schedule" => BuiltinTool::Schedule,
        "runWorkflow" => BuiltinTool::RunWorkflow,
        other => return Err(format!("unknown harnessSideTools key `{other}`").into()),
    })
}

async fn record(scenario: &Scenario) -> Result<Vec<String>, Error> {
    let model = gemini_script::ScriptedModel::start(scenario.script.clone()).await?;
    let dir = tempfile::Builder::new().prefix("rec").tempdir()?;
    let workspace = dir.path().join("ws");
    for (file, content) in &scenario.setup.workspace_files {
        let path = workspace.join(file);
        std::fs::create_dir_all(path.parent().unwrap_or(&workspace))?;
        std::fs::write(path, content)?;
    }
    std::fs::create_dir_all(&workspace)?;
    let setup = &scenario.setup;
    let mut config = ConversationConfig::new(
        "gemini-3-flash-preview",
        ModelEndpoint::gemini(model.base_url(), "fixture-key"),
    )
    .workspace(&workspace)
    .app_data_dir(dir.path().join("app"))
    .policy(policy::allow_all())
    .builtin_tools(
        setup
            .builtin_tools
            .iter()
            .map(|k| builtin(k))
            .collect::<Result<Vec<_>, _>>()?,
    )
    .behavior(if setup.interactive {
        AgentBehavior::Interactive
    } else {
        AgentBehavior::Autonomous
    })
    .conversation_id(CONVERSATION_ID, SessionContinuationMode::CreateOrResume);
    for tool in &setup.custom_tools {
        config = config.tool(CustomTool {
            name: tool.name.into(),
            description: tool.description.into(),
            parameters: tool.parameters.clone(),
        });
    }
    if setup.pre_tool_hook {
        config = config.hook(LifecycleHook::PreTool);
    }
    if let Some(retry) = setup.api_retry {
        config = config.api_retry(
            retry.max_retries,
            u32::try_from(retry.initial_sleep_ms).unwrap_or(u32::MAX),
        );
    }
    let frames: Arc<Mutex<Vec<(FrameDirection, String)>>> = Arc::default();
    let sink = frames.clone();
    let options = ConnectOptions {
        tap: Some(Arc::new(move |dir, text: &str| {
            sink.lock().unwrap().push((dir, text.to_owned()))
        })),
        ..Default::default()
    };
    let process = HarnessProcess::spawn(&ProcessOptions::new(dir.path().join("save"))).await?;
    let mut conversation = Conversation::open_with(
        &process,
        config.build()?,
        Arc::new(Host(setup.clone())),
        options,
    )
    .await?;
    for turn in &scenario.turns {
        if turn.reattach {
            conversation.reconnect().await?;
        }
        conversation.send_text(turn.prompt).await?;
        let end = loop {
            match conversation.next_event().await {
                Some(ConversationEvent::TurnEnded(end)) => break end,
                Some(ConversationEvent::Closed(reason)) => {
                    return Err(format!("closed mid-turn: {reason}").into());
                }
                Some(_) => {}
                None => return Err("events ended mid-turn".into()),
            }
        };
        match (turn.expect, &end.error) {
            (Expected::Idle, None) | (Expected::Failed, Some(_)) => {}
            (expected, error) => {
                return Err(format!(
                    "turn {:?} expected {expected:?}, ended with {error:?}",
                    turn.prompt
                )
                .into());
            }
        }
        if end.error.is_some() {
            // The harness closes the socket after a terminal error; wait for it so the next
            // turn's re-attach starts from a closed connection.
            while let Some(event) = conversation.next_event().await {
                if matches!(event, ConversationEvent::Closed(_)) {
                    break;
                }
            }
        }
    }
    conversation.close().await;
    process.shutdown().await;
    let frames = frames.lock().unwrap().clone();
    Ok(normalise(&frames, dir.path(), &model.base_url()))
}

/// Makes a recording stable: harness-minted ids and timestamps become placeholders, scratch
/// paths and the model's port become fixed strings.
fn normalise(frames: &[(FrameDirection, String)], scratch: &Path, base_url: &str) -> Vec<String> {
    let scratch = scratch.to_string_lossy();
    let mut ids = Ids::default();
    frames
        .iter()
        .filter_map(|(dir, text)| {
            let mut frame: Value = serde_json::from_str(text).ok()?;
            if let Some(obj) = frame.as_object_mut() {
                obj.remove("timestampMicros");
            }
            let text = frame
                .to_string()
                .replace(&*scratch, "/scratch")
                .replace(base_url, "http://127.0.0.1:4011");
            let text = ids.replace(&timestamps(&text));
            let key = match dir {
                FrameDirection::ToHarness => "in",
                FrameDirection::FromHarness => "out",
            };
            Some(format!("{{\"{key}\":{text}}}"))
        })
        .collect()
}

/// Numbers harness-minted ids (32-hex trajectory ids, UUID call ids) in order of appearance.
#[derive(Default)]
struct Ids(Vec<(String, String)>);

impl Ids {
    fn replace(&mut self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < bytes.len() {
            let boundary = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
            let token = if boundary { id_at(&text[i..]) } else { None };
            match token {
                Some(len) => {
                    let id = &text[i..i + len];
                    let placeholder = match self.0.iter().find(|(k, _)| k == id) {
                        Some((_, v)) => v.clone(),
                        None => {
                            let kind = if len == 36 { "call" } else { "trajectory" };
                            let n = self.0.iter().filter(|(_, v)| v.starts_with(kind)).count() + 1;
                            let v = format!("{kind}-{n}");
                            self.0.push((id.to_owned(), v.clone()));
                            v
                        }
                    };
                    out.push_str(&placeholder);
                    i += len;
                }
                None => {
                    let c = text[i..].chars().next().expect("in bounds");
                    out.push(c);
                    i += c.len_utf8();
                }
            }
        }
        out
    }
}

/// Length of a UUID or 32-hex id starting at `s`, if one does (and is not part of a longer word).
fn id_at(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let hex = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|r| r.iter().all(u8::is_ascii_hexdigit))
    };
    let ends = |n: usize| b.get(n).is_none_or(|c| !c.is_ascii_alphanumeric());
    if hex(0..8)
        && b.get(8) == Some(&b'-')
        && hex(9..13)
        && b.get(13) == Some(&b'-')
        && hex(14..18)
        && b.get(18) == Some(&b'-')
        && hex(19..23)
        && b.get(23) == Some(&b'-')
        && hex(24..36)
        && ends(36)
    {
        return Some(36);
    }
    (hex(0..32) && ends(32) && b[..32].iter().any(u8::is_ascii_alphabetic)).then_some(32)
}

/// Replaces ISO timestamps (`2026-11-30T06:16:36Z`) with `<time>`.
fn timestamps(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let digits =
            |r: std::ops::Range<usize>| b.get(r).is_some_and(|r| r.iter().all(u8::is_ascii_digit));
        let at = |j: usize, c: u8| b.get(i + j) == Some(&c);
        if digits(i..i + 4)
            && at(4, b'-')
            && digits(i + 5..i + 7)
            && at(7, b'-')
            && digits(i + 8..i + 10)
            && at(10, b'T')
            && digits(i + 11..i + 13)
            && at(13, b':')
            && digits(i + 14..i + 16)
            && at(16, b':')
            && digits(i + 17..i + 19)
        {
            let mut end = i + 19;
            while end < b.len() && (b[end].is_ascii_digit() || b[end] == b'.') {
                end += 1;
            }
            if b.get(end) == Some(&b'Z') {
                end += 1;
            }
            out.push_str("<time>");
            i = end;
        } else {
            let c = text[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
