//! W5 commands: `runs` pairs of sequential turns on one warmed-up thread, alternating a
//! text-only turn and a turn whose model runs `true` with `run_command` before the standard
//! reply. Their difference is what one command costs (a tool step and a second model request);
//! comparing it between a confined run (`--sandbox owner`, the server's default, or `thread`)
//! and `--sandbox off` gives what confinement adds per command. No floor: the figure of
//! interest is a difference on the server.

use serde::Serialize;

use super::{Ctx, Series, progress};
use crate::agui::Thread;
use crate::launch::ServerSettings;
use crate::model::RUN_COMMAND_TAG;
use crate::stats::Summary;

/// W5's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Params {
    pub(crate) runs: usize,
    pub(crate) warmup: usize,
}

/// W5's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W5 {
    pub(crate) params: Params,
    pub(crate) text: Series,
    pub(crate) command: Series,
    /// Each command turn's end minus the text-only turn just before it (ms).
    pub(crate) command_minus_text_ms: Summary,
}

/// Runs W5 against a fresh server.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W5> {
    progress("W5: server");
    let server = ctx.server("w5", &ServerSettings::default()).await?;
    let url = server.url.clone();
    let mut thread = Thread::new("w5");
    for i in 0..params.warmup {
        let body = thread.next_turn(&format!("Warm up ({i}). {RUN_COMMAND_TAG}"), &[]);
        let r = ctx.run(&url, &body).await;
        thread.record_reply(&r.text);
    }
    let (mut text, mut command, mut differences) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..params.runs {
        let body = thread.next_turn(&format!("Tell me more ({i})."), &[]);
        let plain = ctx.run(&url, &body).await;
        thread.record_reply(&plain.text);
        let body = thread.next_turn(&format!("Check something ({i}). {RUN_COMMAND_TAG}"), &[]);
        let with_command = ctx.run(&url, &body).await;
        thread.record_reply(&with_command.text);
        if let (true, true, Some(a), Some(b)) = (
            plain.ok(),
            with_command.ok(),
            plain.terminal,
            with_command.terminal,
        ) {
            differences.push(crate::stats::ms(b) - crate::stats::ms(a));
        }
        text.push(plain);
        command.push(with_command);
    }
    server.stop().await;
    let expected = Some(ctx.expected.as_str());
    Ok(W5 {
        params,
        text: Series::of(&text, expected),
        command: Series::of(&command, expected),
        command_minus_text_ms: Summary::of_ms(differences),
    })
}
