//! One test per translation rule, data-driven: a script of inputs and the expected events,
//! one per line (`check` also asserts the stream passes the verifier).

mod common;

use agui_translate::{StructuredOutput, SubagentEvents, TrajectoryStatus, TranslatorOptions};
use common::{check, check_with, close, idle, running, step, trajectory_change};
use serde_json::json;

#[test]
fn user_echo_and_system_messages_are_never_assistant_text() {
    check(
        &[
            step("r", 0).user().say("Say hello").done(),
            step("r", 1)
                .system()
                .say("[Message] sender=system content=x")
                .done(),
            step("r", 2).compaction().say("Compacted").done(),
            step("r", 3).say("Hello").done(),
        ],
        "
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=Hello messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        ",
    );
}

#[test]
fn text_streams_into_one_message_per_step_closed_at_done() {
    check(
        &[
            step("r", 1).say("Hello "),
            step("r", 1).say("world"),
            step("r", 1),
            step("r", 1).done(),
        ],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta="Hello " messageId=text-1
        TEXT_MESSAGE_CONTENT delta=world messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        "#,
    );
}

#[test]
fn repeated_and_stale_snapshots_add_nothing() {
    check(
        &[
            step("r", 1).say("Hello ").full_text("Hello "),
            step("r", 1).say("world").full_text("Hello world"),
            // The same snapshot again, then an older one: both already sent.
            step("r", 1).say("world").full_text("Hello world"),
            step("r", 1).say("Hello ").full_text("Hello "),
            // A missed snapshot: the cumulative text still brings everything.
            step("r", 1)
                .say("!")
                .full_text("Hello world, again!")
                .done(),
        ],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta="Hello " messageId=text-1
        TEXT_MESSAGE_CONTENT delta=world messageId=text-1
        TEXT_MESSAGE_CONTENT delta=", again!" messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        "#,
    );
}

#[test]
fn a_step_first_seen_at_done_is_sent_whole() {
    check(
        &[step("r", 5).say("turn two reply").done()],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta="turn two reply" messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        "#,
    );
}

#[test]
fn reasoning_is_bracketed_and_closed_before_text() {
    check(
        &[
            step("r", 1).think("Let me "),
            step("r", 1).think("think."),
            step("r", 1).say("Answer."),
            step("r", 1).done(),
        ],
        r#"
        REASONING_START messageId=reasoning-1
        REASONING_MESSAGE_START messageId=reasoning-1
        REASONING_MESSAGE_CONTENT delta="Let me " messageId=reasoning-1
        REASONING_MESSAGE_CONTENT delta=think. messageId=reasoning-1
        REASONING_MESSAGE_END messageId=reasoning-1
        REASONING_END messageId=reasoning-1
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=Answer. messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        "#,
    );
}

#[test]
fn thinking_after_text_closes_the_message_and_later_text_gets_a_fresh_id() {
    check(
        &[
            step("r", 1).say("First."),
            step("r", 1).think("Hmm."),
            step("r", 1).say("Second.").done(),
        ],
        "
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=First. messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        REASONING_START messageId=reasoning-1
        REASONING_MESSAGE_START messageId=reasoning-1
        REASONING_MESSAGE_CONTENT delta=Hmm. messageId=reasoning-1
        REASONING_MESSAGE_END messageId=reasoning-1
        REASONING_END messageId=reasoning-1
        TEXT_MESSAGE_START messageId=text-2
        TEXT_MESSAGE_CONTENT delta=Second. messageId=text-2
        TEXT_MESSAGE_END messageId=text-2
        -- run end
        ",
    );
}

#[test]
fn reasoning_of_another_step_opens_a_new_span() {
    check(
        &[
            step("r", 1).think("a"),
            step("r", 2).think("b"),
            step("r", 1).done(),
            step("r", 2).done(),
        ],
        "
        REASONING_START messageId=reasoning-1
        REASONING_MESSAGE_START messageId=reasoning-1
        REASONING_MESSAGE_CONTENT delta=a messageId=reasoning-1
        REASONING_MESSAGE_END messageId=reasoning-1
        REASONING_END messageId=reasoning-1
        REASONING_START messageId=reasoning-2
        REASONING_MESSAGE_START messageId=reasoning-2
        REASONING_MESSAGE_CONTENT delta=b messageId=reasoning-2
        REASONING_MESSAGE_END messageId=reasoning-2
        REASONING_END messageId=reasoning-2
        -- run end
        ",
    );
}

