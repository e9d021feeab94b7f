//! A minimal embedding: one Antigravity agent with a server tool registered by the program
//! (the demo's `get_weather`), served over AG-UI with the same flags, environment variables and
//! `--config` file as the binary.
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
//! tool returned, then the model's answer.

use std::process::ExitCode;

use agui_server::{Server, ServerConfig};
use agui_session::ToolRegistry;

/// The server: the configured agent at `/`, given the `get_weather` tool.
///
/// [`agui_server::demo::weather_tool`] is a [`FnTool`](agui_session::FnTool): a name, a
/// description, a JSON schema of the arguments and an async closure returning the result (a
/// real tool would call a weather API there; errors go back to the model as `Err(ToolError)`).
pub fn server(config: ServerConfig) -> Server {
    let mut tools = ToolRegistry::new();
    tools.register(agui_server::demo::weather_tool());
    Server::new(config).with_tools("/", tools)
}

fn main() -> ExitCode {
    // The program is also the sandbox launcher of its agents' harness processes.
    agui_server::sandbox::main(serve)
}

async fn serve() -> ExitCode {
    let config = match ServerConfig::from_args(std::env::args()) {
        Ok(config) => config,
        Err(agui_server::ServerError::HelpRequested(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
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
