//! W6 forks (issue 42): what a regenerate costs against a new thread's first turn. Each of
//! `runs` iterations starts a new thread (its first turn is the "new thread" figure), gives it
//! a second turn, then regenerates that turn's answer (the history up to its user message): the
//! server forks the thread — the harness's saved trajectory read and cut, a new conversation
//! opened from it — and answers again. No floor: the figure of interest is the server's.

use serde::Serialize;

use super::{Ctx, Series, progress};
use crate::agui::Thread;
use crate::launch::ServerSettings;
use crate::stats::Summary;

/// W6's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Params {
    pub(crate) runs: usize,
}

/// W6's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W6 {
    pub(crate) params: Params,
    /// A new thread's first turn.
    pub(crate) new_thread: Series,
    /// The second turn, on the thread's open conversation.
    pub(crate) next_turn: Series,
    /// The regenerate of the second turn's answer (a fork).
    pub(crate) fork: Series,
    /// Each fork's end minus its thread's first turn (ms).
    pub(crate) fork_minus_new_ms: Summary,
}

/// Runs W6 against a fresh server.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W6> {
    progress("W6: server");
    let server = ctx.server("w6", &ServerSettings::default()).await?;
    let url = server.url.clone();
    let (mut new_thread, mut next_turn, mut fork, mut differences) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..params.runs {
        let mut thread = Thread::new("w6");
        let body = thread.next_turn(&format!("Hello ({i})."), &[]);
        let first = ctx.run(&url, &body).await;
        thread.record_reply(&first.text);
        let body = thread.next_turn(&format!("Tell me more ({i})."), &[]);
        let second = ctx.run(&url, &body).await;
        // A regenerate: the history up to the user message whose answer is asked again.
        let body = thread.input(&[]);
        let regenerated = ctx.run(&url, &body).await;
        if let (true, true, Some(a), Some(b)) = (
            first.ok(),
            regenerated.ok(),
            first.terminal,
            regenerated.terminal,
        ) {
            differences.push(crate::stats::ms(b) - crate::stats::ms(a));
        }
        new_thread.push(first);
        next_turn.push(second);
        fork.push(regenerated);
    }
    server.stop().await;
    let expected = Some(ctx.expected.as_str());
    Ok(W6 {
        params,
        new_thread: Series::of(&new_thread, expected),
        next_turn: Series::of(&next_turn, expected),
        fork: Series::of(&fork, expected),
        fork_minus_new_ms: Summary::of_ms(differences),
    })
}
