//! The AG-UI dojo server: one Antigravity agent per dojo feature, each at its own path.
//!
//! ```sh
//! cargo run -p agui-server --example dojo                                # offline scripted model
//! cargo run -p agui-server --example dojo -- --api-key "$GEMINI_API_KEY" # Gemini
//! ```
//!
//! It takes the binary's flags, environment variables and `--config` file (see
//! `agui-antigravity serve --help`), plus `--base-path PATH` (or `DOJO_BASE_PATH`) to mount
//! the agents under a prefix. On 127.0.0.1:8027 by default:
//!
//! | path | feature | try |
//! |---|---|---|
//! | `/agentic_chat` | plain chat (and the page's `change_background` tool) | "Explain how this works", "Change the background" |
//! | `/human_in_the_loop` | the page's `generate_task_steps` tool: the run parks until the user picks steps | "Plan a trip to Mars" |
//! | `/backend_tool_rendering` | the server tool `get_weather(location)`, drawn by the page from its result | "What's the weather in Tokyo?" |
//! | `/shared_state` | the server tool `research_agent(task)`, appending to `delegations` in the shared state | "Research the history of Rust" |
//! | `/interrupt` | the server tool `schedule_meeting(topic, attendee)`, pausing on an interrupt until the user picks a time | "Schedule a meeting with the sales team" |
//!
//! Without a key (or with `--demo`), answers come from the scripted model in `script.rs`, which
//! reacts to the words above. With one (`--api-key` or `GEMINI_API_KEY`), Gemini answers,
//! guided by each agent's system instructions in [`FEATURES`]. Settings apply to every dojo
//! agent; an `[[agents]]` entry in the config file whose `path` is a dojo path configures that
//! agent alone. `examples/README.md` says how to point the AG-UI dojo or CopilotKit at it.

mod script;

use std::process::ExitCode;

use agui_server::cli::{Cli, Command, ServeArgs};
use agui_server::{
    AgentSettings, BuiltinToolChoice, FileConfig, Server, ServerConfig, ServerError, normalise_path,
};
use agui_session::{
    FnTool, InterruptAnswer, InterruptRequest, ToolContext, ToolError, ToolRegistry,
};
use serde_json::{Map, Value, json};

/// A dojo feature: its path (the dojo's feature id) and how its agent is set up.
pub struct Feature {
    /// The dojo's feature id, also the mount path.
    pub id: &'static str,
    /// System instructions (used with Gemini; the scripted model ignores them).
    pub instructions: &'static str,
    /// The agent's server tools.
    pub tools: fn() -> ToolRegistry,
}

/// The dojo features this server mounts.
pub const FEATURES: &[Feature] = &[
    Feature {
        id: "agentic_chat",
        instructions: "You are a friendly assistant in a chat demo. Answer briefly. When the \
            user asks to change the background, call change_background if the page offers it.",
        tools: ToolRegistry::new,
    },
    Feature {
        id: "human_in_the_loop",
        instructions: "You help the user carry out tasks. For any task, first call \
            generate_task_steps with about eight short steps in gerund form, each with status \
            \"enabled\", and wait for the user's choice. Then say briefly how you carry out \
            only the steps they kept.",
        tools: ToolRegistry::new,
    },
    Feature {
        id: "backend_tool_rendering",
        instructions: "You answer questions about the weather. Call get_weather with the \
            location, then sum up its result in one sentence: the page shows the details.",
        tools: weather_tools,
    },
    Feature {
        id: "shared_state",
        instructions: "You coordinate research. For any research request, call \
            research_agent with the task, then sum up its findings in two sentences.",
        tools: research_tools,
    },
    Feature {
        id: "interrupt",
        instructions: "You help the user book meetings. To book one, call schedule_meeting \
            with a short topic and the attendee; it asks the user for a time itself, so never \
            ask for one yourself. Then tell the user what the tool reported: the time it was \
            booked for, or that nothing was scheduled.",
        tools: meeting_tools,
    },
];

/// `/` or a prefix such as `/dojo`, joined with a feature id.
fn mount_path(base: &str, id: &str) -> String {
    format!("{}/{id}", base.trim_end_matches('/'))
}

