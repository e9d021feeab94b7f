//! Snapshots of hand-written edge cases: the situations the Python reference gets wrong or
//! that the recorded fixtures do not cover. Each stream is also checked by the verifier.

mod common;

use agui_translate::{SubagentEvents, TranslatorOptions};
use common::{Input, assert_snapshot, close, idle, render_runs, replay, running, script, step};
use serde_json::json;

fn snapshot(name: &str, inputs: &[Input]) -> String {
    let runs = replay(&script(inputs), &TranslatorOptions::default());
    assert_snapshot(name, &runs);
    render_runs(&runs)
}

/// [`snapshot`] with subagent events, and `<name>_steps` with the old step brackets.
fn snapshot_both(name: &str, inputs: &[Input]) -> String {
    let steps = TranslatorOptions::default().with_subagent_events(SubagentEvents::Steps);
    assert_snapshot(&format!("{name}_steps"), &replay(&script(inputs), &steps));
    snapshot(name, inputs)
}

fn list_dir(index: u32) -> Input {
    step("r", index).builtin("list_directory", json!({"directoryPath": "/w"}), json!({}))
}

fn list_dir_done(index: u32) -> Input {
    step("r", index)
        .builtin(
            "list_directory",
            json!({"directoryPath": "/w"}),
            json!({"results": [{"name": "a.txt"}]}),
        )
        .done()
}

/// A turn parked twice: what was sent is never sent again, a message closed at a run
/// boundary continues under a new id, and a call ended at a boundary delivers only its result.
#[test]
fn redelivery_across_runs() {
    let rendered = snapshot(
        "redelivery_across_runs",
        &[
            step("r", 1).say("Let me look."),
            list_dir(2),
            close(),
            // Run 2: the harness re-delivers the turn so far, then continues.
            step("r", 1).full_text("Let me look."),
            list_dir(2),
            step("r", 1).say(" Found it."),
            list_dir_done(2),
            step("r", 1).done(),
            close(),
            // Run 3: finished steps re-delivered again.
            step("r", 1).full_text("Let me look. Found it.").done(),
            list_dir_done(2),
            step("r", 3).say("Bye.").done(),
        ],
    );
    let run_two = rendered.split("-- run end").nth(1).unwrap_or_default();
    assert!(!run_two.contains("TOOL_CALL_START"), "{run_two}");
    assert!(!run_two.contains("TOOL_CALL_END"), "{run_two}");
    assert!(run_two.contains("TOOL_CALL_RESULT"), "{run_two}");
}

