//! The `agui-antigravity` binary.

use std::process::ExitCode;

use agui_server::cli::{Cli, Command};
use agui_server::{Server, ServerConfig, init_logging};

fn main() -> ExitCode {
    // `agui-antigravity __sandbox-exec …`: this process is a sandbox launcher (before any thread).
    if let Some(code) = agui_server::sandbox::launcher_if_asked() {
        return code;
    }
    let cli = Cli::parse_args(std::env::args().collect());
    let (check_only, args) = match cli.command {
        Command::Serve(args) => (false, args),
        Command::CheckConfig(args) => (true, args),
    };
    let config = match ServerConfig::from_serve_args(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agui-antigravity: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(config.log_format);
    if check_only {
        println!("{:#?}", config.redacted());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agui-antigravity: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match Server::new(config).start().await {
            Ok(server) => {
                eprintln!(
                    "agui-antigravity: serving AG-UI on http://{}",
                    server.addr()
                );
                server.run_until_signal().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "could not start");
                eprintln!("agui-antigravity: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
