//! How a thread answers the harness: server tools run here (on the harness's callback task),
//! frontend tools, questions and approvals are parked by the thread's task until the client
//! answers, and the tool budget is counted there too.

use std::collections::BTreeSet;

use agui_types::Event;
use async_trait::async_trait;
use harness_client::{
    CallContext, Callbacks, HookRequest, HookResponse, QuestionAnswer, QuestionRequest,
    ToolCallRequest, ToolOutcome,
};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::link::{Request, ThreadLink};
use super::parking::{InterruptKind, ToolAnswer};
use crate::interrupts::{self, ABANDONED_TEXT};
use crate::tools::{ToolContext, ToolRegistry};

/// Name of the silent tool returning the run's context.
pub const APP_CONTEXT_TOOL: &str = "get_app_context";
/// Name of the silent tool returning the shared state.
pub const APP_STATE_TOOL: &str = "get_shared_state";

/// What a conversation's callbacks need to know about the agent.
#[derive(Debug, Clone)]
pub(crate) struct CallbackPolicy {
    pub(crate) frontend_tools: BTreeSet<String>,
    pub(crate) silent_tools: BTreeSet<String>,
    pub(crate) tool_approval: bool,
    pub(crate) auto_approve: BTreeSet<String>,
    pub(crate) max_tool_calls: Option<u32>,
    pub(crate) questions: bool,
    pub(crate) reasons: crate::choices::InterruptReasons,
}

/// The harness callbacks of one thread's conversation.
pub(crate) struct ThreadCallbacks {
    pub(crate) link: ThreadLink,
    pub(crate) tools: ToolRegistry,
    pub(crate) policy: CallbackPolicy,
}

#[async_trait]
impl Callbacks for ThreadCallbacks {
    async fn tool_call(&self, ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        if self.policy.silent_tools.contains(&call.name) {
            return self.silent_tool(&call.name);
        }
        if let Some(tool) = self.tools.get(&call.name).cloned() {
            return self.server_tool(tool, &ctx.trajectory_id, call).await;
        }
        if self.policy.frontend_tools.contains(&call.name) {
            let (reply, answer) = oneshot::channel();
            self.link.send(Request::FrontendTool {
                harness_id: call.id,
                name: call.name,
                arguments: call.arguments,
                trajectory: ctx.trajectory_id.clone(),
                reply,
            });
            return tool_outcome(answer.await.unwrap_or(ToolAnswer::Closed));
        }
        ToolOutcome::error(format!(
            "the tool `{}` is not available in this session",
            call.name
        ))
    }

    async fn hook(&self, ctx: &CallContext, request: HookRequest) -> HookResponse {
        let HookRequest::PreTool(args) = request else {
            return match request {
                HookRequest::PreTurn(_) => HookResponse::Allow {
                    modified_args: None,
                },
                HookRequest::Stop(_) => HookResponse::AllowStop,
                _ => HookResponse::Empty,
            };
        };
        let name = args.tool_name().to_owned();
        if let Some(max) = self.policy.max_tool_calls {
            let (reply, within) = oneshot::channel();
            self.link.send(Request::CountToolCall { max, reply });
            if !within.await.unwrap_or(false) {
                return HookResponse::Deny(format!(
                    "Tool call limit reached ({max} per turn); the turn is being stopped."
                ));
            }
        }
        let needs_approval = self.policy.tool_approval
            && !self.policy.frontend_tools.contains(&name)
            && !self.policy.silent_tools.contains(&name)
            && !self.policy.auto_approve.contains(&name);
        if !needs_approval {
            return HookResponse::Allow {
                modified_args: None,
            };
        }
        let arguments: Value = serde_json::from_str(args.arguments_json()).unwrap_or(Value::Null);
        let interrupt = interrupts::approval_interrupt(
            uuid::Uuid::new_v4().to_string(),
            self.policy.reasons.approval(),
            &name,
            &arguments,
        );
        let answer = self
            .link
            .interrupt(interrupt, InterruptKind::Approval, &ctx.trajectory_id)
            .await;
        match interrupts::approval_decision(&answer, &name) {
            Ok(()) => HookResponse::Allow {
                modified_args: None,
            },
            Err(reason) => HookResponse::Deny(reason),
        }
    }

