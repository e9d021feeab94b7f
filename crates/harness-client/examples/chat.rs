//! Talk to an Antigravity agent from the command line.
//!
//! ```sh
//! cargo run -p harness-client --example chat -- "What files are in the workspace?"
//! ```
//!
//! Without `GEMINI_API_KEY` it talks to the built-in scripted model (offline demo); with it, to
//! Gemini (`GEMINI_MODEL` picks the model, default `gemini-3-flash-preview`; `GEMINI_BASE_URL`
//! overrides the endpoint). The agent works in a temporary workspace.

use std::io::Write as _;
use std::sync::Arc;

use harness_client::{
    BuiltinTool, Conversation, ConversationConfig, ConversationEvent, DefaultCallbacks,
    HarnessProcess, ModelEndpoint, ProcessOptions, StepSource, StepTarget, policy,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let prompt = if prompt.is_empty() {
        "Hello! What can you do?".to_owned()
    } else {
        prompt
    };
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("ws"))?;
    std::fs::write(
        dir.path().join("ws/README.txt"),
        "A scratch workspace for the chat example.\n",
    )?;

    // The scripted model is kept alive for the whole conversation when used.
    let (endpoint, model, _scripted) = match std::env::var("GEMINI_API_KEY") {
        Ok(key) if !key.is_empty() => {
            let base_url = std::env::var("GEMINI_BASE_URL").ok();
            let model =
                std::env::var("GEMINI_MODEL").unwrap_or_else(|_| "gemini-3-flash-preview".into());
            let endpoint = ModelEndpoint::Gemini {
                base_url,
                api_key: Some(key),
                headers: Default::default(),
                thinking_level: None,
            };
            (endpoint, model, None)
        }
        _ => {
            let scripted =
                gemini_script::ScriptedModel::start(gemini_script::demo::script()).await?;
            eprintln!(
                "(no GEMINI_API_KEY: using the offline scripted model at {})",
                scripted.base_url()
            );
            (
                ModelEndpoint::gemini(scripted.base_url(), "offline"),
                "gemini-3-flash-preview".to_owned(),
                Some(scripted),
            )
        }
    };

    let process = HarnessProcess::spawn(&ProcessOptions::new(dir.path().join("save"))).await?;
    let config = ConversationConfig::new(model, endpoint)
        .workspace(dir.path().join("ws"))
        .app_data_dir(dir.path().join("app"))
        .builtin_tools([BuiltinTool::ListDirectory, BuiltinTool::ViewFile])
        .policy(policy::allow_all())
        .build()?;
    let mut conversation = Conversation::open(&process, config, Arc::new(DefaultCallbacks)).await?;
    conversation.send_text(&prompt).await?;
    let mut stdout = std::io::stdout();
    while let Some(event) = conversation.next_event().await {
        match event {
            ConversationEvent::Step(step) if step.source == StepSource::Model => {
                if !step.thinking_delta.is_empty() {
                    write!(stdout, "\x1b[2m{}\x1b[0m", step.thinking_delta)?;
                }
                if let Some(tool) = step.tool().filter(|_| step.is_final()) {
                    writeln!(
                        stdout,
                        "\n[{}] {}",
                        tool.name,
                        serde_json::Value::Object(tool.result.clone())
                    )?;
                } else if step.target == StepTarget::User {
                    write!(stdout, "{}", step.text_delta)?;
                }
                stdout.flush()?;
            }
            ConversationEvent::TurnEnded(end) => {
                if let Some(error) = end.error {
                    eprintln!("\nthe turn failed: {error}");
                }
                break;
            }
            ConversationEvent::Closed(reason) => {
                eprintln!("\nconnection closed: {reason}");
                break;
            }
            _ => {}
        }
    }
    println!();
    conversation.close().await;
    process.shutdown().await;
    Ok(())
}
