//! Generators of well-ordered AG-UI event streams, shared by the property tests and the
//! official-client test (which checks that the client agrees they are valid).

// Each test crate that includes this module uses a different part of it.
#![allow(dead_code)]

pub(crate) mod build;

use agui_types::{
    ActivityDelta, ActivitySnapshot, EncryptedValueSubtype, Event, Interrupt, Message,
    PatchOperation, ReasoningMessageChunk, RunOutcome, SubagentFinished, SubagentStarted,
    TextMessageChunk, ToolCallChunk,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, json};

/// A well-nested piece of a run.
#[derive(Debug, Clone)]
pub(crate) enum Block {
    /// START, `parts` CONTENTs, END.
    Text { parts: u8 },
    /// Two text messages whose contents interleave.
    Interleaved { parts: u8 },
    /// A tool call (attached to the scope's last text message if `in_message`), optionally
    /// answered by a TOOL_CALL_RESULT.
    Tool {
        args: u8,
        in_message: bool,
        answered: bool,
    },
    /// A reasoning span holding reasoning messages, optionally with an encrypted value.
    Reasoning { messages: Vec<u8>, encrypted: bool },
    /// A text message sent as chunks (closed implicitly by whatever follows).
    TextChunks { parts: u8 },
    /// A tool call sent as chunks.
    ToolChunks { parts: u8 },
    /// A reasoning message sent as chunks.
    ReasoningChunks { parts: u8 },
    /// A step around nested blocks.
    Step(Vec<Block>),
    /// A subagent invocation whose nested blocks are attributed to it.
    Subagent { blocks: Vec<Block>, failed: bool },
    /// A single standalone event.
    Leaf(Leaf),
}

/// Standalone events.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Leaf {
    StateSnapshot,
    StateDelta,
    Custom,
    Raw,
    Activity,
    ToolResult,
    MessagesSnapshot,
}

/// How a run ends.
#[derive(Debug, Clone)]
pub(crate) enum End {
    /// `RUN_FINISHED` with outcome variant 0..5 (none, success, pending, interrupt, cancelled).
    Finished(u8),
    /// The run is cut after `keep`% of its body and ends with `RUN_ERROR`.
    Error { keep: u8 },
}

/// One run: its body and its end.
#[derive(Debug, Clone)]
pub(crate) struct RunSpec {
    pub(crate) blocks: Vec<Block>,
    pub(crate) end: End,
}

fn leaf() -> impl Strategy<Value = Leaf> {
    prop_oneof![
        Just(Leaf::StateSnapshot),
        Just(Leaf::StateDelta),
        Just(Leaf::Custom),
        Just(Leaf::Raw),
        Just(Leaf::Activity),
        Just(Leaf::ToolResult),
        Just(Leaf::MessagesSnapshot),
    ]
}

fn simple_block() -> impl Strategy<Value = Block> {
    prop_oneof![
        (0..4u8).prop_map(|parts| Block::Text { parts }),
        (1..4u8).prop_map(|parts| Block::Interleaved { parts }),
        (0..3u8, any::<bool>(), any::<bool>()).prop_map(|(args, in_message, answered)| {
            Block::Tool {
                args,
                in_message,
                answered,
            }
        }),
        (prop::collection::vec(0..3u8, 0..3), any::<bool>()).prop_map(|(messages, encrypted)| {
            Block::Reasoning {
                messages,
                encrypted,
            }
        }),
        (1..4u8).prop_map(|parts| Block::TextChunks { parts }),
        (1..4u8).prop_map(|parts| Block::ToolChunks { parts }),
        (1..3u8).prop_map(|parts| Block::ReasoningChunks { parts }),
        leaf().prop_map(Block::Leaf),
    ]
}

/// Arbitrary well-nested blocks (steps and subagents nest up to a few levels).
pub(crate) fn block() -> impl Strategy<Value = Block> {
    simple_block().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Block::Step),
            (prop::collection::vec(inner, 0..4), any::<bool>())
                .prop_map(|(blocks, failed)| Block::Subagent { blocks, failed }),
        ]
    })
}

/// A run that always holds at least one explicit text message.
pub(crate) fn run_spec(allow_error: bool) -> impl Strategy<Value = RunSpec> {
    let end = if allow_error {
        prop_oneof![
            (0..5u8).prop_map(End::Finished),
            (0..100u8).prop_map(|keep| End::Error { keep })
        ]
        .boxed()
    } else {
        (0..5u8).prop_map(End::Finished).boxed()
    };
    (0..3u8, prop::collection::vec(block(), 0..6), end).prop_map(|(parts, mut blocks, end)| {
        blocks.insert(0, Block::Text { parts });
        RunSpec { blocks, end }
    })
}

