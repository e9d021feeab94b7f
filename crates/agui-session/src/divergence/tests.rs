use agui_types::Message;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

/// `u1:text` a user message, `a1:text` an assistant one, `t1>a1` a tool result for the call
/// `c-a1` of `a1`, `x1` an activity.
fn messages(spec: &str) -> Vec<Message> {
    let values: Vec<Value> = spec
        .split_whitespace()
        .map(|m| {
            let (id, text) = m.split_once(':').unwrap_or((m, ""));
            let text = text.replace('_', " ");
            match &id[..1] {
                "u" => json!({"role": "user", "id": id, "content": text}),
                "a" => json!({"role": "assistant", "id": id, "content": text,
                    "toolCalls": [{"id": format!("c-{id}"), "type": "function",
                        "function": {"name": "f", "arguments": "{}"}}]}),
                "t" => {
                    let (tid, call) = id.split_once('>').unwrap_or((id, "a0"));
                    json!({"role": "tool", "id": tid, "toolCallId": format!("c-{call}"), "content": "ok"})
                }
                _ => json!({"role": "activity", "id": id, "activityType": "x", "content": {}}),
            }
        })
        .collect();
    serde_json::from_value(Value::Array(values)).expect("messages")
}

struct Case {
    name: &'static str,
    /// The thread's log.
    log: &'static str,
    /// Whether the forwarded messages have digests (else: a record from before digests).
    digests: bool,
    turn_in_flight: bool,
    unwatched: bool,
    /// What the run's client said (`forwardedProps.regenerate`).
    asked: Asked,
    run: &'static str,
    expected: Option<(&'static str, &'static str)>,
}

const fn case(
    name: &'static str,
    log: &'static str,
    run: &'static str,
    expected: Option<(&'static str, &'static str)>,
) -> Case {
    Case {
        name,
        log,
        digests: true,
        turn_in_flight: false,
        unwatched: false,
        asked: Asked::Nothing,
        run,
        expected,
    }
}

/// A case whose run is marked as a regenerate.
const fn marked(
    name: &'static str,
    log: &'static str,
    run: &'static str,
    expected: Option<(&'static str, &'static str)>,
) -> Case {
    Case {
        asked: Asked::Regenerate,
        ..case(name, log, run, expected)
    }
}

const THREAD: &str = "u1:weather_in_Paris? a1:sunny u2:and_Rome? a2:rainy";