/// A built-in first seen at DONE: its arguments carry only the request (the reference leaked
/// the result into them), and the result follows. Likewise for a custom tool.
#[test]
fn call_first_seen_at_done() {
    let rendered = snapshot(
        "call_first_seen_at_done",
        &[
            step("r", 1)
                .builtin(
                    "run_command",
                    json!({"commandLine": "echo hi", "workingDir": "/w"}),
                    json!({"exitCode": 0, "combinedOutput": "hi\n"}),
                )
                .done(),
            step("r", 2)
                .custom(
                    "call-9",
                    "lookup",
                    json!({"key": "k"}),
                    json!({"result": "v"}),
                )
                .done(),
        ],
    );
    assert!(
        !rendered.contains(r#"delta="{\"combinedOutput"#),
        "{rendered}"
    );
}

/// A subagent that invokes its own subagent, with a run boundary while the inner one works:
/// both brackets close at the boundary and re-open (outer first) with the next output.
#[test]
fn nested_subagents() {
    snapshot_both(
        "nested_subagents",
        &[
            step("r", 1).say("Delegating."),
            step("r", 2).invoke("Research"),
            running("a", "r"),
            step("r", 2).invoke("Research").done(),
            step("r", 1).done(),
            step("a", 0)
                .child_of("r")
                .system()
                .say("[Message] content=research")
                .done(),
            step("a", 1).child_of("r").invoke("Dig deeper"),
            running("b", "a"),
            step("a", 1).child_of("r").invoke("Dig deeper").done(),
            step("b", 0)
                .child_of("a")
                .system()
                .say("[Message] content=dig")
                .done(),
            step("b", 1).child_of("a").think("Digging"),
            close(),
            step("b", 1).child_of("a").say("Deep fact."),
            step("b", 1).child_of("a").done(),
            idle("b", "a"),
            step("a", 2).child_of("r").say("Research done.").done(),
            idle("a", "r"),
            step("r", 3)
                .system()
                .say("[Message] Subagent a has gone idle.")
                .done(),
            step("r", 4).say("All done.").done(),
        ],
    );
}

/// Two subagents with the same label stream at the same time as the root: each gets its own
/// bracket, messages of different trajectories interleave by id, and a subagent's tool call
/// hangs under that subagent's message, not the root's.
#[test]
fn interleaved_trajectories() {
    snapshot_both(
        "interleaved_trajectories",
        &[
            step("r", 1).invoke("Research"),
            step("r", 2).invoke("Research"),
            running("a", "r"),
            running("b", "r"),
            step("r", 1).invoke("Research").done(),
            step("r", 2).invoke("Research").done(),
            step("a", 1).child_of("r").say("A one. "),
            step("b", 1).child_of("r").say("B one. "),
            step("r", 3).say("Waiting. "),
            step("a", 2).child_of("r").builtin(
                "view_file",
                json!({"absolutePath": "/w/a"}),
                json!({}),
            ),
            step("b", 1).child_of("r").think("B thinks"),
            step("a", 1).child_of("r").say("A two."),
            step("a", 2)
                .child_of("r")
                .builtin("view_file", json!({"absolutePath": "/w/a"}), json!({}))
                .done(),
            step("a", 1).child_of("r").done(),
            idle("a", "r"),
            step("b", 1).child_of("r").say("B two.").done(),
            idle("b", "r"),
            step("r", 3).say("Both done.").done(),
        ],
    );
}

/// Reasoning, then text, then a tool call inside that text message, then more text of the
/// same step in the same message.
#[test]
fn reasoning_text_tool_text_in_one_step() {
    snapshot(
        "reasoning_text_tool_text_in_one_step",
        &[
            step("r", 1).think("I should list the files."),
            step("r", 1).say("Let me check. "),
            list_dir(2),
            list_dir_done(2),
            step("r", 1).say("There is a.txt."),
            step("r", 1).done(),
        ],
    );
}

/// Text of two steps of one trajectory interleaved: switching steps closes the other step's
/// message, and its later text gets a new message rather than reopening a closed one.
#[test]
fn text_interleaved_across_two_steps() {
    snapshot(
        "text_interleaved_across_two_steps",
        &[
            step("r", 1).say("One "),
            step("r", 2).say("Two "),
            step("r", 1).say("one again"),
            step("r", 2).say("two again").done(),
            step("r", 1).done(),
        ],
    );
}

/// An invocation first seen at DONE still gets a bracket; a subagent whose RUNNING arrives
/// after that joins it (same name), and one whose RUNNING arrived before its invocation was
/// seen is adopted by it.
#[test]
fn subagents_first_seen_at_done_or_before_their_invocation() {
    snapshot_both(
        "subagents_first_seen_at_done",
        &[
            step("r", 1).invoke("Late start").done(),
            running("a", "r"),
            step("a", 1).child_of("r").say("A here.").done(),
            idle("a", "r"),
            running("b", "r"),
            step("r", 2).invoke("Early start").done(),
            step("b", 1).child_of("r").say("B here.").done(),
            idle("b", "r"),
        ],
    );
}

/// Two invocations in one model reply: the harness starts their subagents in either order and
/// marks each invocation final right after starting its subagent. Every order recorded from the
/// real harness (the e2e suite's `c-twice`, 93 turns) attributes each subagent to its own
/// invocation: its call's result is its reply, and its `SUBAGENT_STARTED` names that call.
#[test]
fn parallel_invocations_get_their_own_subagents_in_every_recorded_order() {
    use common::Input;
    let a1 = || step("r", 1).invoke("Subagent delegation");
    let a2 = || step("r", 2).invoke("Subagent delegation");
    let d1 = || step("r", 1).invoke("Subagent delegation").done();
    let d2 = || step("r", 2).invoke("Subagent delegation").done();
    let sa = || running("sa", "r");
    let sb = || running("sb", "r");
    let orders: [(&str, Vec<Input>); 5] = [
        (
            "A1 A2 SA D1 SB D2",
            vec![a1(), a2(), sa(), d1(), sb(), d2()],
        ),
        (
            "A1 SA A2 D1 SB D2",
            vec![a1(), sa(), a2(), d1(), sb(), d2()],
        ),
        (
            "A1 SA D1 A2 SB D2",
            vec![a1(), sa(), d1(), a2(), sb(), d2()],
        ),
        (
            "A1 A2 SB D2 SA D1",
            vec![a1(), a2(), sb(), d2(), sa(), d1()],
        ),
        (
            "A1 A2 SA SB D1 D2",
            vec![a1(), a2(), sa(), sb(), d1(), d2()],
        ),
    ];
    for options in [
        TranslatorOptions::default().with_builtin_tool_calls(true),
        TranslatorOptions::default().with_subagent_events(SubagentEvents::Steps),
    ] {
        for (order, mut inputs) in orders.clone() {
            inputs.extend([
                step("sa", 1).child_of("r").say("A here.").done(),
                step("sb", 1).child_of("r").say("B here.").done(),
                idle("sa", "r"),
                idle("sb", "r"),
                step("r", 3).say("Both answered.").done(),
            ]);
            let runs = replay(&script(&inputs), &options);
            let events: Vec<serde_json::Value> = runs
                .iter()
                .flat_map(|r| &r.events)
                .map(|e| serde_json::to_value(e).unwrap())
                .collect();
            let of_type = |t: &'static str| events.iter().filter(move |e| e["type"] == t);
            if options.subagent_events == SubagentEvents::Subagent {
                let calls: Vec<&str> = of_type("TOOL_CALL_START")
                    .map(|e| e["toolCallId"].as_str().unwrap())
                    .collect();
                assert_eq!(calls.len(), 2, "{order}: two invocation calls");
                let result = |call: &str| {
                    of_type("TOOL_CALL_RESULT")
                        .find(|e| e["toolCallId"] == call)
                        .map(|e| e["content"].as_str().unwrap().to_owned())
                };
                assert_eq!(result(calls[0]).as_deref(), Some("A here."), "{order}");
                assert_eq!(result(calls[1]).as_deref(), Some("B here."), "{order}");
                let started: Vec<&str> = of_type("SUBAGENT_STARTED")
                    .map(|e| e["parentToolCallId"].as_str().unwrap())
                    .collect();
                let mut sorted = started.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(
                    sorted.len(),
                    2,
                    "{order}: one invocation per call: {started:?}"
                );
            }
            assert_valid_order(order, &runs);
        }
    }
}

fn assert_valid_order(order: &str, runs: &[common::Run]) {
    let result = std::panic::catch_unwind(|| common::assert_valid(runs));
    assert!(result.is_ok(), "{order}: the stream passes the verifier");
}
