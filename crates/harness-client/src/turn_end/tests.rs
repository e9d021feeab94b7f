use super::*;

/// One thing the tracker is told, in harness order.
#[derive(Clone, Copy)]
enum Ev {
    Root(TrajectoryStatus),
    RootError(&'static str),
    /// A direct subagent of the root.
    Child(&'static str, TrajectoryStatus),
    /// A subagent of a subagent.
    Grandchild(&'static str, TrajectoryStatus),
    /// The root's system step carrying a subagent's idle message.
    IdleMessage(&'static str),
    /// Another system step of the root (not an idle message).
    OtherSystemStep,
    Halt,
}

/// What a signal was, for comparison.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Ended,
    Held(Duration),
    Running,
}

fn state(
    id: &str,
    parent: Option<&str>,
    status: TrajectoryStatus,
    error: Option<&str>,
) -> TrajectoryState {
    TrajectoryState {
        trajectory_id: id.into(),
        parent_trajectory_id: parent.map(Into::into),
        depth: i32::from(parent.is_some()),
        status,
        error: error.map(Into::into),
        error_code: None,
        stop_reason: None,
    }
}

fn system_step(text: String) -> Step {
    Step {
        key: harness_proto::step::StepKey::new("root", 3),
        status: StepStatus::Done,
        source: StepSource::System,
        text,
        ..Step::default()
    }
}

/// Feeds the events; returns each signal with the index of the event that produced it.
fn signals(events: &[Ev]) -> Vec<(usize, Seen)> {
    use TrajectoryStatus::*;
    let mut tracker = TurnTracker::new("root".into());
    let mut out = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let signal = match *event {
            Ev::Root(status) => tracker.on_trajectory(&state("root", None, status, None)),
            Ev::RootError(error) => tracker.on_trajectory(&state("root", None, Idle, Some(error))),
            Ev::Child(id, status) => tracker.on_trajectory(&state(id, Some("root"), status, None)),
            Ev::Grandchild(id, status) => {
                tracker.on_trajectory(&state(id, Some("child"), status, None))
            }
            Ev::IdleMessage(id) => {
                tracker.on_step(&system_step(format!(
                    "[Message] timestamp=2026-12-02T08:18:08Z sender=system priority=MESSAGE_PRIORITY_HIGH content=Subagent {id} has gone idle. This was the subagent's most recent response: hi"
                )));
                None
            }
            Ev::OtherSystemStep => {
                tracker.on_step(&system_step("[Message] sender=root content=say hi".into()));
                None
            }
            Ev::Halt => {
                tracker.halted();
                None
            }
        };
        if let Some(signal) = signal {
            out.push((
                i,
                match signal {
                    TurnSignal::Ended(_) => Seen::Ended,
                    TurnSignal::IdleAwaitingWake { within, .. } => Seen::Held(within),
                    TurnSignal::Running => Seen::Running,
                },
            ));
        }
    }
    out
}

/// The idle (and hold) signals only.
fn ends(events: &[Ev]) -> Vec<(usize, Seen)> {
    signals(events)
        .into_iter()
        .filter(|(_, s)| *s != Seen::Running)
        .collect()
}

use Ev::*;
use TrajectoryStatus::{Cancelled, Idle, Running, WaitingForSubagents, WaitingForTasks};

#[test]
fn only_the_root_ends_a_turn() {
    assert_eq!(ends(&[Root(Running), Root(Idle)]), [(1, Seen::Ended)]);
    assert_eq!(ends(&[Root(Cancelled)]), [(0, Seen::Ended)]);
    assert_eq!(
        ends(&[Child("a", Cancelled), Root(WaitingForTasks)]),
        [(1, Seen::Ended)]
    );
    assert_eq!(
        ends(&[
            Root(Running),
            Grandchild("g", Running),
            Grandchild("g", Idle),
            Root(Idle)
        ]),
        [(3, Seen::Ended)],
        "a subagent's own subagent wakes its parent, not the root"
    );
}

/// A named order of events and the signals it must produce.
type Case = (&'static str, &'static [Ev], &'static [(usize, Seen)]);

/// The orders of events recorded from the real harness (the `c-delegate` and `c-twice` turns of
/// the e2e suite, 160 turns with subagents), and what each means for the turn.
#[test]
fn an_idle_root_ends_the_turn_unless_a_subagent_s_message_will_wake_it() {
    let cases: &[Case] = &[
        (
            "the root waited for its subagent: the message woke it, its next idle is the end",
            &[
                Root(Running),
                Child("a", Running),
                Root(WaitingForSubagents),
                Child("a", Idle),
                Root(Running),
                IdleMessage("a"),
                Root(Idle),
            ],
            &[(6, Seen::Ended)],
        ),
        (
            "the root woke for the message just before the subagent's idle state arrived",
            &[
                Root(Running),
                Child("a", Running),
                Root(WaitingForSubagents),
                Root(Running),
                Child("a", Idle),
                IdleMessage("a"),
                Root(Idle),
            ],
            &[(6, Seen::Ended)],
        ),
        (
            "the subagent finished while the root still ran, and the root took the message in: a stray wake-up may follow",
            &[
                Root(Running),
                Child("a", Running),
                Child("a", Idle),
                IdleMessage("a"),
                Root(Idle),
            ],
            &[(4, Seen::Held(STRAY_WAKE_GRACE))],
        ),
        (
            "the root went idle before the message reached it: the message will wake it",
            &[
                Root(Running),
                Child("a", Running),
                Child("a", Idle),
                Root(Idle),
            ],
            &[(3, Seen::Held(UNANNOUNCED_BOUND))],
        ),
        (
            "the wake-up came: the turn goes on to the next idle, which is the end",
            &[
                Root(Running),
                Child("a", Running),
                Child("a", Idle),
                Root(Idle),
                Root(Running),
                IdleMessage("a"),
                Root(Idle),
            ],
            &[(3, Seen::Held(UNANNOUNCED_BOUND)), (6, Seen::Ended)],
        ),
        (
            "two subagents, one message shown before the second subagent's idle state",
            &[
                Root(Running),
                Child("a", Running),
                Child("b", Running),
                Child("a", Idle),
                IdleMessage("a"),
                IdleMessage("b"),
                Child("b", Idle),
                Root(Idle),
            ],
            &[(7, Seen::Held(STRAY_WAKE_GRACE))],
        ),
        (
            "a message shown early counts once: the next turn's subagent is judged afresh",
            &[
                Root(Running),
                Child("a", Running),
                Root(WaitingForSubagents),
                Root(Running),
                IdleMessage("a"),
                Child("a", Idle),
                Root(Idle),
                Root(Running),
                Child("a", Running),
                Root(WaitingForSubagents),
                Child("a", Idle),
                Root(Running),
                Root(Idle),
            ],
            &[(6, Seen::Ended), (12, Seen::Held(UNANNOUNCED_BOUND))],
        ),
        (
            "a system step that is not an idle message announces nothing",
            &[
                Root(Running),
                Child("a", Running),
                OtherSystemStep,
                Child("a", Idle),
                Root(Idle),
            ],
            &[(4, Seen::Held(UNANNOUNCED_BOUND))],
        ),
        (
            "a cancelled subagent sends no idle message",
            &[
                Root(Running),
                Child("a", Running),
                Root(WaitingForSubagents),
                Child("a", Cancelled),
                Root(Running),
                Root(Idle),
            ],
            &[(5, Seen::Ended)],
        ),
    ];
    for (name, events, expected) in cases {
        assert_eq!(ends(events), *expected, "{name}");
    }
}

#[test]
fn a_halt_a_cancel_or_an_error_ends_the_turn_at_once() {
    let unannounced = [Root(Running), Child("a", Running), Child("a", Idle)];
    let with = |last: Ev| {
        let mut events = unannounced.to_vec();
        events.push(last);
        events
    };
    assert_eq!(ends(&with(Root(Cancelled))), [(3, Seen::Ended)]);
    assert_eq!(ends(&with(RootError("Error 400"))), [(3, Seen::Ended)]);
    let mut halted = unannounced.to_vec();
    halted.extend([Halt, Root(Idle)]);
    assert_eq!(ends(&halted), [(4, Seen::Ended)]);
}

#[test]
fn every_running_root_voids_a_held_end() {
    assert_eq!(
        signals(&[
            Root(Running),
            Child("a", Running),
            Child("a", Idle),
            IdleMessage("a"),
            Root(Idle),
            Root(Running)
        ]),
        [
            (0, Seen::Running),
            (4, Seen::Held(STRAY_WAKE_GRACE)),
            (5, Seen::Running)
        ]
    );
}

#[test]
fn the_subject_of_an_idle_message_is_the_subagent_s_id() {
    let cases = [
        (
            "[Message] timestamp=… sender=system content=Subagent 3606bda9 has gone idle. This was …",
            Some("3606bda9"),
        ),
        ("Subagent x has gone idle", Some("x")),
        ("Subagent  has gone idle", None),
        ("Subagent a b has gone idle", None),
        ("[Message] content=E2E-SUB-A say hi", None),
    ];
    for (text, expected) in cases {
        assert_eq!(idle_message_subject(text), expected, "{text}");
    }
}

/// The end the root's idle (with `error`) gives; fails when the end is held or absent.
fn ended(tracker: &mut TurnTracker, error: Option<&str>) -> TurnEnd {
    match tracker.on_trajectory(&state("root", None, Idle, error)) {
        Some(TurnSignal::Ended(end)) => end,
        other => panic!("the idle is the end: {other:?}"),
    }
}

#[test]
fn a_halt_and_an_error_are_reported_once() {
    let mut tracker = TurnTracker::new("root".into());
    tracker.halted();
    let end = ended(&mut tracker, Some("boom"));
    assert!(end.halted && !end.cancelled);
    assert_eq!(end.error.as_deref(), Some("boom"));
    assert_eq!(tracker.last_error().as_deref(), Some("boom"));
    assert!(
        !ended(&mut tracker, None).halted,
        "a halt belongs to one turn"
    );
}

#[test]
fn a_halt_sent_while_the_end_is_held_belongs_to_that_turn() {
    let mut tracker = TurnTracker::new("root".into());
    for state in [
        state("root", None, Running, None),
        state("a", Some("root"), Running, None),
        state("a", Some("root"), Idle, None),
    ] {
        tracker.on_trajectory(&state);
    }
    let held = tracker.on_trajectory(&state("root", None, Idle, None));
    assert!(
        matches!(held, Some(TurnSignal::IdleAwaitingWake { .. })),
        "{held:?}"
    );
    tracker.halted();
    assert!(tracker.take_halted(), "the held end takes the halt");
    tracker.on_trajectory(&state("root", None, Running, None));
    tracker.on_step(&system_step("content=Subagent a has gone idle. …".into()));
    assert!(
        !ended(&mut tracker, None).halted,
        "the next turn is not halted"
    );
}

#[test]
fn a_halt_recorded_after_a_turn_ended_does_not_mark_the_next_one() {
    let mut tracker = TurnTracker::new("root".into());
    tracker.on_trajectory(&state("root", None, Running, None));
    assert!(!ended(&mut tracker, None).halted);
    // The halt crossed the turn's end; the next input starts a turn of its own.
    tracker.halted();
    tracker.input_sent();
    tracker.on_trajectory(&state("root", None, Running, None));
    assert!(
        !ended(&mut tracker, None).halted,
        "the next turn was not halted"
    );

    // Input queued behind a running turn keeps that turn's halt.
    tracker.input_sent();
    tracker.on_trajectory(&state("root", None, Running, None));
    tracker.halted();
    tracker.input_sent();
    assert!(
        ended(&mut tracker, None).halted,
        "the running turn was halted"
    );
}

#[test]
fn a_turn_that_ends_again_while_its_end_is_held_ends_once() {
    let now = tokio::time::Instant::now();
    let end = |halted| TurnEnd {
        cancelled: false,
        halted,
        error: None,
        error_code: None,
        stop_reason: None,
        background_tasks: false,
    };
    let wait = |halted| TurnSignal::IdleAwaitingWake {
        end: end(halted),
        within: STRAY_WAKE_GRACE,
    };
    let mut held = HeldEnd::default();
    assert_eq!(held.on_signal(wait(false), now), None);
    assert_eq!(held.deadline(), Some(now + STRAY_WAKE_GRACE));
    // A halt cancels the idle root: that end replaces the held one.
    assert_eq!(
        held.on_signal(TurnSignal::Ended(end(true)), now),
        Some(end(true))
    );
    assert_eq!(held.release(), None, "the held end is not reported as well");
    // Running again voids a held end; a later hold is released once.
    held.on_signal(wait(false), now);
    assert_eq!(held.on_signal(TurnSignal::Running, now), None);
    assert_eq!(held.deadline(), None);
    held.on_signal(wait(false), now);
    assert_eq!(held.release(), Some(end(false)));
    assert_eq!(held.release(), None);
}

#[test]
fn a_root_waiting_for_its_background_tasks_ends_the_turn_and_its_wake_up_is_a_turn_of_its_own() {
    let mut tracker = TurnTracker::new("root".into());
    tracker.on_trajectory(&state("root", None, Running, None));
    let waiting = tracker.on_trajectory(&state("root", None, WaitingForTasks, None));
    let Some(TurnSignal::Ended(end)) = waiting else {
        panic!("waiting for tasks ends the turn: {waiting:?}");
    };
    assert!(end.background_tasks && !end.halted && !end.cancelled);
    // Input sent meanwhile starts a new turn: a halt recorded before it is stale.
    tracker.halted();
    tracker.input_sent();
    // The tasks end: the harness runs the root again by itself, and that turn ends at idle.
    assert_eq!(
        tracker.on_trajectory(&state("root", None, Running, None)),
        Some(TurnSignal::Running)
    );
    let end = ended(&mut tracker, None);
    assert!(!end.background_tasks && !end.halted, "{end:?}");
}
