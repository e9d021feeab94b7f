//! The harness's requests as the host's typed requests, and the host's typed answers as the
//! frames the harness expects. Pure: no I/O and no tasks, so each mapping is tested on its own.

use harness_proto::lh::{
    self, CallHookResponse, InputEvent, PolicyDecisionResponse, ToolConfirmation, ToolResponse,
    UserQuestionsRequest, UserQuestionsResponse, call_hook_request, call_hook_response,
    input_event, pre_tool_result, pre_turn_result, stop_result, user_question_answer,
    user_questions_response,
};
use serde_json::{Map, Value};

use crate::callbacks::{
    Answer, HookRequest, HookResponse, PolicyOutcome, PolicyRequest, Question, QuestionAnswer,
    ToolCallRequest, ToolOutcome,
};

/// A host tool call. `argumentsJson` is authoritative; the harness also sends the same
/// arguments as a `genai.Struct`, used when the JSON text is missing or not an object.
pub(super) fn tool_request(call: &lh::ToolCall) -> ToolCallRequest {
    let arguments = match serde_json::from_str(call.arguments_json()) {
        Ok(Value::Object(map)) => map,
        _ => match &call.arguments {
            Some(arguments) => crate::values::from_struct(arguments),
            None => {
                tracing::warn!(call_id = %call.id(), arguments = %call.arguments_json(), "tool call arguments are not a JSON object; passing none");
                Map::new()
            }
        },
    };
    ToolCallRequest {
        id: call.id().to_owned(),
        name: call.name().to_owned(),
        arguments,
    }
}

/// The answer to tool call `id`.
pub(super) fn tool_answer(id: String, outcome: ToolOutcome) -> InputEvent {
    let response = match outcome {
        ToolOutcome::Ok { response, media } => ToolResponse {
            id: Some(id),
            response_json: Some(Value::Object(response).to_string()),
            supplemental_media: media
                .into_iter()
                .map(|m| lh::Media {
                    mime_type: Some(m.mime_type),
                    description: Some(m.description),
                    data: Some(m.data),
                })
                .collect(),
            ..Default::default()
        },
        ToolOutcome::Err(message) => ToolResponse {
            id: Some(id),
            error_message: Some(message),
            ..Default::default()
        },
    };
    event(input_event::Event::ToolResponse(response))
}

/// A hook request, and the trajectory that asked (empty when the hook carries none).
pub(super) fn hook_request(request: lh::CallHookRequest) -> (String, HookRequest) {
    use call_hook_request::Args;
    let hook_type = request.r#type();
    let trajectory = match &request.args {
        Some(Args::PreToolArgs(a)) => a.trajectory_id(),
        Some(Args::PostToolArgs(a)) => a.trajectory_id(),
        Some(Args::OnToolErrorArgs(a)) => a.trajectory_id(),
        Some(Args::StopArgs(a)) => a.trajectory_id(),
        Some(Args::PostTurnArgs(a)) => a.trajectory_id(),
        Some(Args::PreTurnArgs(a)) => a.trajectory_id(),
        Some(Args::OnCompactionArgs(a)) => a.trajectory_id(),
        None => "",
    }
    .to_owned();
    let typed = match request.args {
        Some(Args::PreTurnArgs(a)) => HookRequest::PreTurn(a),
        Some(Args::PreToolArgs(a)) => HookRequest::PreTool(a),
        Some(Args::PostToolArgs(a)) => HookRequest::PostTool(a),
        Some(Args::OnToolErrorArgs(a)) => HookRequest::OnToolError(a),
        Some(Args::StopArgs(a)) => HookRequest::Stop(a),
        Some(Args::PostTurnArgs(a)) => HookRequest::PostTurn(a),
        Some(Args::OnCompactionArgs(a)) => HookRequest::OnCompaction(a),
        None => match hook_type {
            lh::LifecycleHook::OnSessionStart => HookRequest::OnSessionStart,
            lh::LifecycleHook::OnSessionEnd => HookRequest::OnSessionEnd,
            other => HookRequest::Other(other),
        },
    };
    (trajectory, typed)
}