/// The dojo server for the binary's options (`args`: flags, environment, `--config` file), with
/// one agent per [`FEATURES`] entry under `base_path`, their tools and the offline script.
///
/// Every dojo agent takes the shared settings (the file's `[agent]` table, environment, flags);
/// a `[[agents]]` entry whose `path` is a dojo path adds settings of that agent alone. Other
/// `[[agents]]` entries are not mounted.
pub fn server(args: ServeArgs, base_path: &str) -> Result<Server, ServerError> {
    let base = normalise_path(base_path)?;
    let mut file = match &args.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    let mut entries = Vec::new();
    for feature in FEATURES {
        let path = mount_path(&base, feature.id);
        let own = file
            .agents
            .iter()
            .find(|a| a.path.as_deref().and_then(|p| normalise_path(p).ok()) == Some(path.clone()));
        let mut entry = own.cloned().unwrap_or_default();
        entry.path = Some(path);
        entries.push(entry);
    }
    file.agents = entries.clone();
    let mut config = ServerConfig::merge(file, &args)?;
    for ((settings, entry), feature) in config.agents.iter_mut().zip(&entries).zip(FEATURES) {
        dojo_defaults(settings, entry, feature);
    }
    let mut server = Server::new(config).with_demo_script(script::script());
    for feature in FEATURES {
        server = server.with_tools(&mount_path(&base, feature.id), (feature.tools)());
    }
    Ok(server)
}

/// Fills what the configuration left unset for a dojo agent. `entry` is its own `[[agents]]`
/// entry (empty if none). Shared directories already get a subfolder per agent from
/// [`ServerConfig::merge`].
fn dojo_defaults(settings: &mut AgentSettings, entry: &AgentSettings, feature: &Feature) {
    if entry.name.is_none() {
        settings.name = Some(feature.id.into());
    }
    settings
        .system_instructions
        .get_or_insert_with(|| feature.instructions.into());
    // The dojo pages need no file or shell access, and answer no `ask_question` interrupts.
    settings
        .builtin_tools
        .get_or_insert_with(|| vec![BuiltinToolChoice::Nothing]);
    settings.ask_question.get_or_insert(false);
}

fn string_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::new(format!("`{name}` must be a non-empty string")))
}

/// `get_weather(location)`: the demo's weather tool, whose result has the fields the dojo's
/// weather card reads.
fn weather_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(agui_server::demo::weather_tool());
    tools
}

/// `research_agent(task)`: a stand-in for a research sub-agent that records each delegation in
/// the shared state, so a page bound to the state shows it while the turn is still running.
fn research_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "research_agent",
        "Delegates a research task to a research agent and returns its findings.",
        json!({
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What to research"}},
            "required": ["task"]
        }),
        |ctx, args| async move {
            let task = string_arg(&args, "task")?.to_owned();
            let mut delegation =
                json!({"id": ctx.tool_call_id(), "task": task, "status": "running"});
            // The state is replaced whole, so re-read it before each write to keep the user's
            // edits and other tools' writes.
            append_delegation(&ctx, delegation.clone())?;
            let findings = format!(
                "Three sources agree on the essentials of \"{task}\"; the summary notes where \
                 they differ and lists open questions."
            );
            delegation["status"] = json!("done");
            delegation["findings"] = json!(findings);
            append_delegation(&ctx, delegation)?;
            Ok(json!(findings))
        },
    ));
    tools
}

/// Puts `delegation` into the state's `delegations`, replacing the entry with its id if any.
fn append_delegation(ctx: &ToolContext, delegation: Value) -> Result<(), ToolError> {
    let mut state = match ctx.state() {
        Value::Object(state) => state,
        _ => Map::new(),
    };
    let mut delegations = match state.remove("delegations") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    match delegations.iter_mut().find(|d| d["id"] == delegation["id"]) {
        Some(existing) => *existing = delegation,
        None => delegations.push(delegation),
    }
    state.insert("delegations".into(), Value::Array(delegations));
    ctx.set_state(Value::Object(state))
        .map_err(ToolError::from_error)
}