#[test]
fn the_rule_tells_edits_and_regenerates_from_lagging_clients() {
    let cases = [
        case("the same transcript", THREAD, THREAD, None),
        case(
            "the same transcript and a new message",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u2:and_Rome? a2:rainy u3:thanks",
            None,
        ),
        case("only the new message", THREAD, "u3:thanks", None),
        case("nothing", THREAD, "", None),
        case(
            "an older transcript and a new message (a lagging client)",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u3:thanks",
            None,
        ),
        case(
            "an older transcript ending on an answer it saw (a lagging client)",
            THREAD,
            "u1:weather_in_Paris? a1:sunny",
            None,
        ),
        case(
            "the last message edited",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u2:and_Oslo?",
            Some(("edit", "u2")),
        ),
        case(
            "the first message edited, the rest cut",
            THREAD,
            "u1:list_the_files",
            Some(("edit", "u1")),
        ),
        case(
            "two messages edited: the oldest is the point",
            THREAD,
            "u1:x a1:sunny u2:y",
            Some(("edit", "u1")),
        ),
        case(
            "whitespace around the text is not an edit",
            THREAD,
            "u1:_weather_in_Paris?_ a1:sunny u2:and_Rome? a2:rainy",
            None,
        ),
        case(
            "the last answer removed: a regenerate",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
            Some(("regenerate", "u2")),
        ),
        case(
            "an earlier answer removed with what follows: a regenerate there",
            THREAD,
            "u1:weather_in_Paris?",
            Some(("regenerate", "u1")),
        ),
        case(
            "activities after the cut do not hide it",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u2:and_Rome? x9",
            Some(("regenerate", "u2")),
        ),
        case(
            "a message not answered yet is not a regenerate",
            "u1:weather_in_Paris?",
            "u1:weather_in_Paris?",
            None,
        ),
        case(
            "a message the thread never sent is new, not a regenerate",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u7:other",
            None,
        ),
        case(
            "a tool result ends the run: not a regenerate",
            "u1:go a1: t1>a1",
            "u1:go a1: t1>a1",
            None,
        ),
        Case {
            turn_in_flight: true,
            ..case(
                "while a turn is in flight a cut transcript is a lagging client",
                THREAD,
                "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
                None,
            )
        },
        Case {
            unwatched: true,
            ..case(
                "a client that left mid-turn and sends its transcript again missed the answer",
                THREAD,
                "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
                None,
            )
        },
        Case {
            turn_in_flight: true,
            ..case(
                "an edit is an edit even while a turn is in flight",
                THREAD,
                "u1:changed",
                Some(("edit", "u1")),
            )
        },
        Case {
            digests: false,
            ..case(
                "an old record: text compared with the log",
                THREAD,
                "u1:weather_in_Paris? a1:sunny u2:and_Oslo?",
                Some(("edit", "u2")),
            )
        },
        Case {
            digests: false,
            ..case(
                "an old record with no log (not read back): no edit can be seen",
                "",
                "u1:changed",
                None,
            )
        },
        case(
            "a record with digests but no log: the edit is seen",
            "",
            "u1:changed",
            Some(("edit", "u1")),
        ),
        case(
            "no log (not read back) and no mark: a cut transcript is taken for a retry",
            "",
            "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
            None,
        ),
        marked(
            "marked, with no log (not read back): a regenerate",
            "",
            "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
            Some(("regenerate", "u2")),
        ),
        Case {
            unwatched: true,
            ..marked(
                "marked, by a client that missed the answer: a regenerate",
                THREAD,
                "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
                Some(("regenerate", "u2")),
            )
        },
        Case {
            turn_in_flight: true,
            ..marked(
                "marked while a turn is in flight: a regenerate (the fork says why it cannot)",
                THREAD,
                "u1:weather_in_Paris? a1:sunny u2:and_Rome?",
                Some(("regenerate", "u2")),
            )
        },
        marked(
            "marked, with an edit: the edit",
            THREAD,
            "u1:changed",
            Some(("edit", "u1")),
        ),
        marked(
            "marked, ending on a message the thread never sent: refused",
            THREAD,
            "u1:weather_in_Paris? a1:sunny u2:and_Rome? a2:rainy u3:thanks",
            Some(("refused", "")),
        ),
        marked(
            "marked, ending on an answer: refused",
            THREAD,
            THREAD,
            Some(("refused", "")),
        ),
        marked(
            "marked, with no messages: refused",
            THREAD,
            "",
            Some(("refused", "")),
        ),
    ];
    let mut failures = Vec::new();
    for case in cases {
        let log = messages(case.log);
        let thread = messages(THREAD);
        let mut sent = Digests::default();
        // The digests are of what was sent: the thread's messages (the log may be unread).
        let sent_from = if case.log.is_empty() { &thread } else { &log };
        let forwarded: Vec<String> = sent_from
            .iter()
            .filter_map(|m| match m {
                Message::User(u) => Some(u.id.clone()),
                _ => None,
            })
            .collect();
        if case.digests {
            for m in sent_from {
                if let Message::User(u) = m {
                    sent.record(u.id.clone(), digest(u));
                }
            }
        }
        let is_forwarded = |id: &str| forwarded.iter().any(|f| f == id);
        let got = detect(
            Known {
                log: &log,
                sent: &sent,
                forwarded: &is_forwarded,
                turn_in_flight: case.turn_in_flight,
                unwatched: case.unwatched,
            },
            &messages(case.run),
            case.asked,
        );
        let got = match got {
            Ok(divergence) => divergence.map(|d| (d.kind(), d.message_id().to_owned())),
            Err(_) => Some(("refused", String::new())),
        };
        let expected = case.expected.map(|(k, id)| (k, id.to_owned()));
        if got != expected {
            failures.push(format!("{}: got {got:?}, expected {expected:?}", case.name));
        }
    }
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn the_digest_is_of_what_is_sent() {
    let plain: Vec<Message> = serde_json::from_value(json!([
        {"role": "user", "id": "u", "content": " hello "},
        {"role": "user", "id": "u", "content": [{"type": "text", "text": "hello"}]},
        {"role": "user", "id": "u", "content": [{"type": "text", "text": "hello"},
            {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}}]},
        {"role": "user", "id": "u", "content": [{"type": "text", "text": "hello"},
            {"type": "image", "source": {"type": "data", "value": "BBBB", "mimeType": "image/png"}}]},
    ]))
    .expect("messages");
    let digests: Vec<String> = plain
        .iter()
        .map(|m| match m {
            Message::User(u) => digest(u),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(digests[0], digests[1], "string or one text part: the same");
    assert_ne!(digests[1], digests[2], "an attachment counts");
    assert_ne!(digests[2], digests[3], "another attachment is an edit");
}

#[test]
fn digests_are_bounded_and_survive_serde() {
    let mut sent = Digests::default();
    for i in 0..Digests::KEPT + 3 {
        sent.record(format!("m{i}"), format!("d{i}"));
    }
    assert!(sent.get("m0").is_none() && sent.get("m3").is_some());
    let back: Digests =
        serde_json::from_str(&serde_json::to_string(&sent).expect("ser")).expect("de");
    assert_eq!(back, sent);
}
