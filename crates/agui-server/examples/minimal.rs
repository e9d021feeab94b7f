//! A minimal embedding: one Antigravity agent with one server tool of your own, served over
//! AG-UI with the same flags, environment variables and `--config` file as the binary.
//!
//! ```sh
//! cargo run -p agui-server --example minimal                               # offline demo model
//! cargo run -p agui-server --example minimal -- --api-key "$GEMINI_API_KEY" # Gemini
//! ```
//!
//! Then ask for the weather (offline, the demo model calls `get_weather` when you do):
//!
//! ```sh
//! curl -N localhost:8027/ -H 'Content-Type: application/json' -d '{"threadId": "t1",
//!   "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "Weather in Tokyo?"}]}'
//! ```
//!
//! The stream shows `TOOL_CALL_START`/`ARGS`/`END`, then `TOOL_CALL_RESULT` with what the
//! closure below returned, then the model's answer.

use std::process::ExitCode;

use agui_server::{Server, ServerConfig};
use agui_session::{FnTool, ToolRegistry};
use serde_json::{Value, json};

/// The server: the configured agent at `/`, given the `get_weather` tool.
pub fn server(config: ServerConfig) -> Server {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "get_weather",
        "Get the current weather for a location.",
        json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "A city name"}},
            "required": ["location"]
        }),
        |_ctx, args| async move {
            let location = args.get("location").and_then(Value::as_str).unwrap_or("");
            // A real tool would call a weather API here; errors go back as `Err(ToolError)`.
            Ok(json!({"location": location, "conditions": "sunny", "temperature_c": 21}))
        },
    ));
    Server::new(config).with_tools("/", tools)
}

fn main() -> ExitCode {
    // The program is also the sandbox launcher of its agents' harness processes.
    agui_server::sandbox::main(serve)
}

async fn serve() -> ExitCode {
    let config = match ServerConfig::from_args(std::env::args()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    agui_server::init_logging(config.log_format);
    match server(config).start().await {
        Ok(running) => {
            eprintln!("serving AG-UI on http://{}/", running.addr());
            running.run_until_signal().await;
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("minimal: {e}");
            ExitCode::FAILURE
        }
    }
}
