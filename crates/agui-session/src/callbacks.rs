//! How a session answers the harness: server tools run here, frontend tools and questions
//! park until the client answers, approvals and the tool budget go through the pre-tool hook.

use std::collections::BTreeSet;
use std::sync::Arc;

use agui_types::Event;
use async_trait::async_trait;
use harness_client::{
    CallContext, Callbacks, HookRequest, HookResponse, QuestionAnswer, QuestionRequest,
    ToolCallRequest, ToolOutcome,
};
use serde_json::{Map, Value};

use crate::bridge::{Bridge, ClaimResult, InterruptKind, ToolAnswer, tool_call_events};
use crate::interrupts::{self, ABANDONED_TEXT, InterruptAnswer};
use crate::tools::{ToolContext, ToolRegistry};

/// Name of the silent tool returning the run's context.
pub const APP_CONTEXT_TOOL: &str = "get_app_context";
/// Name of the silent tool returning the shared state.
pub const APP_STATE_TOOL: &str = "get_shared_state";

/// What a session's callbacks need to know about the agent.
#[derive(Debug, Clone)]
pub(crate) struct CallbackPolicy {
    pub(crate) frontend_tools: BTreeSet<String>,
    pub(crate) silent_tools: BTreeSet<String>,
    pub(crate) deduplicate: bool,
    pub(crate) tool_approval: bool,
    pub(crate) auto_approve: BTreeSet<String>,
    pub(crate) max_tool_calls: Option<u32>,
    pub(crate) questions: bool,
    pub(crate) reasons: crate::InterruptReasons,
}

pub(crate) struct SessionCallbacks {
    pub(crate) bridge: Arc<Bridge>,
    pub(crate) tools: ToolRegistry,
    pub(crate) policy: CallbackPolicy,
}

#[async_trait]
impl Callbacks for SessionCallbacks {
    async fn tool_call(&self, ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        if self.policy.silent_tools.contains(&call.name) {
            return self.silent_tool(&call.name);
        }
        if let Some(tool) = self.tools.get(&call.name).cloned() {
            return self.server_tool(tool, &ctx.trajectory_id, call).await;
        }
        if self.policy.frontend_tools.contains(&call.name) {
            return self.frontend_tool(&ctx.trajectory_id, call).await;
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
        if let Some(max) = self.policy.max_tool_calls
            && !self.bridge.count_tool_call(max)
        {
            return HookResponse::Deny(format!(
                "Tool call limit reached ({max} per turn); the turn is being stopped."
            ));
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
            .bridge
            .park_interrupt(interrupt, InterruptKind::Approval, &ctx.trajectory_id)
            .await
            .unwrap_or(InterruptAnswer::Closed);
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
            .bridge
            .park_interrupt(interrupt, InterruptKind::Question, &ctx.trajectory_id)
            .await
            .unwrap_or(InterruptAnswer::Closed);
        interrupts::question_answer(&answer, &request.questions)
    }
}

impl SessionCallbacks {
    fn silent_tool(&self, name: &str) -> ToolOutcome {
        match name {
            APP_CONTEXT_TOOL => {
                let context: Vec<Value> = self
                    .bridge
                    .context()
                    .into_iter()
                    .map(|c| serde_json::json!({"description": c.description, "value": c.value}))
                    .collect();
                ToolOutcome::json(serde_json::json!({"context": context}))
            }
            _ => ToolOutcome::json(serde_json::json!({"state": self.bridge.shared_state()})),
        }
    }

    async fn server_tool(
        &self,
        tool: Arc<dyn crate::tools::ServerTool>,
        trajectory: &str,
        call: ToolCallRequest,
    ) -> ToolOutcome {
        let id = self.bridge.tool_call_id(&call.id);
        self.bridge.emit_in(
            Some(trajectory),
            tool_call_events(&id, &call.name, &call.arguments),
        );
        let ctx = ToolContext {
            bridge: self.bridge.clone(),
            tool_call_id: id.clone(),
            tool_name: call.name.clone(),
            trajectory: trajectory.to_owned(),
        };
        tracing::debug!(thread_id = %self.bridge.thread_id(), tool = %call.name, tool_call_id = %id, "server tool call");
        let result = tool.call(ctx, call.arguments).await;
        let (content, outcome) = match result {
            Ok(Value::String(text)) => (text.clone(), ToolOutcome::json(Value::String(text))),
            Ok(value) => (value.to_string(), ToolOutcome::json(value)),
            Err(e) => {
                let text = format!("There was an error executing {}: {e}", call.name);
                (text, ToolOutcome::error(e.to_string()))
            }
        };
        self.bridge.emit([Event::tool_call_result(
            uuid::Uuid::new_v4().to_string(),
            &id,
            content,
        )]);
        outcome
    }

    async fn frontend_tool(&self, trajectory: &str, call: ToolCallRequest) -> ToolOutcome {
        if let Some(answer) = self.bridge.callback_arrived(&call.id) {
            // Shown to the client with its parallel group before the harness asked for it.
            let answer = answer.await.unwrap_or(ToolAnswer::Closed);
            if self.policy.deduplicate {
                self.bridge.settle_claim(&call.name, &answer);
            }
            return tool_outcome(answer);
        }
        if self.policy.deduplicate {
            match self.bridge.claim(&call.name, &call.arguments) {
                ClaimResult::First => {}
                ClaimResult::Same(answer) => {
                    tracing::debug!(tool = %call.name, "repeated frontend tool call; reusing the first result");
                    return tool_outcome(answer.await.unwrap_or(ToolAnswer::Closed));
                }
                ClaimResult::Different {
                    first_arguments,
                    answer,
                } => {
                    tracing::debug!(tool = %call.name, "frontend tool called again with other arguments; not re-run");
                    let first = answer.await.unwrap_or(ToolAnswer::Closed);
                    return ToolOutcome::json(Value::String(already_ran(
                        &call.name,
                        &first_arguments,
                        &first,
                    )));
                }
            }
        }
        let id = self.bridge.tool_call_id(&call.id);
        let answer = self
            .bridge
            .park_tool(id.clone(), call.name.clone(), trajectory);
        self.bridge.emit_in(
            Some(trajectory),
            tool_call_events(&id, &call.name, &call.arguments),
        );
        tracing::debug!(thread_id = %self.bridge.thread_id(), tool = %call.name, tool_call_id = %id, "frontend tool parked");
        let answer = answer.await.unwrap_or(ToolAnswer::Closed);
        if self.policy.deduplicate {
            self.bridge.settle_claim(&call.name, &answer);
        }
        tool_outcome(answer)
    }
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

fn already_ran(name: &str, arguments: &Map<String, Value>, first: &ToolAnswer) -> String {
    let returned = match first {
        ToolAnswer::Result(text) => text.clone(),
        ToolAnswer::Error(e) => format!("an error: {e}"),
        ToolAnswer::Abandoned => ABANDONED_TEXT.to_owned(),
        ToolAnswer::Closed => "nothing (the session closed)".to_owned(),
    };
    format!(
        "{name} already ran in this turn with arguments {} and returned {returned}. It was not run again. Tell the \
         user the result; only call it again on a later turn if they ask for another change.",
        json_text(arguments)
    )
}

/// Arguments as JSON text (a map of JSON values always serialises).
fn json_text(arguments: &Map<String, Value>) -> String {
    serde_json::to_string(arguments).unwrap_or_default()
}
