//! The one list of AG-UI 1.0 event types.
//!
//! Every per-type table in the crate ([`crate::Event`], [`crate::EventType`], the protobuf
//! envelope mapping) is generated from this list, so adding a type touches one place. Variant
//! names equal the prost-generated envelope arm and `EventType` names, which lets the protobuf
//! mapping refer to `proto::event::Event::$variant` directly.

/// Calls `$callback! { $(#[doc] Variant(Payload) = "WIRE_NAME",)* }` with every event type,
/// in protobuf `EventType` order.
macro_rules! event_list {
    ($callback:ident) => {
        $callback! {
            /// `TEXT_MESSAGE_START`: opens a streamed text message.
            TextMessageStart(TextMessageStart) = "TEXT_MESSAGE_START",
            /// `TEXT_MESSAGE_CONTENT`: appends a fragment to an open text message.
            TextMessageContent(TextMessageContent) = "TEXT_MESSAGE_CONTENT",
            /// `TEXT_MESSAGE_END`: closes a text message.
            TextMessageEnd(TextMessageEnd) = "TEXT_MESSAGE_END",
            /// `TOOL_CALL_START`: opens a tool call.
            ToolCallStart(ToolCallStart) = "TOOL_CALL_START",
            /// `TOOL_CALL_ARGS`: appends a fragment of the call's JSON arguments.
            ToolCallArgs(ToolCallArgs) = "TOOL_CALL_ARGS",
            /// `TOOL_CALL_END`: the call's arguments are complete.
            ToolCallEnd(ToolCallEnd) = "TOOL_CALL_END",
            /// `STATE_SNAPSHOT`: replaces the shared state wholesale.
            StateSnapshot(StateSnapshot) = "STATE_SNAPSHOT",
            /// `STATE_DELTA`: a JSON Patch against the shared state.
            StateDelta(StateDelta) = "STATE_DELTA",
            /// `MESSAGES_SNAPSHOT`: the whole conversation as the agent sees it.
            MessagesSnapshot(MessagesSnapshot) = "MESSAGES_SNAPSHOT",
            /// `RAW`: a provider-native event passed through.
            Raw(Raw) = "RAW",
            /// `CUSTOM`: an application-defined event.
            Custom(Custom) = "CUSTOM",
            /// `RUN_STARTED`: the first event of a run.
            RunStarted(RunStarted) = "RUN_STARTED",
            /// `RUN_FINISHED`: ends a run that did not fail.
            RunFinished(RunFinished) = "RUN_FINISHED",
            /// `RUN_ERROR`: ends a failed run.
            RunError(RunError) = "RUN_ERROR",
            /// `STEP_STARTED`: opens a named step.
            StepStarted(StepStarted) = "STEP_STARTED",
            /// `STEP_FINISHED`: closes a named step.
            StepFinished(StepFinished) = "STEP_FINISHED",
            /// `SUBAGENT_STARTED`: a subagent invocation begins.
            SubagentStarted(SubagentStarted) = "SUBAGENT_STARTED",
            /// `SUBAGENT_FINISHED`: a subagent invocation's segment ends.
            SubagentFinished(SubagentFinished) = "SUBAGENT_FINISHED",
            /// `SUBAGENT_ERROR`: a subagent invocation failed (the run goes on).
            SubagentError(SubagentError) = "SUBAGENT_ERROR",
            /// `TEXT_MESSAGE_CHUNK`: shorthand the client expands into start/content/end.
            TextMessageChunk(TextMessageChunk) = "TEXT_MESSAGE_CHUNK",
            /// `TOOL_CALL_CHUNK`: shorthand the client expands into start/args/end.
            ToolCallChunk(ToolCallChunk) = "TOOL_CALL_CHUNK",
            /// `TOOL_CALL_RESULT`: a tool's output, minting a `tool` message.
            ToolCallResult(ToolCallResult) = "TOOL_CALL_RESULT",
            /// `ACTIVITY_SNAPSHOT`: creates or overwrites an activity message.
            ActivitySnapshot(ActivitySnapshot) = "ACTIVITY_SNAPSHOT",
            /// `ACTIVITY_DELTA`: a JSON Patch against an activity message's content.
            ActivityDelta(ActivityDelta) = "ACTIVITY_DELTA",
            /// `REASONING_START`: opens a reasoning span.
            ReasoningStart(ReasoningStart) = "REASONING_START",
            /// `REASONING_MESSAGE_START`: opens a reasoning message.
            ReasoningMessageStart(ReasoningMessageStart) = "REASONING_MESSAGE_START",
            /// `REASONING_MESSAGE_CONTENT`: appends to an open reasoning message.
            ReasoningMessageContent(ReasoningMessageContent) = "REASONING_MESSAGE_CONTENT",
            /// `REASONING_MESSAGE_END`: closes a reasoning message.
            ReasoningMessageEnd(ReasoningMessageEnd) = "REASONING_MESSAGE_END",
            /// `REASONING_MESSAGE_CHUNK`: shorthand the client expands like text chunks.
            ReasoningMessageChunk(ReasoningMessageChunk) = "REASONING_MESSAGE_CHUNK",
            /// `REASONING_END`: closes a reasoning span.
            ReasoningEnd(ReasoningEnd) = "REASONING_END",
            /// `REASONING_ENCRYPTED_VALUE`: an opaque provider reasoning artefact.
            ReasoningEncryptedValue(ReasoningEncryptedValue) = "REASONING_ENCRYPTED_VALUE",
        }
    };
}

pub(crate) use event_list;