/// Renders runs into one stream with fresh ids.
pub(crate) fn render(runs: &[RunSpec]) -> Vec<Event> {
    let mut renderer = Renderer::default();
    for (index, run) in runs.iter().enumerate() {
        renderer.run(index, run);
    }
    renderer.events
}

#[derive(Default)]
struct Renderer {
    events: Vec<Event>,
    counter: usize,
}

/// Where blocks are rendered: which subagent they belong to and the last text message.
#[derive(Clone, Default)]
struct Scope {
    tag: Option<String>,
    last_message: Option<String>,
}

impl Renderer {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    fn push(&mut self, scope: &Scope, event: Event) {
        let event = match &scope.tag {
            Some(tag) => event.with_subagent_run_id(tag.clone()),
            None => event,
        };
        self.events.push(event);
    }

    fn run(&mut self, index: usize, run: &RunSpec) {
        let run_id = format!("run-{index}");
        self.events.push(Event::run_started("thread", &run_id));
        let body_start = self.events.len();
        let mut scope = Scope::default();
        for block in &run.blocks {
            self.block(&mut scope, block);
        }
        match run.end {
            End::Finished(outcome) => {
                let outcome = match outcome {
                    0 => None,
                    1 => Some(RunOutcome::success()),
                    2 => Some(RunOutcome::success_pending(vec!["pending-call".into()])),
                    3 => Some(RunOutcome::Interrupt {
                        interrupts: vec![Interrupt::new("int-1", Interrupt::REASON_CONFIRMATION)],
                    }),
                    _ => Some(RunOutcome::Cancelled),
                };
                let mut finished = agui_types::RunFinished::new("thread", &run_id);
                finished.outcome = outcome;
                self.events.push(finished.into());
            }
            End::Error { keep } => {
                let body = self.events.len() - body_start;
                self.events
                    .truncate(body_start + body * usize::from(keep) / 100);
                self.events
                    .push(Event::run_error("generated failure", Some("test".into())));
            }
        }
    }