#[test]
fn a_tool_call_stays_inside_the_open_message_and_closes_reasoning() {
    check(
        &[
            step("r", 1).say("Checking."),
            step("r", 2).think("which dir?"),
            step("r", 3).builtin("list_directory", json!({"directoryPath": "/w"}), json!({})),
            step("r", 3)
                .builtin(
                    "list_directory",
                    json!({"directoryPath": "/w"}),
                    json!({"results": [{"name": "a"}]}),
                )
                .done(),
            step("r", 1).done(),
        ],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=Checking. messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        REASONING_START messageId=reasoning-1
        REASONING_MESSAGE_START messageId=reasoning-1
        REASONING_MESSAGE_CONTENT delta="which dir?" messageId=reasoning-1
        REASONING_MESSAGE_END messageId=reasoning-1
        REASONING_END messageId=reasoning-1
        TOOL_CALL_START toolCallId=tool-1 toolCallName=list_directory
        TOOL_CALL_ARGS delta="{\"directoryPath\":\"/w\"}" toolCallId=tool-1
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_RESULT content="[{\"name\":\"a\"}]" messageId=result-1 toolCallId=tool-1
        -- run end
        "#,
    );
    // Without thinking in between, the text message stays open and parents the call.
    check(
        &[
            step("r", 1).say("Checking."),
            step("r", 3).builtin("view_file", json!({"absolutePath": "/w/a"}), json!({})),
            step("r", 3)
                .builtin("view_file", json!({"absolutePath": "/w/a"}), json!({}))
                .done(),
            step("r", 1).say(" Done.").done(),
        ],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=Checking. messageId=text-1
        TOOL_CALL_START parentMessageId=text-1 toolCallId=tool-1 toolCallName=view_file
        TOOL_CALL_ARGS delta="{\"absolutePath\":\"/w/a\"}" toolCallId=tool-1
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_RESULT content="view_file completed without returning any output." messageId=result-1 toolCallId=tool-1
        TEXT_MESSAGE_CONTENT delta=" Done." messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        "#,
    );
}

#[test]
fn arguments_are_sent_once_even_when_the_snapshot_changes() {
    check(
        &[
            step("r", 1).builtin("run_command", json!({"commandLine": "ls"}), json!({})),
            step("r", 1).builtin(
                "run_command",
                json!({"commandLine": "ls -l", "cwd": "/"}),
                json!({}),
            ),
            step("r", 1)
                .builtin(
                    "run_command",
                    json!({"commandLine": "ls"}),
                    json!({"exitCode": 0, "combinedOutput": "a\n"}),
                )
                .done(),
        ],
        r#"
        TOOL_CALL_START toolCallId=tool-1 toolCallName=run_command
        TOOL_CALL_ARGS delta="{\"commandLine\":\"ls\"}" toolCallId=tool-1
        ACTIVITY_SNAPSHOT activityType=command content={"command":"ls","output":"","state":"running","toolCallId":"tool-1"} messageId=activity-1
        ACTIVITY_DELTA activityType=command messageId=activity-1 patch=[{"op":"replace","path":"/state","value":"completed"},{"op":"add","path":"/exitCode","value":0},{"op":"replace","path":"/output","value":"a\n"}]
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_RESULT content="{\"combinedOutput\":\"a\\n\",\"exitCode\":0}" messageId=result-1 toolCallId=tool-1
        -- run end
        "#,
    );
}

#[test]
fn custom_tools_keep_the_harness_call_id_unless_it_is_taken() {
    check(
        &[
            step("r", 1)
                .custom(
                    "call-1",
                    "lookup",
                    json!({"key": "a"}),
                    json!({"result": "A"}),
                )
                .done(),
            // A second call reusing the id must not clash with the first.
            step("r", 2)
                .custom(
                    "call-1",
                    "lookup",
                    json!({"key": "b"}),
                    json!({"error": "no b"}),
                )
                .done(),
        ],
        r#"
        TOOL_CALL_START toolCallId=call-1 toolCallName=lookup
        TOOL_CALL_ARGS delta="{\"key\":\"a\"}" toolCallId=call-1
        TOOL_CALL_END toolCallId=call-1
        TOOL_CALL_RESULT content=A messageId=result-1 toolCallId=call-1
        TOOL_CALL_START toolCallId=tool-1 toolCallName=lookup
        TOOL_CALL_ARGS delta="{\"key\":\"b\"}" toolCallId=tool-1
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_RESULT content="There was an error executing lookup: no b" messageId=result-2 toolCallId=tool-1
        -- run end
        "#,
    );
}

