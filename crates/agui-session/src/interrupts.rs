//! Interrupt shapes (questions, approvals, tool interrupts) and how answers are read.
//!
//! Clients answer in many shapes (a bare string, `{responses: …}`, `true`, `"yes"`, an
//! object with `approved`); reading them is lenient, but an approval that cannot be understood
//! blocks the call and says so, rather than guessing.

use agui_types::Interrupt;
use harness_client::{Answer, Question, QuestionAnswer};
use serde_json::{Map, Value, json};

/// Interrupt reason for `ask_question` (see [`crate::InterruptReasons`]).
pub const REASON_QUESTION: &str = "antigravity:ask_question";
/// Interrupt reason for tool approval (see [`crate::InterruptReasons`]).
pub const REASON_APPROVAL: &str = "antigravity:tool_approval";

/// What the model (or a tool) is told when the user sent a new message instead of answering.
pub(crate) const ABANDONED_TEXT: &str = "The user sent a new message instead of answering this request, so it was not \
     completed. Do not report it as declined.";

/// How an interrupt was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum InterruptAnswer {
    /// `resume` with `status: "resolved"`, carrying the payload (or `null`).
    Resolved(Value),
    /// `resume` with `status: "cancelled"`.
    Cancelled,
    /// The user sent a new message instead.
    Abandoned,
    /// The session closed before anyone answered.
    Closed,
}

impl InterruptAnswer {
    /// Whether the request was answered positively (resolved).
    pub fn is_resolved(&self) -> bool {
        matches!(self, Self::Resolved(_))
    }

    /// `"resolved"`, `"cancelled"`, `"abandoned"` or `"closed"`.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Resolved(_) => "resolved",
            Self::Cancelled => "cancelled",
            Self::Abandoned => "abandoned",
            Self::Closed => "closed",
        }
    }

    /// The payload of a resolved answer.
    pub fn payload(&self) -> Option<&Value> {
        match self {
            Self::Resolved(payload) => Some(payload),
            _ => None,
        }
    }
}

/// The interrupt for `ask_question`.
pub(crate) fn question_interrupt(id: String, reason: &str, questions: &[Question]) -> Interrupt {
    let listed: Vec<Value> = questions
        .iter()
        .map(|q| {
            let options: Vec<Value> = q
                .choices
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"id": i.to_string(), "text": c}))
                .collect();
            json!({"question": q.text, "is_multi_select": q.multi_select, "options": options})
        })
        .collect();
    let schema = json!({
        "type": "object",
        "required": ["responses"],
        "properties": {"responses": {
            "type": "array",
            "minItems": questions.len(),
            "items": {"type": "object", "properties": {
                "selected_option_ids": {"type": "array", "items": {"type": "string"}},
                "freeform_response": {"type": "string"},
                "skipped": {"type": "boolean"}
            }}
        }}
    });
    Interrupt {
        id,
        reason: reason.into(),
        message: Some(
            questions
                .first()
                .map(|q| q.text.clone())
                .unwrap_or_else(|| "The agent has a question.".into()),
        ),
        response_schema: schema.as_object().cloned(),
        metadata: Some(Map::from_iter([(
            "questions".to_owned(),
            Value::Array(listed),
        )])),
        ..Interrupt::default()
    }
}

/// The harness answer for a question interrupt's answer.
pub(crate) fn question_answer(answer: &InterruptAnswer, questions: &[Question]) -> QuestionAnswer {
    let InterruptAnswer::Resolved(payload) = answer else {
        return QuestionAnswer::Cancelled;
    };
    let items: Vec<Value> = match payload {
        Value::String(_) => vec![payload.clone()],
        Value::Array(items) => items.clone(),
        Value::Object(map) => match map.get("responses") {
            Some(Value::Array(items)) => items.clone(),
            Some(one @ Value::Object(_)) => vec![one.clone()],
            _ => vec![payload.clone()],
        },
        _ => Vec::new(),
    };
    let mut answers: Vec<Answer> = items
        .iter()
        .zip(questions)
        .filter_map(|(item, question)| read_answer(item, question))
        .collect();
    answers.resize(questions.len().max(answers.len()), Answer::Unanswered);
    QuestionAnswer::Answers(answers)
}