    async fn question(&self, ctx: &CallContext, request: QuestionRequest) -> QuestionAnswer {
        if !self.policy.questions {
            return QuestionAnswer::Answers(vec![
                harness_client::Answer::Unanswered;
                request.questions.len()
            ]);
        }
        let interrupt = interrupts::question_interrupt(
            uuid::Uuid::new_v4().to_string(),
            self.policy.reasons.question(),
            &request.questions,
        );
        let answer = self
            .link
            .interrupt(interrupt, InterruptKind::Question, &ctx.trajectory_id)
            .await;
        interrupts::question_answer(&answer, &request.questions)
    }
}

impl ThreadCallbacks {
    fn silent_tool(&self, name: &str) -> ToolOutcome {
        match name {
            APP_CONTEXT_TOOL => {
                let context: Vec<Value> = self
                    .link
                    .shared
                    .context()
                    .into_iter()
                    .map(|c| serde_json::json!({"description": c.description, "value": c.value}))
                    .collect();
                ToolOutcome::json(serde_json::json!({"context": context}))
            }
            _ => ToolOutcome::json(serde_json::json!({"state": self.link.shared.state()})),
        }
    }

    async fn server_tool(
        &self,
        tool: std::sync::Arc<dyn crate::tools::ServerTool>,
        trajectory: &str,
        call: ToolCallRequest,
    ) -> ToolOutcome {
        let id = self.link.tool_call_id(&call.id);
        self.link.emit(
            Some(trajectory),
            tool_call_events(&id, &call.name, &call.arguments),
        );
        let ctx = ToolContext {
            link: self.link.clone(),
            tool_call_id: id.clone(),
            tool_name: call.name.clone(),
            trajectory: trajectory.to_owned(),
        };
        tracing::debug!(thread_id = %self.link.thread_id, tool = %call.name, tool_call_id = %id, "server tool call");
        let result = tool.call(ctx, call.arguments).await;
        let (content, outcome) = match result {
            Ok(Value::String(text)) => (text.clone(), ToolOutcome::json(Value::String(text))),
            Ok(value) => (value.to_string(), ToolOutcome::json(value)),
            Err(e) => {
                let text = format!("There was an error executing {}: {e}", call.name);
                (text, ToolOutcome::error(e.to_string()))
            }
        };
        // A stable id: a reconnecting client keeps the message it already has.
        self.link.emit(
            None,
            [Event::tool_call_result(
                format!("{id}-result"),
                &id,
                content,
            )],
        );
        outcome
    }
}

/// `TOOL_CALL_START/ARGS/END` for a call the thread shows itself; the thread's task attaches
/// it to the trajectory's open reply when it delivers it.
pub(crate) fn tool_call_events(id: &str, name: &str, arguments: &Map<String, Value>) -> [Event; 3] {
    [
        Event::tool_call_start(id, name, None),
        Event::tool_call_args(id, serde_json::to_string(arguments).unwrap_or_default()),
        Event::tool_call_end(id),
    ]
}

/// What the model receives for a frontend tool's answer.
fn tool_outcome(answer: ToolAnswer) -> ToolOutcome {
    match answer {
        ToolAnswer::Result(text) => match serde_json::from_str::<Value>(&text) {
            Ok(value @ (Value::Object(_) | Value::Array(_))) => ToolOutcome::json(value),
            _ => ToolOutcome::json(Value::String(text)),
        },
        ToolAnswer::Error(message) => ToolOutcome::error(message),
        ToolAnswer::Abandoned => ToolOutcome::json(Value::String(ABANDONED_TEXT.into())),
        ToolAnswer::Closed => {
            ToolOutcome::error("The session was closed before the client replied.")
        }
    }
}