#[test]
fn a_failed_tool_step_is_its_result_not_a_failure() {
    check(
        &[
            step("r", 1).builtin("read_url_content", json!({"url": "http://x"}), json!({})),
            step("r", 1)
                .builtin("read_url_content", json!({"url": "http://x"}), json!({}))
                .error("denied by pre-tool hook: no", 0),
        ],
        r#"
        TOOL_CALL_START toolCallId=tool-1 toolCallName=read_url_content
        TOOL_CALL_ARGS delta="{\"url\":\"http://x\"}" toolCallId=tool-1
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_RESULT content="There was an error executing read_url_content: denied by pre-tool hook: no" messageId=result-1 toolCallId=tool-1
        -- run end
        "#,
    );
}

#[test]
fn error_steps_are_reported_once_and_do_not_disturb_open_text() {
    check(
        &[
            step("r", 1).say("Partial"),
            step("r", 2)
                .system_to_user()
                .say("Encountered retryable error")
                .error("Encountered retryable error", 429),
            step("r", 2)
                .system_to_user()
                .error("Encountered retryable error", 429),
            step("r", 3)
                .system_to_user()
                .error("The model produced an invalid tool call.", 0),
            step("r", 1).say(" answer").done(),
        ],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=Partial messageId=text-1
        ! FAILURE step=r:2 http=429 source=System message="Encountered retryable error"
        ! FAILURE step=r:3 http=0 source=System message="The model produced an invalid tool call."
        TEXT_MESSAGE_CONTENT delta=" answer" messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        "#,
    );
}

#[test]
fn a_step_that_fails_after_streaming_closes_its_message() {
    check(
        &[
            step("r", 1).say("Half an"),
            step("r", 1).error("The maximum token limit was reached.", 0),
        ],
        r#"
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta="Half an" messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        ! FAILURE step=r:1 http=0 source=Model message="The maximum token limit was reached."
        -- run end
        "#,
    );
}

#[test]
fn tool_summary_labels_and_questions_are_not_text() {
    check(
        &[
            step("r", 2)
                .say("User question")
                .full_text("User question")
                .asking(),
            step("r", 2).asking().waiting(),
            step("r", 2).asking().done(),
        ],
        "-- run end",
    );
}

#[test]
fn suppressed_and_hidden_tools_produce_nothing() {
    let options = TranslatorOptions::default()
        .suppress("frontend_tool")
        .with_builtin_tool_calls(false)
        .with_activities(false)
        .with_subagent_events(SubagentEvents::Steps);
    check_with(
        &options,
        &[
            step("r", 1)
                .custom("c1", "frontend_tool", json!({}), json!({}))
                .done(),
            step("r", 2)
                .builtin("run_command", json!({"commandLine": "ls"}), json!({}))
                .error("denied", 0),
            step("r", 3).invoke("Helper"),
            running("s", "r"),
            step("r", 3).invoke("Helper").done(),
            idle("s", "r"),
        ],
        "
        STEP_STARTED stepName=subagent:Helper
        STEP_FINISHED stepName=subagent:Helper
        -- run end
        ",
    );
}