/// `schedule_meeting(topic, attendee)`: pauses on an interrupt until the user picks a time,
/// then books the meeting.
fn meeting_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "schedule_meeting",
        "Schedules a meeting. The user picks the time before it is booked.",
        json!({
            "type": "object",
            "properties": {
                "topic": {"type": "string", "description": "What the meeting is about, e.g. \"Intro call\""},
                "attendee": {"type": "string", "description": "Who the meeting is with, e.g. \"the sales team\""}
            },
            "required": ["topic", "attendee"]
        }),
        |ctx, args| async move {
            let topic = string_arg(&args, "topic")?.to_owned();
            let attendee = string_arg(&args, "attendee")?.to_owned();
            let slots = json!([
                {"time": "monday-10:00", "label": "Monday, 10:00"},
                {"time": "tuesday-14:30", "label": "Tuesday, 14:30"},
                {"time": "thursday-09:00", "label": "Thursday, 09:00"}
            ]);
            let metadata = json!({
                // The dojo's interrupt page reads the meeting from `metadata.reason`.
                "reason": {"topic": topic, "attendee": attendee},
                "topic": topic,
                "attendee": attendee,
                "slots": slots,
            });
            let schema = json!({
                "type": "object",
                "properties": {
                    "chosen_time": {"type": "string"},
                    "chosen_label": {"type": "string"},
                    "cancelled": {"type": "boolean"}
                }
            });
            let answer = ctx
                .interrupt(InterruptRequest {
                    reason: "schedule_meeting".into(),
                    message: Some(format!("Pick a time for \"{topic}\" with {attendee}.")),
                    metadata: metadata.as_object().cloned(),
                    response_schema: schema.as_object().cloned(),
                })
                .await;
            let meeting = format!("{topic} with {attendee}");
            // Say exactly what happened, so the model never reports a decline that did not.
            Ok(json!(match answer {
                InterruptAnswer::Resolved(payload) => match chosen_label(&payload) {
                    Some(label) => format!("Meeting scheduled for {label}: {meeting}."),
                    None => format!("The user cancelled. Meeting NOT scheduled: {meeting}."),
                },
                InterruptAnswer::Cancelled => {
                    format!("The user cancelled. Meeting NOT scheduled: {meeting}.")
                }
                InterruptAnswer::Abandoned => format!(
                    "The user moved on without picking a time. Meeting NOT scheduled: {meeting}."
                ),
                InterruptAnswer::Closed => format!(
                    "The conversation closed before a time was picked. Meeting NOT scheduled: \
                     {meeting}."
                ),
            }))
        },
    ));
    tools
}

/// The time the user picked: `chosen_label` (or `chosen_time`), or a bare string; `None` when
/// the payload says `cancelled` or names no time.
fn chosen_label(payload: &Value) -> Option<String> {
    let picked = match payload {
        Value::String(label) => Some(label.as_str()),
        Value::Object(answer) if answer.get("cancelled") == Some(&Value::Bool(true)) => None,
        Value::Object(answer) => answer
            .get("chosen_label")
            .or_else(|| answer.get("chosen_time"))
            .and_then(Value::as_str),
        _ => None,
    };
    picked
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Takes `--base-path PATH` (or `--base-path=PATH`) out of `args`; the rest are the binary's.
fn split_base_path(args: Vec<String>) -> Result<(String, Vec<String>), String> {
    let mut base = std::env::var("DOJO_BASE_PATH").unwrap_or_else(|_| "/".into());
    let mut rest = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--base-path" {
            base = args
                .next()
                .ok_or("--base-path needs a value, e.g. --base-path /dojo")?;
        } else if let Some(value) = arg.strip_prefix("--base-path=") {
            base = value.to_owned();
        } else {
            rest.push(arg);
        }
    }
    Ok((base, rest))
}

fn main() -> ExitCode {
    // The program is also the sandbox launcher of its agents' harness processes.
    agui_server::sandbox::main(serve)
}

async fn serve() -> ExitCode {
    let (base, args) = match split_base_path(std::env::args().collect()) {
        Ok(split) => split,
        Err(e) => {
            eprintln!("dojo: {e}");
            return ExitCode::from(2);
        }
    };
    // Parsed as the binary parses its command line, so `--help` and errors read the same.
    let cli = match Cli::parse_args(args) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let (check_only, args) = match cli.command {
        Command::Serve(args) => (false, args),
        Command::CheckConfig(args) => (true, args),
    };
    let server = match server(*args, &base) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("dojo: {e}");
            return ExitCode::from(2);
        }
    };
    if check_only {
        println!("{:#?}", server.config().redacted());
        return ExitCode::SUCCESS;
    }
    agui_server::init_logging(server.config().log_format);
    match server.start().await {
        Ok(running) => {
            eprintln!("AG-UI dojo agents:");
            for agent in &running.runtime().agents {
                let model = if agent.demo {
                    "scripted model"
                } else {
                    "model"
                };
                eprintln!(
                    "  http://{}{:<24} {model} {}",
                    running.addr(),
                    agent.path,
                    agent.agent.options().model
                );
            }
            running.run_until_signal().await;
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dojo: {e}");
            ExitCode::FAILURE
        }
    }
}
