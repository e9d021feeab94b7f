//! Running the harness's requests through the host's [`Callbacks`]. The harness waits for every
//! answer with no timeout, so each request runs in its own task (several can be in flight, and
//! a slow one holds up nothing else), and a callback that panics is answered with an error or a
//! refusal instead of leaving the harness waiting.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use harness_proto::lh::{self, InputEvent};
use harness_proto::step::{Step, StepKey, UserRequest};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::Instrument as _;

use super::Outbound;
use super::convert;
use crate::callbacks::{
    CallContext, Callbacks, HookRequest, HookResponse, PolicyOutcome, QuestionAnswer,
    QuestionRequest, ToolOutcome,
};

/// Hands one connection's requests to the callbacks and queues their answers for the writer.
pub(super) struct Dispatcher {
    conversation_id: String,
    callbacks: Arc<dyn Callbacks>,
    outbound: mpsc::UnboundedSender<Outbound>,
    /// Waiting steps already handed to a callback (the harness repeats step snapshots).
    asked: HashSet<StepKey>,
    /// In-flight callbacks (finished ones are reaped as new ones start); dropping the dispatcher
    /// aborts them (their answers could not be sent).
    tasks: JoinSet<()>,
}

impl Dispatcher {
    pub(super) fn new(
        conversation_id: String,
        callbacks: Arc<dyn Callbacks>,
        outbound: mpsc::UnboundedSender<Outbound>,
    ) -> Self {
        Self {
            conversation_id,
            callbacks,
            outbound,
            asked: HashSet::new(),
            tasks: JoinSet::new(),
        }
    }

    /// Stops every callback still running (the connection is gone).
    pub(super) fn abort_all(&mut self) {
        self.tasks.abort_all();
    }

    pub(super) fn tool_call(&mut self, call: &lh::ToolCall) {
        let ctx = self.ctx_for(call.trajectory_id());
        let request = convert::tool_request(call);
        tracing::debug!(call_id = %request.id, tool = %request.name, "tool call");
        let (id, callbacks) = (request.id.clone(), self.callbacks.clone());
        self.spawn_callback(
            format!("tool {}", request.name),
            async move { callbacks.tool_call(&ctx, request).await },
            ToolOutcome::error("the tool handler panicked"),
            move |outcome| convert::tool_answer(id, outcome),
        );
    }

    pub(super) fn hook(&mut self, request: lh::CallHookRequest) {
        let request_id = request.request_id().to_owned();
        tracing::debug!(request_id = %request_id, hook = ?request.r#type(), "hook request");
        let (trajectory, typed) = convert::hook_request(request);
        let pre_turn = matches!(typed, HookRequest::PreTurn(_));
        let ctx = self.ctx_for(&trajectory);
        let callbacks = self.callbacks.clone();
        self.spawn_callback(
            format!("hook {request_id}"),
            async move { callbacks.hook(&ctx, typed).await },
            HookResponse::Error("the hook handler panicked".into()),
            move |response| convert::hook_answer(request_id, pre_turn, response),
        );
    }

    pub(super) fn policy(&mut self, request: lh::PolicyDecisionRequest) {
        let request_id = request.request_id().to_owned();
        let typed = convert::policy_request(&request);
        let ctx = self.ctx_for(typed.tool.trajectory_id());
        let callbacks = self.callbacks.clone();
        self.spawn_callback(
            format!("policy {request_id}"),
            async move { callbacks.policy(&ctx, typed).await },
            // A failed policy must not let the call through.
            PolicyOutcome::Deny("the policy handler failed, so the call was blocked".into()),
            move |outcome| convert::policy_answer(request_id, outcome),
        );
    }

    /// A step waiting for the user: its question or confirmation goes to the callbacks once.
    pub(super) fn waiting_step(&mut self, step: &Step) {
        if !self.asked.insert(step.key.clone()) {
            return;
        }
        let ctx = self.ctx_for(&step.key.trajectory_id);
        let (trajectory_id, step_index) = (step.key.trajectory_id.clone(), step.key.index);
        let callbacks = self.callbacks.clone();
        match &step.request {
            Some(UserRequest::Questions(q)) => {
                let request = QuestionRequest {
                    trajectory_id: trajectory_id.clone(),
                    step_index,
                    questions: convert::questions(q),
                };
                let count = request.questions.len();
                self.spawn_callback(
                    format!("question {trajectory_id}:{step_index}"),
                    async move { callbacks.question(&ctx, request).await },
                    QuestionAnswer::Cancelled,
                    move |answer| {
                        convert::question_answer(trajectory_id, step_index, count, answer)
                    },
                );
            }
            Some(UserRequest::ToolConfirmation) => {
                let t = trajectory_id.clone();
                self.spawn_callback(
                    format!("confirmation {trajectory_id}:{step_index}"),
                    async move { callbacks.tool_confirmation(&ctx, &t, step_index).await },
                    false,
                    move |accepted| {
                        convert::confirmation_answer(trajectory_id, step_index, accepted)
                    },
                );
            }
            None => tracing::warn!(step = %step.key, "a waiting step without a request"),
        }
    }

    /// Runs a callback in its own task and queues its answer; a panic is answered with
    /// `if_panicked`.
    fn spawn_callback<F>(
        &mut self,
        what: String,
        future: F,
        if_panicked: F::Output,
        answer: impl FnOnce(F::Output) -> InputEvent + Send + 'static,
    ) where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Finished callbacks stay in the set until joined; reap them so a long conversation does
        // not accumulate one entry per callback.
        while self.tasks.try_join_next().is_some() {}
        let outbound = self.outbound.clone();
        self.tasks.spawn(
            async move {
                let output = match AssertUnwindSafe(future).catch_unwind().await {
                    Ok(output) => output,
                    Err(_) => {
                        tracing::error!(callback = %what, "callback panicked; answering the harness with an error");
                        if_panicked
                    }
                };
                let _ = outbound.send(Outbound::Event(answer(output), None));
            }
            .in_current_span(),
        );
    }

    /// The context of a request from `trajectory_id` (the root trajectory when empty).
    fn ctx_for(&self, trajectory_id: &str) -> CallContext {
        let trajectory_id = if trajectory_id.is_empty() {
            &self.conversation_id
        } else {
            trajectory_id
        };
        CallContext {
            conversation_id: self.conversation_id.clone(),
            trajectory_id: trajectory_id.to_owned(),
        }
    }
}