#[test]
fn structured_output_is_emitted_once() {
    check(
        &[
            step("r", 4).finish(r#"{"answer": 42}"#),
            step("r", 4).finish(r#"{"answer": 42}"#).done(),
            step("r", 5).finish("7").done(),
        ],
        r#"
        STATE_SNAPSHOT snapshot={"answer":42}
        STATE_SNAPSHOT snapshot={"structured_output":7}
        -- run end
        "#,
    );
    check_with(
        &TranslatorOptions::default().with_structured_output(StructuredOutput::Custom),
        &[
            step("r", 4).finish("[1,2]").done(),
            step("r", 4).finish("[1,2]").done(),
            // A subagent's finish is its reply to the parent, and non-JSON is no structured output.
            step("s", 1).child_of("r").finish(r#"{"x": 1}"#).done(),
            step("r", 6).finish("not json").done(),
        ],
        "
        CUSTOM name=antigravity.structured_output value=[1,2]
        -- run end
        ",
    );
}

#[test]
fn a_scalar_is_not_structured_output_before_done() {
    check(
        &[step("r", 4).finish("12"), step("r", 4).finish("123").done()],
        r#"
        STATE_SNAPSHOT snapshot={"structured_output":123}
        -- run end
        "#,
    );
}

#[test]
fn root_trajectory_changes_and_unknown_states_produce_nothing() {
    check(
        &[
            trajectory_change("r", None, TrajectoryStatus::Running),
            step("r", 1).say("Hi"),
            trajectory_change("r", None, TrajectoryStatus::WaitingForSubagents),
            trajectory_change("r", None, TrajectoryStatus::Idle),
            trajectory_change("x", Some("r"), TrajectoryStatus::Unknown),
            close(),
        ],
        "
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta=Hi messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        -- run end
        ",
    );
}

#[test]
fn two_subagents_with_the_same_label_get_distinct_brackets() {
    check_with(
        &steps(),
        &[
            step("r", 1).invoke("Research"),
            running("a", "r"),
            step("r", 1).invoke("Research").done(),
            step("r", 2).invoke("Research"),
            running("b", "r"),
            step("r", 2).invoke("Research").done(),
            idle("b", "r"),
            idle("a", "r"),
        ],
        "
        STEP_STARTED stepName=subagent:Research
        STEP_STARTED stepName=subagent:Research#2
        STEP_FINISHED stepName=subagent:Research#2
        STEP_FINISHED stepName=subagent:Research
        -- run end
        ",
    );
}

#[test]
fn a_subagent_without_a_known_invocation_gets_its_own_bracket() {
    check_with(
        &steps(),
        &[
            running("sub-7", "r"),
            step("sub-7", 0)
                .child_of("r")
                .system()
                .say("[Message] content=go")
                .done(),
            step("sub-7", 1).child_of("r").say("Found it.").done(),
            idle("sub-7", "r"),
        ],
        r#"
        STEP_STARTED stepName=subagent:sub-7
        TEXT_MESSAGE_START messageId=text-1
        TEXT_MESSAGE_CONTENT delta="Found it." messageId=text-1
        TEXT_MESSAGE_END messageId=text-1
        STEP_FINISHED stepName=subagent:sub-7
        -- run end
        "#,
    );
}

/// Subagents as step brackets, the shape before AG-UI 1.0's subagent events.
fn steps() -> TranslatorOptions {
    TranslatorOptions::default().with_subagent_events(SubagentEvents::Steps)
}

/// A translator with `options` and sequential ids, for tests that call it directly.
fn sequential(options: TranslatorOptions) -> agui_translate::Translator {
    agui_translate::Translator::new(options, Box::new(agui_translate::SequentialIds::new()))
}

#[test]
fn a_tool_call_the_caller_emits_gets_the_same_treatment() {
    use common::Input;

    let mut translator = sequential(TranslatorOptions::default().suppress("pick_colour"));
    let mut feed = |input: Input| match input {
        Input::Step(s) => translator.step(&s).events,
        _ => Vec::new(),
    };
    let inputs = common::script(&[step("r", 1).say("Pick one."), step("r", 2).think("hmm")]);
    let mut events: Vec<_> = inputs.into_iter().flat_map(&mut feed).collect();
    let (before, parent) = translator.external_tool_call("r");
    assert_eq!(parent, None, "thinking closed the step's message");
    events.extend(before);
    assert_eq!(
        common::render(&events),
        [
            "TEXT_MESSAGE_START messageId=text-1",
            "TEXT_MESSAGE_CONTENT delta=\"Pick one.\" messageId=text-1",
            "TEXT_MESSAGE_END messageId=text-1",
            "REASONING_START messageId=reasoning-1",
            "REASONING_MESSAGE_START messageId=reasoning-1",
            "REASONING_MESSAGE_CONTENT delta=hmm messageId=reasoning-1",
            "REASONING_MESSAGE_END messageId=reasoning-1",
            "REASONING_END messageId=reasoning-1",
        ]
        .join("\n")
    );
    let text = translator.step(&step_of(common::script(&[step("r", 3).say("Or this.")])));
    assert_eq!(text.events.len(), 2);
    let (before, parent) = translator.external_tool_call("r");
    assert!(before.is_empty());
    assert_eq!(parent.as_deref(), Some("text-2"));
}

fn step_of(mut inputs: Vec<common::Input>) -> harness_proto::step::Step {
    match inputs.pop() {
        Some(common::Input::Step(step)) => *step,
        other => panic!("not a step: {other:?}"),
    }
}

#[test]
fn each_subagent_is_an_invocation_of_its_invoke_call_whose_result_is_the_replies() {
    check(
        &[
            step("r", 1).invoke("Research"),
            running("a", "r"),
            step("r", 1).invoke("Research").done(),
            step("r", 2).invoke("Research"),
            running("b", "r"),
            step("r", 2).invoke("Research").done(),
            step("b", 1).child_of("r").say("B found.").done(),
            idle("b", "r"),
            step("a", 1).child_of("r").say("A found.").done(),
            idle("a", "r"),
        ],
        r#"
        TOOL_CALL_START toolCallId=tool-1 toolCallName=invoke_subagent
        TOOL_CALL_ARGS delta="{}" toolCallId=tool-1
        SUBAGENT_STARTED description=Research name=subagent parentToolCallId=tool-1 subagentRunId=a
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_START toolCallId=tool-2 toolCallName=invoke_subagent
        TOOL_CALL_ARGS delta="{}" toolCallId=tool-2
        SUBAGENT_STARTED description=Research name=subagent parentToolCallId=tool-2 subagentRunId=b
        TOOL_CALL_END toolCallId=tool-2
        TEXT_MESSAGE_START messageId=text-1 subagentRunId=b
        TEXT_MESSAGE_CONTENT delta="B found." messageId=text-1 subagentRunId=b
        TEXT_MESSAGE_END messageId=text-1 subagentRunId=b
        SUBAGENT_FINISHED result="B found." subagentRunId=b
        TOOL_CALL_RESULT content="B found." messageId=result-1 toolCallId=tool-2
        TEXT_MESSAGE_START messageId=text-2 subagentRunId=a
        TEXT_MESSAGE_CONTENT delta="A found." messageId=text-2 subagentRunId=a
        TEXT_MESSAGE_END messageId=text-2 subagentRunId=a
        SUBAGENT_FINISHED result="A found." subagentRunId=a
        TOOL_CALL_RESULT content="A found." messageId=result-2 toolCallId=tool-1
        -- run end
        "#,
    );
}

#[test]
fn a_subagent_without_a_known_invocation_is_announced_with_its_first_output() {
    check(
        &[
            running("sub-7", "r"),
            step("sub-7", 1).child_of("r").say("Found it.").done(),
            idle("sub-7", "r"),
        ],
        r#"
        SUBAGENT_STARTED name=subagent subagentRunId=sub-7
        TEXT_MESSAGE_START messageId=text-1 subagentRunId=sub-7
        TEXT_MESSAGE_CONTENT delta="Found it." messageId=text-1 subagentRunId=sub-7
        TEXT_MESSAGE_END messageId=text-1 subagentRunId=sub-7
        SUBAGENT_FINISHED result="Found it." subagentRunId=sub-7
        -- run end
        "#,
    );
}

#[test]
fn a_failed_or_cancelled_subagent_ends_with_an_error_and_a_woken_one_is_a_new_invocation() {
    let mut failed = trajectory_change("a", Some("r"), TrajectoryStatus::Idle);
    if let common::Input::Trajectory(change) = &mut failed {
        change.error = Some("Error 400, Message: upstream detail".into());
    }
    check(
        &[
            step("r", 1).invoke("Research"),
            running("a", "r"),
            step("r", 1).invoke("Research").done(),
            failed,
            running("a", "r"),
            step("a", 3).child_of("r").say("Again.").done(),
            trajectory_change("a", Some("r"), TrajectoryStatus::Cancelled),
        ],
        r#"
        TOOL_CALL_START toolCallId=tool-1 toolCallName=invoke_subagent
        TOOL_CALL_ARGS delta="{}" toolCallId=tool-1
        SUBAGENT_STARTED description=Research name=subagent parentToolCallId=tool-1 subagentRunId=a
        TOOL_CALL_END toolCallId=tool-1
        SUBAGENT_ERROR code=SUBAGENT_FAILED message="The subagent's model call failed (HTTP 400)." subagentRunId=a
        TOOL_CALL_RESULT content="The subagent finished without a reply." messageId=result-1 toolCallId=tool-1
        SUBAGENT_STARTED description=Research name=subagent parentToolCallId=tool-1 subagentRunId=a-2
        TEXT_MESSAGE_START messageId=text-1 subagentRunId=a-2
        TEXT_MESSAGE_CONTENT delta=Again. messageId=text-1 subagentRunId=a-2
        TEXT_MESSAGE_END messageId=text-1 subagentRunId=a-2
        SUBAGENT_ERROR code=SUBAGENT_CANCELLED message="The subagent was cancelled." subagentRunId=a-2
        -- run end
        "#,
    );
}

#[test]
fn a_run_ending_inside_a_subagent_suspends_it_with_its_interrupts() {
    let mut translator = sequential(TranslatorOptions::default());
    for input in [
        step("r", 1).invoke("Ask"),
        running("a", "r"),
        step("a", 1).child_of("r").say("Let me ask."),
    ] {
        match input {
            common::Input::Step(s) => drop(translator.step(&s)),
            common::Input::Trajectory(t) => drop(translator.trajectory(&t)),
            _ => {}
        }
    }
    assert_eq!(translator.attribution("a"), Some("a"));
    assert_eq!(translator.attribution("r"), None);
    let closed =
        common::render(&translator.close_run_with_interrupts(&[("i-1".into(), "a".into())]));
    assert_eq!(
        closed,
        [
            "TEXT_MESSAGE_END messageId=text-1 subagentRunId=a",
            "TOOL_CALL_END toolCallId=tool-1",
            r#"SUBAGENT_FINISHED outcome={"interruptIds":["i-1"],"type":"suspended"} subagentRunId=a"#,
        ]
        .join("\n")
    );
}

#[test]
fn file_changes_are_activities_with_a_unified_diff() {
    let diff = json!([{"startLine": 0, "endLine": 0, "lines": [
        {"text": "old", "action": "LINE_ACTION_DELETE"},
        {"text": "new", "action": "LINE_ACTION_INSERT"},
        {"text": "", "action": "LINE_ACTION_NONE"},
    ]}]);
    check(
        &[
            step("r", 1).builtin(
                "edit_file",
                json!({"filePath": "file:///w/a.txt"}),
                json!({}),
            ),
            step("r", 1)
                .builtin(
                    "edit_file",
                    json!({"filePath": "file:///w/a.txt"}),
                    json!({"diffBlock": diff}),
                )
                .done(),
        ],
        r#"
        TOOL_CALL_START toolCallId=tool-1 toolCallName=edit_file
        TOOL_CALL_ARGS delta="{\"filePath\":\"file:///w/a.txt\"}" toolCallId=tool-1
        ACTIVITY_SNAPSHOT activityType=file_change content={"diff":"--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-old\n+new\n","operation":"edit","path":"/w/a.txt","toolCallId":"tool-1"} messageId=activity-1
        TOOL_CALL_END toolCallId=tool-1
        TOOL_CALL_RESULT content="[{\"endLine\":0,\"lines\":[{\"action\":\"LINE_ACTION_DELETE\",\"text\":\"old\"},{\"action\":\"LINE_ACTION_INSERT\",\"text\":\"new\"},{\"action\":\"LINE_ACTION_NONE\",\"text\":\"\"}],\"startLine\":0}]" messageId=result-1 toolCallId=tool-1
        -- run end
        "#,
    );
}

#[test]
fn a_command_the_turn_left_running_is_reported_stopped() {
    let mut translator = sequential(TranslatorOptions::default().with_builtin_tool_calls(false));
    let common::Input::Step(running_command) =
        step("r", 1).builtin("run_command", json!({"commandLine": "sleep 30"}), json!({}))
    else {
        unreachable!()
    };
    let started = common::render(&translator.step(&running_command).events);
    assert_eq!(
        started,
        r#"ACTIVITY_SNAPSHOT activityType=command content={"command":"sleep 30","output":"","state":"running"} messageId=activity-1"#
    );
    assert_eq!(
        common::render(&translator.close_turn()),
        r#"ACTIVITY_DELTA activityType=command messageId=activity-1 patch=[{"op":"replace","path":"/state","value":"stopped"}]"#
    );
    let off = TranslatorOptions::default().with_activities(false);
    let mut quiet = sequential(off);
    assert!(
        quiet
            .step(&running_command)
            .events
            .iter()
            .all(|e| !e.event_type().as_str().starts_with("ACTIVITY")),
        "activities = false"
    );
}
