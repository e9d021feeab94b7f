//! Runs the scripted model on its own, for tests in other languages and manual poking.
//!
//! ```sh
//! gemini-script [--port 4011] [--script script.json | --demo] [--stop-on-eof] [--log-limit N]
//! ```
//!
//! Prints `gemini-script listening on http://127.0.0.1:<port>` once ready, then serves until
//! SIGINT/SIGTERM arrives (or, with `--stop-on-eof`, until stdin closes: a test harness that
//! dies then never leaves the model running). Scripts can be replaced at runtime through the
//! control routes (`POST /_script/load`, …; see the crate README). `--log-limit N` keeps only the
//! newest N requests in the log (0: none), for long runs such as benchmarks.

use std::process::ExitCode;

use gemini_script::{Script, ScriptedModel};

fn usage() -> ExitCode {
    eprintln!(
        "usage: gemini-script [--port PORT] [--script FILE | --demo] [--stop-on-eof] [--log-limit N]"
    );
    ExitCode::from(2)
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut port = 0u16;
    let mut script = Script::new();
    let mut stop_on_eof = false;
    let mut log_limit = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => match args.next().and_then(|p| p.parse().ok()) {
                Some(p) => port = p,
                None => return usage(),
            },
            "--script" => match args.next().map(Script::from_file) {
                Some(Ok(s)) => script = s,
                Some(Err(e)) => {
                    eprintln!("gemini-script: {e}");
                    return ExitCode::from(2);
                }
                None => return usage(),
            },
            "--demo" => script = gemini_script::demo::script(),
            "--log-limit" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => log_limit = Some(n),
                None => return usage(),
            },
            "--stop-on-eof" => stop_on_eof = true,
            "-h" | "--help" => {
                usage();
                return ExitCode::SUCCESS;
            }
            _ => return usage(),
        }
    }
    let handle = match ScriptedModel::start_on(port, script).await {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("gemini-script: {e}");
            return ExitCode::FAILURE;
        }
    };
    handle.set_log_limit(log_limit);
    println!("gemini-script listening on {}", handle.base_url());
    let stdin_closed = async move {
        if !stop_on_eof {
            return std::future::pending().await;
        }
        // A detached thread, not `spawn_blocking`: the runtime waits for blocking tasks when it
        // shuts down, so a signal would otherwise leave the process stuck reading stdin.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = tx.send(());
        });
        let _ = rx.await;
    };
    tokio::select! {
        _ = stdin_closed => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate() => {}
    }
    handle.shutdown().await;
    ExitCode::SUCCESS
}

async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