/// The answer to hook request `request_id`. A PreTurn hook's Allow/Deny has its own message;
/// the generic ones map to the PreTool shape.
pub(super) fn hook_answer(
    request_id: String,
    pre_turn: bool,
    response: HookResponse,
) -> InputEvent {
    use call_hook_response::Result as R;
    let result = match response {
        HookResponse::Allow { .. } if pre_turn => R::PreTurnResult(lh::PreTurnResult {
            decision: Some(pre_turn_result::Decision::Allow as i32),
            reason: None,
        }),
        HookResponse::Deny(reason) if pre_turn => R::PreTurnResult(lh::PreTurnResult {
            decision: Some(pre_turn_result::Decision::Deny as i32),
            reason: Some(reason),
        }),
        HookResponse::Empty => R::EmptyResult(lh::EmptyResult {}),
        HookResponse::Allow { modified_args } => R::PreToolResult(lh::PreToolResult {
            decision: Some(pre_tool_result::Decision::Allow as i32),
            reason: None,
            modified_args: modified_args.map(|args| crate::values::to_struct(&args)),
        }),
        HookResponse::Deny(reason) => R::PreToolResult(lh::PreToolResult {
            decision: Some(pre_tool_result::Decision::Deny as i32),
            reason: Some(reason),
            modified_args: None,
        }),
        HookResponse::ToolError(message) => R::OnToolErrorResult(lh::OnToolErrorResult {
            custom_error_message: Some(message),
        }),
        HookResponse::AllowStop => R::StopResult(lh::StopResult {
            decision: Some(stop_result::Decision::AllowStop as i32),
            reason: None,
        }),
        HookResponse::Continue(reason) => R::StopResult(lh::StopResult {
            decision: Some(stop_result::Decision::Continue as i32),
            reason: Some(reason),
        }),
        HookResponse::Error(message) => R::ErrorMessage(message),
    };
    event(input_event::Event::CallHookResponse(CallHookResponse {
        request_id: Some(request_id),
        result: Some(result),
    }))
}

/// A dynamic policy rule's request.
pub(super) fn policy_request(request: &lh::PolicyDecisionRequest) -> PolicyRequest {
    PolicyRequest {
        rule_id: request.rule_id().to_owned(),
        tool: request.tool_args.clone().unwrap_or_default(),
        reason: request.reason().to_owned(),
    }
}

/// The answer to policy request `request_id`.
pub(super) fn policy_answer(request_id: String, outcome: PolicyOutcome) -> InputEvent {
    use lh::PolicyEvaluationOutcome as P;
    let (outcome, deny_reason) = match outcome {
        PolicyOutcome::Allow => (P::Allow, None),
        PolicyOutcome::Deny(reason) => (P::Deny, Some(reason)),
        PolicyOutcome::NoMatch => (P::NoMatch, None),
    };
    event(input_event::Event::PolicyDecisionResponse(
        PolicyDecisionResponse {
            request_id: Some(request_id),
            outcome: Some(outcome as i32),
            deny_reason,
        },
    ))
}

/// The questions of an `ask_question` step, in order.
pub(super) fn questions(request: &UserQuestionsRequest) -> Vec<Question> {
    request
        .questions
        .iter()
        .map(|q| {
            let mc = match &q.question_type {
                Some(lh::user_question::QuestionType::MultipleChoice(mc)) => mc.clone(),
                None => Default::default(),
            };
            let (text, multi_select) = (mc.question().to_owned(), mc.is_multi_select());
            Question {
                text,
                choices: mc.choices,
                multi_select,
            }
        })
        .collect()
}

