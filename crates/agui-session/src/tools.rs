//! Server tools: async Rust functions the model can call, run in this process, with their
//! calls and results streamed to the client.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agui_types::{Context, Interrupt};
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::error::SessionError;
use crate::interrupts::InterruptAnswer;
use crate::thread::link::ThreadLink;
use crate::thread::parking::InterruptKind;

/// A failure of a server tool; the model sees `There was an error executing <tool>: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl ToolError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// An error from any error type.
    pub fn from_error(error: impl std::fmt::Display) -> Self {
        Self(error.to_string())
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// A tool that runs in this process.
#[async_trait]
pub trait ServerTool: Send + Sync + 'static {
    /// Function name the model calls.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// JSON Schema of its arguments (an object schema).
    fn parameters(&self) -> Value;
    /// Runs the tool. A string result is shown as-is; anything else as JSON.
    async fn call(
        &self,
        ctx: ToolContext,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError>;
}

type BoxedCall = Box<
    dyn Fn(
            ToolContext,
            Map<String, Value>,
        ) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>
        + Send
        + Sync,
>;

/// A [`ServerTool`] made from a closure.
pub struct FnTool {
    name: String,
    description: String,
    parameters: Value,
    call: BoxedCall,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl FnTool {
    /// A tool named `name` that runs `call`.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        call: F,
    ) -> Self
    where
        F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            call: Box::new(move |ctx, args| Box::pin(call(ctx, args))),
        }
    }
}

#[async_trait]
impl ServerTool for FnTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn call(
        &self,
        ctx: ToolContext,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        (self.call)(ctx, arguments).await
    }
}

/// The server tools of an agent, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn ServerTool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a second tool with the same name replaces the first.
    pub fn register(&mut self, tool: impl ServerTool) -> &mut Self {
        self.tools.insert(tool.name().to_owned(), Arc::new(tool));
        self
    }

    /// Adds a shared tool.
    pub fn register_arc(&mut self, tool: Arc<dyn ServerTool>) -> &mut Self {
        self.tools.insert(tool.name().to_owned(), tool);
        self
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn ServerTool>> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn ServerTool>> {
        self.tools.values()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// An interrupt a server tool raises to ask the user something.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InterruptRequest {
    /// Why (an open vocabulary; namespace custom reasons, e.g. `myapp:pick_time`).
    pub reason: String,
    /// Text for the user.
    pub message: Option<String>,
    /// Data the UI needs (CopilotKit relays only the protocol's own fields, so put it here).
    pub metadata: Option<Map<String, Value>>,
    /// JSON Schema of the expected answer.
    pub response_schema: Option<Map<String, Value>>,
}

/// What a server tool can see and do while it runs.
#[derive(Clone)]
pub struct ToolContext {
    pub(crate) link: ThreadLink,
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    /// The trajectory whose call this is (an interrupt blocks it).
    pub(crate) trajectory: String,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("thread_id", &self.thread_id())
            .field("tool_call_id", &self.tool_call_id)
            .finish()
    }
}

impl ToolContext {
    /// The AG-UI thread.
    pub fn thread_id(&self) -> &str {
        &self.link.thread_id
    }

    /// The AG-UI id of this call.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The run's `RunAgentInput.context`.
    pub fn context(&self) -> Vec<Context> {
        self.link.shared.context()
    }

    /// A copy of the thread's shared state.
    pub fn state(&self) -> Value {
        self.link.shared.state()
    }

    /// Replaces the shared state; the client gets a `STATE_SNAPSHOT` at once (before this
    /// tool's result), or with the next run if none is attached.
    pub fn set_state(&self, state: Value) -> Result<(), SessionError> {
        if !state.is_object() {
            return Err(SessionError::StateNotAnObject);
        }
        self.link.shared.set_state(state.clone());
        self.link
            .emit(None, [agui_types::Event::state_snapshot(state)]);
        Ok(())
    }

    /// Pauses the tool on an interrupt until a later run answers it (resolved, cancelled), the
    /// user moves on (abandoned), or the session closes.
    pub async fn interrupt(&self, request: InterruptRequest) -> InterruptAnswer {
        let interrupt = Interrupt {
            id: uuid::Uuid::new_v4().to_string(),
            reason: if request.reason.is_empty() {
                format!("tool:{}", self.tool_name)
            } else {
                request.reason
            },
            message: request.message,
            tool_call_id: Some(self.tool_call_id.clone()),
            response_schema: request.response_schema,
            metadata: request.metadata,
            ..Interrupt::default()
        };
        self.link
            .interrupt(interrupt, InterruptKind::Tool, &self.trajectory)
            .await
    }
}