fn read_answer(item: &Value, question: &Question) -> Option<Answer> {
    match item {
        Value::String(text) => Some(Answer::Choice {
            selected: Vec::new(),
            freeform: Some(text.clone()),
        }),
        Value::Object(map) => {
            if map.get("skipped").and_then(Value::as_bool) == Some(true) {
                return Some(Answer::Unanswered);
            }
            let selected: Vec<u32> = map
                .get("selected_option_ids")
                .or_else(|| map.get("selectedOptionIds"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|id| option_index(id, question))
                .collect();
            let freeform = map
                .get("freeform_response")
                .or_else(|| map.get("freeformResponse"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            if selected.is_empty() && freeform.is_none() {
                Some(Answer::Unanswered)
            } else {
                Some(Answer::Choice { selected, freeform })
            }
        }
        _ => None,
    }
}

/// An option id (its index as text, a number, or the option's text) as a 0-based index.
fn option_index(id: &Value, question: &Question) -> Option<u32> {
    let index = match id {
        Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
        Value::String(s) => s
            .parse::<usize>()
            .ok()
            .or_else(|| question.choices.iter().position(|c| c == s)),
        _ => None,
    }?;
    (index < question.choices.len())
        .then(|| u32::try_from(index).ok())
        .flatten()
}

/// The interrupt asking whether `tool` may run.
pub(crate) fn approval_interrupt(id: String, reason: &str, tool: &str, args: &Value) -> Interrupt {
    let schema = json!({
        "type": "object",
        "required": ["approved"],
        "properties": {"approved": {"type": "boolean"}, "message": {"type": "string"}}
    });
    Interrupt {
        id,
        reason: reason.into(),
        message: Some(format!("Allow the agent to run `{tool}`?")),
        response_schema: schema.as_object().cloned(),
        metadata: Some(Map::from_iter([
            ("tool_name".to_owned(), Value::String(tool.to_owned())),
            ("args".to_owned(), args.clone()),
        ])),
        ..Interrupt::default()
    }
}

/// An approval decision: `Ok(())` to allow, `Err(reason)` to deny with a reason for the model.
pub(crate) fn approval_decision(answer: &InterruptAnswer, tool: &str) -> Result<(), String> {
    const UNREADABLE: &str = "The approval response could not be interpreted, so the call was blocked. This is not \
         a decision by the user.";
    match answer {
        InterruptAnswer::Cancelled => Err("The user cancelled the approval request.".into()),
        InterruptAnswer::Abandoned => Err(ABANDONED_TEXT.into()),
        InterruptAnswer::Closed => Err("The session was closed before the user answered.".into()),
        InterruptAnswer::Resolved(payload) => {
            let (approved, message) = match payload {
                Value::Bool(b) => (Some(*b), None),
                Value::String(s) => (word(s), None),
                Value::Object(map) => (
                    map.get("approved")
                        .or_else(|| map.get("allow"))
                        .and_then(|v| match v {
                            Value::Bool(b) => Some(*b),
                            Value::String(s) => word(s),
                            _ => None,
                        }),
                    map.get("message")
                        .and_then(Value::as_str)
                        .filter(|m| !m.is_empty())
                        .map(str::to_owned),
                ),
                _ => (None, None),
            };
            match approved {
                Some(true) => Ok(()),
                Some(false) => {
                    Err(message.unwrap_or_else(|| "The user denied this tool call.".into()))
                }
                None => {
                    tracing::warn!(tool, %payload, "uninterpretable approval payload; blocking the call");
                    Err(UNREADABLE.into())
                }
            }
        }
    }
}

fn word(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "approve" | "approved" | "y" | "ok" | "allow" => Some(true),
        "no" | "false" | "deny" | "denied" | "n" | "reject" | "rejected" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn colour() -> Vec<Question> {
        vec![
            Question {
                text: "Colour?".into(),
                choices: vec!["Red".into(), "Green".into()],
                multi_select: false,
            },
            Question {
                text: "Size?".into(),
                choices: vec!["S".into(), "M".into()],
                multi_select: true,
            },
        ]
    }

    fn check_question(payload: Value, expected: Vec<Answer>) {
        let got = question_answer(&InterruptAnswer::Resolved(payload.clone()), &colour());
        assert_eq!(got, QuestionAnswer::Answers(expected), "{payload}");
    }

    #[test]
    fn question_payloads_are_read_leniently() {
        let choice = |s: &[u32], f: Option<&str>| Answer::Choice {
            selected: s.to_vec(),
            freeform: f.map(Into::into),
        };
        check_question(
            json!("green"),
            vec![choice(&[], Some("green")), Answer::Unanswered],
        );
        check_question(
            json!({"responses": [{"selected_option_ids": ["1"]}, {"selected_option_ids": ["0", "1"], "freeform_response": "both"}]}),
            vec![choice(&[1], None), choice(&[0, 1], Some("both"))],
        );
        check_question(
            json!({"responses": {"selected_option_ids": ["Green"]}}),
            vec![choice(&[1], None), Answer::Unanswered],
        );
        check_question(
            json!([{"skipped": true}, "medium"]),
            vec![Answer::Unanswered, choice(&[], Some("medium"))],
        );
        check_question(
            json!({"selected_option_ids": [7, "nope"]}),
            vec![Answer::Unanswered, Answer::Unanswered],
        );
        check_question(json!(42), vec![Answer::Unanswered, Answer::Unanswered]);
        assert_eq!(
            question_answer(&InterruptAnswer::Cancelled, &colour()),
            QuestionAnswer::Cancelled
        );
        assert_eq!(
            question_answer(&InterruptAnswer::Abandoned, &colour()),
            QuestionAnswer::Cancelled
        );
    }

    #[test]
    fn approvals_are_read_or_blocked() {
        let check = |payload: Value, expected: Result<(), &str>| {
            let got = approval_decision(&InterruptAnswer::Resolved(payload.clone()), "run_command");
            assert_eq!(got, expected.map_err(str::to_owned), "{payload}");
        };
        check(json!(true), Ok(()));
        check(json!(" Yes "), Ok(()));
        check(json!({"approved": true}), Ok(()));
        check(json!({"allow": "ok"}), Ok(()));
        check(json!(false), Err("The user denied this tool call."));
        check(
            json!({"approved": false, "message": "not now"}),
            Err("not now"),
        );
        check(
            json!("maybe"),
            Err(
                "The approval response could not be interpreted, so the call was blocked. This is not a decision by the user.",
            ),
        );
        assert_eq!(
            approval_decision(&InterruptAnswer::Abandoned, "x"),
            Err(ABANDONED_TEXT.into())
        );
        assert!(
            approval_decision(&InterruptAnswer::Cancelled, "x")
                .unwrap_err()
                .contains("cancelled")
        );
    }

    #[test]
    fn interrupts_carry_their_schema_and_metadata() {
        let q = question_interrupt("i1".into(), REASON_QUESTION, &colour());
        assert_eq!(
            (q.reason.as_str(), q.message.as_deref()),
            (REASON_QUESTION, Some("Colour?"))
        );
        assert_eq!(
            q.metadata.unwrap()["questions"][0]["options"][1],
            json!({"id": "1", "text": "Green"})
        );
        assert_eq!(
            q.response_schema.unwrap()["properties"]["responses"]["minItems"],
            2
        );
        let a = approval_interrupt(
            "i2".into(),
            REASON_APPROVAL,
            "run_command",
            &json!({"CommandLine": "ls"}),
        );
        assert_eq!(
            a.message.as_deref(),
            Some("Allow the agent to run `run_command`?")
        );
        assert_eq!(a.metadata.unwrap()["args"]["CommandLine"], "ls");
        let empty = question_interrupt("i3".into(), REASON_QUESTION, &[]);
        assert_eq!(empty.message.as_deref(), Some("The agent has a question."));
    }
}