/// The answer to the `count` questions of a waiting step; missing answers are sent as
/// unanswered, since the harness expects one per question.
pub(super) fn question_answer(
    trajectory_id: String,
    step_index: u32,
    count: usize,
    answer: QuestionAnswer,
) -> InputEvent {
    use user_questions_response::{QuestionsResponse, Result as R};
    let result = match answer {
        QuestionAnswer::Answers(mut answers) => {
            answers.resize(count.max(answers.len()), Answer::Unanswered);
            R::Response(QuestionsResponse {
                answers: answers.into_iter().map(answer_to_proto).collect(),
            })
        }
        QuestionAnswer::Cancelled => R::Cancelled(true),
    };
    event(input_event::Event::QuestionResponse(
        UserQuestionsResponse {
            trajectory_id: Some(trajectory_id),
            step_index: Some(step_index),
            result: Some(result),
        },
    ))
}

fn answer_to_proto(answer: Answer) -> lh::UserQuestionAnswer {
    let answer = match answer {
        Answer::Unanswered => user_question_answer::Answer::Unanswered(true),
        Answer::Choice { selected, freeform } => {
            user_question_answer::Answer::MultipleChoiceAnswer(lh::MultipleChoiceAnswer {
                selected_choice_indices: selected
                    .into_iter()
                    .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
                    .collect(),
                freeform_response: freeform,
            })
        }
    };
    lh::UserQuestionAnswer {
        answer: Some(answer),
    }
}

/// The answer to a waiting step's tool confirmation.
pub(super) fn confirmation_answer(
    trajectory_id: String,
    step_index: u32,
    accepted: bool,
) -> InputEvent {
    event(input_event::Event::ToolConfirmation(ToolConfirmation {
        trajectory_id: Some(trajectory_id),
        step_index: Some(step_index),
        accepted: Some(accepted),
    }))
}

fn event(event: input_event::Event) -> InputEvent {
    InputEvent { event: Some(event) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook_result(event: InputEvent) -> call_hook_response::Result {
        match event.event {
            Some(input_event::Event::CallHookResponse(r)) => r.result.unwrap(),
            other => panic!("not a hook answer: {other:?}"),
        }
    }

    #[test]
    fn allow_and_deny_take_the_pre_turn_shape_only_for_a_pre_turn_hook() {
        use call_hook_response::Result as R;
        let deny = || HookResponse::Deny("no".into());
        assert!(matches!(
            hook_result(hook_answer("r".into(), true, deny())),
            R::PreTurnResult(lh::PreTurnResult { reason: Some(r), .. }) if r == "no"
        ));
        assert!(matches!(
            hook_result(hook_answer("r".into(), false, deny())),
            R::PreToolResult(lh::PreToolResult { reason: Some(r), .. }) if r == "no"
        ));
        // Answers other than Allow/Deny keep their own shape for a PreTurn hook too.
        assert!(matches!(
            hook_result(hook_answer("r".into(), true, HookResponse::Error("x".into()))),
            R::ErrorMessage(m) if m == "x"
        ));
    }

    #[test]
    fn missing_answers_are_sent_as_unanswered() {
        let answer = QuestionAnswer::Answers(vec![Answer::Choice {
            selected: vec![1],
            freeform: None,
        }]);
        let Some(input_event::Event::QuestionResponse(response)) =
            question_answer("t".into(), 3, 2, answer).event
        else {
            panic!("not a question answer");
        };
        let Some(user_questions_response::Result::Response(r)) = response.result else {
            panic!("not answers: {response:?}");
        };
        assert_eq!(r.answers.len(), 2);
        assert_eq!(
            r.answers[1].answer,
            Some(user_question_answer::Answer::Unanswered(true))
        );
    }

    #[test]
    fn tool_arguments_fall_back_to_the_struct_when_the_json_is_not_an_object() {
        let object = json!({"city": "Paris"});
        let call = lh::ToolCall {
            id: Some("c1".into()),
            name: Some("get_weather".into()),
            arguments_json: Some("[]".into()),
            arguments: Some(crate::values::to_struct(object.as_object().unwrap())),
            ..Default::default()
        };
        assert_eq!(Value::Object(tool_request(&call).arguments), object);
    }
}