    fn block(&mut self, scope: &mut Scope, block: &Block) {
        match block {
            Block::Text { parts } => {
                let id = self.fresh("msg-");
                self.push(scope, Event::text_message_start(&id));
                for part in 0..*parts {
                    self.push(
                        scope,
                        Event::text_message_content(&id, format!("part {part} ")),
                    );
                }
                self.push(scope, Event::text_message_end(&id));
                scope.last_message = Some(id);
            }
            Block::Interleaved { parts } => {
                let (a, b) = (self.fresh("msg-"), self.fresh("msg-"));
                self.push(scope, Event::text_message_start(&a));
                self.push(scope, Event::text_message_start(&b));
                for part in 0..*parts {
                    self.push(scope, Event::text_message_content(&b, format!("b{part}")));
                    self.push(scope, Event::text_message_content(&a, format!("a{part}")));
                }
                self.push(scope, Event::text_message_end(&a));
                self.push(scope, Event::text_message_end(&b));
                scope.last_message = Some(b);
            }
            Block::Tool {
                args,
                in_message,
                answered,
            } => {
                let id = self.fresh("call-");
                let parent = if *in_message {
                    scope.last_message.clone()
                } else {
                    None
                };
                self.push(scope, Event::tool_call_start(&id, "lookup", parent));
                self.push(scope, Event::tool_call_args(&id, "{\"q\":"));
                for _ in 0..*args {
                    self.push(scope, Event::tool_call_args(&id, "1"));
                }
                self.push(scope, Event::tool_call_args(&id, "}"));
                self.push(scope, Event::tool_call_end(&id));
                if *answered {
                    let result = self.fresh("result-");
                    self.push(scope, Event::tool_call_result(result, &id, "{\"ok\":true}"));
                }
            }
            Block::Reasoning {
                messages,
                encrypted,
            } => {
                let span = self.fresh("span-");
                self.push(scope, Event::reasoning_start(&span));
                for parts in messages {
                    let id = self.fresh("thought-");
                    self.push(scope, Event::reasoning_message_start(&id));
                    for part in 0..*parts {
                        self.push(
                            scope,
                            Event::reasoning_message_content(&id, format!("t{part}")),
                        );
                    }
                    self.push(scope, Event::reasoning_message_end(&id));
                    if *encrypted {
                        let value = Event::reasoning_encrypted_value(
                            EncryptedValueSubtype::Message,
                            &id,
                            "opaque",
                        );
                        self.push(scope, value);
                    }
                }
                self.push(scope, Event::reasoning_end(&span));
            }
            Block::TextChunks { parts } => {
                let id = self.fresh("chunked-");
                for part in 0..*parts {
                    let message_id = (part == 0).then(|| id.clone());
                    let chunk = TextMessageChunk {
                        message_id,
                        delta: Some(format!("c{part}")),
                        ..Default::default()
                    };
                    self.push(scope, chunk.into());
                }
            }
            Block::ToolChunks { parts } => {
                let id = self.fresh("chunked-call-");
                for part in 0..*parts {
                    let first = part == 0;
                    let chunk = ToolCallChunk {
                        tool_call_id: first.then(|| id.clone()),
                        tool_call_name: first.then(|| "lookup".to_owned()),
                        delta: Some(if first {
                            "{".to_owned()
                        } else {
                            "}".to_owned()
                        }),
                        ..Default::default()
                    };
                    self.push(scope, chunk.into());
                }
            }
            Block::ReasoningChunks { parts } => {
                let id = self.fresh("chunked-thought-");
                for part in 0..*parts {
                    let message_id = (part == 0).then(|| id.clone());
                    let chunk = ReasoningMessageChunk {
                        message_id,
                        delta: Some(format!("r{part}")),
                        ..Default::default()
                    };
                    self.push(scope, chunk.into());
                }
            }
            Block::Step(blocks) => {
                let name = self.fresh("step-");
                self.push(scope, Event::step_started(&name));
                for block in blocks {
                    self.block(scope, block);
                }
                self.push(scope, Event::step_finished(&name));
            }
            Block::Subagent { blocks, failed } => {
                let id = self.fresh("sub-");
                self.events.push(
                    SubagentStarted {
                        subagent_run_id: id.clone(),
                        name: "helper".into(),
                        parent_subagent_run_id: scope.tag.clone(),
                        ..Default::default()
                    }
                    .into(),
                );
                let mut inner = Scope {
                    tag: Some(id.clone()),
                    last_message: None,
                };
                for block in blocks {
                    self.block(&mut inner, block);
                }
                let end: Event = if *failed {
                    agui_types::SubagentError {
                        subagent_run_id: id,
                        message: "failed".into(),
                        ..Default::default()
                    }
                    .into()
                } else {
                    SubagentFinished {
                        subagent_run_id: id,
                        result: Some(json!({ "done": true })),
                        ..Default::default()
                    }
                    .into()
                };
                self.events.push(end);
            }
            Block::Leaf(leaf) => self.leaf(scope, *leaf),
        }
    }

    fn leaf(&mut self, scope: &Scope, leaf: Leaf) {
        let event = match leaf {
            Leaf::StateSnapshot => Event::state_snapshot(json!({ "n": self.counter })),
            Leaf::StateDelta => Event::state_delta(vec![PatchOperation::Replace {
                path: "/n".into(),
                value: json!(1),
            }]),
            Leaf::Custom => Event::custom("test:ping", json!(null)),
            Leaf::Raw => Event::raw(json!({ "native": true }), Some("test".into())),
            Leaf::Activity => {
                let id = self.fresh("activity-");
                let snapshot = ActivitySnapshot {
                    message_id: id.clone(),
                    activity_type: "progress".into(),
                    content: Map::from_iter([("pct".to_owned(), json!(10))]),
                    ..Default::default()
                };
                self.push(scope, snapshot.into());
                ActivityDelta {
                    message_id: id,
                    activity_type: "progress".into(),
                    patch: vec![PatchOperation::Replace {
                        path: "/pct".into(),
                        value: json!(50),
                    }],
                    ..Default::default()
                }
                .into()
            }
            Leaf::ToolResult => {
                let (message, call) = (self.fresh("result-"), self.fresh("earlier-call-"));
                Event::tool_call_result(message, call, "done")
            }
            Leaf::MessagesSnapshot => {
                let id = self.fresh("history-");
                // Run-scoped: never attributed.
                self.events
                    .push(Event::messages_snapshot(vec![Message::user(id, "hello")]));
                return;
            }
        };
        self.push(scope, event);
    }
}

/// `count` streams of 1–3 runs from a fixed seed, for tests outside proptest.
pub(crate) fn deterministic_streams(count: usize) -> Vec<Vec<Event>> {
    let config = Config::default();
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let strategy = prop::collection::vec(run_spec(true), 1..4);
    (0..count)
        .map(|_| {
            let tree = strategy
                .new_tree(&mut runner)
                .expect("the strategy generates");
            render(&tree.current())
        })
        .collect()
}
