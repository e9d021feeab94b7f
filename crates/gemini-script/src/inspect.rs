//! Read-only helpers over a Gemini `generateContent` request body.
//!
//! They encode how the harness builds its model requests: user
//! text wrapped in `<USER_REQUEST>`, tool results as `functionResponse` parts in
//! a `role: "model"` content, system injections as user text starting with a
//! `<SYSTEM_MESSAGE>` preamble, and the workspace list in the system prompt.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The function names the harness declares for its own (built-in) tools.
pub const BUILTIN_TOOLS: &[&str] = &[
    "ask_question",
    "define_subagent",
    "find_by_name",
    "generate_image",
    "grep_search",
    "invoke_subagent",
    "list_dir",
    "manage_subagents",
    "manage_task",
    "read_url_content",
    "replace_file_content",
    "run_command",
    "schedule",
    "search_web",
    "send_message",
    "view_file",
    "write_to_file",
    "run_workflow",
];

const SYSTEM_MESSAGE_PREFIX: &str = "The following is a <SYSTEM_MESSAGE>";

/// One `functionResponse` part (a tool result the harness reports to the model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionResponse {
    /// The call id, when the harness sent one.
    pub id: Option<String>,
    /// The function (tool) name.
    pub name: String,
    /// `response.output`, the text the harness built from the tool result.
    pub output: Option<String>,
    /// The whole `response` object.
    pub response: Value,
}

/// One `functionCall` part of a replayed model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The call id, when present.
    pub id: Option<String>,
    /// The function name.
    pub name: String,
    /// The arguments object.
    pub args: Value,
}

/// The `contents` array (empty when missing).
pub fn contents(body: &Value) -> &[Value] {
    body.get("contents")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The last element of `contents`.
pub fn last_content(body: &Value) -> Option<&Value> {
    contents(body).last()
}

/// The `role` of the last content.
pub fn last_role(body: &Value) -> Option<&str> {
    last_content(body)?.get("role")?.as_str()
}

fn parts(content: &Value) -> &[Value] {
    content
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether a part is plain (non-thought) text.
fn is_plain_text(part: &Value) -> bool {
    part.get("text").is_some_and(Value::is_string)
        && !part
            .get("thought")
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// The part kinds (`text`, `functionResponse`, `functionCall`, `inlineData`)
/// present in the last content. Thought text does not count as `text`.
pub fn last_part_keys(body: &Value) -> Vec<&'static str> {
    let mut keys = Vec::new();
    for part in last_content(body).map(parts).unwrap_or_default() {
        if is_plain_text(part) && !keys.contains(&"text") {
            keys.push("text");
        }
        for key in ["functionResponse", "functionCall", "inlineData"] {
            if part.get(key).is_some() && !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// Removes the harness's `<USER_REQUEST>` wrapper (and the metadata after it).
/// Text without the wrapper is returned unchanged.
pub fn strip_user_request(text: &str) -> &str {
    const OPEN: &str = "<USER_REQUEST>";
    const CLOSE: &str = "</USER_REQUEST>";
    match (text.find(OPEN), text.find(CLOSE)) {
        (Some(start), Some(end)) if start + OPEN.len() <= end => {
            text[start + OPEN.len()..end].trim_matches('\n')
        }
        _ => text,
    }
}

/// The text of the most recent `role: "user"` content that has text, with the
/// `<USER_REQUEST>` wrapper removed. System injections are returned whole.
pub fn last_user_text(body: &Value) -> Option<String> {
    contents(body)
        .iter()
        .rev()
        .filter(|c| c.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|c| {
            let texts: Vec<&str> = parts(c)
                .iter()
                .filter(|p| is_plain_text(p))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| strip_user_request(&texts.concat()).to_owned())
        })
}

/// Whether a user text is a harness system injection (subagent messages,
/// Stop-hook continuations, automated triggers) rather than something the user typed.
pub fn is_system_message(text: &str) -> bool {
    text.starts_with(SYSTEM_MESSAGE_PREFIX)
}

/// Every function name declared in `tools[].functionDeclarations[]`, in order.
pub fn declared_functions(body: &Value) -> Vec<&str> {
    declarations(body)
        .filter_map(|d| d.get("name").and_then(Value::as_str))
        .collect()
}

fn declarations(body: &Value) -> impl Iterator<Item = &Value> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
}

/// The declaration of one function, if declared.
pub fn function_declaration<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    declarations(body).find(|d| d.get("name").and_then(Value::as_str) == Some(name))
}

/// The JSON schema of a declared function (`parametersJsonSchema`, or `parameters`).
pub fn parameters_schema<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    let decl = function_declaration(body, name)?;
    decl.get("parametersJsonSchema")
        .or_else(|| decl.get("parameters"))
}

fn function_responses_in(content: &Value) -> impl Iterator<Item = FunctionResponse> + '_ {
    parts(content).iter().filter_map(|p| {
        let fr = p.get("functionResponse")?;
        let response = fr.get("response").cloned().unwrap_or(Value::Null);
        Some(FunctionResponse {
            id: fr.get("id").and_then(Value::as_str).map(str::to_owned),
            name: fr.get("name").and_then(Value::as_str)?.to_owned(),
            output: response
                .get("output")
                .and_then(Value::as_str)
                .map(str::to_owned),
            response,
        })
    })
}

/// The function names of the `functionResponse` parts of the last content, without copying
/// the (possibly large) results.
pub fn last_function_response_names(body: &Value) -> impl Iterator<Item = &str> {
    last_content(body)
        .map(parts)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("functionResponse")?.get("name")?.as_str())
}

/// The `functionResponse` parts of the last content (the results this request reports).
pub fn last_function_responses(body: &Value) -> Vec<FunctionResponse> {
    last_content(body)
        .map(|c| function_responses_in(c).collect())
        .unwrap_or_default()
}

/// Every `functionResponse` part anywhere in the history, oldest first.
pub fn function_responses(body: &Value) -> Vec<FunctionResponse> {
    contents(body)
        .iter()
        .flat_map(function_responses_in)
        .collect()
}

/// Every `functionCall` part anywhere in the history, oldest first.
pub fn function_calls(body: &Value) -> Vec<FunctionCall> {
    contents(body)
        .iter()
        .flat_map(parts)
        .filter_map(|p| {
            let fc = p.get("functionCall")?;
            Some(FunctionCall {
                id: fc.get("id").and_then(Value::as_str).map(str::to_owned),
                name: fc.get("name").and_then(Value::as_str)?.to_owned(),
                args: fc.get("args").cloned().unwrap_or(Value::Null),
            })
        })
        .collect()
}

/// The concatenated text of `systemInstruction`.
pub fn system_instruction(body: &Value) -> String {
    body.get("systemInstruction")
        .map(parts)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

/// The first workspace directory named in the system prompt
/// (`Active Workspaces:` list, else `Command Working Directory:`).
pub fn workspace(body: &Value) -> Option<String> {
    let prompt = system_instruction(body);
    let mut lines = prompt.lines();
    if lines.any(|l| l.trim() == "Active Workspaces:")
        && let Some(dir) = lines.next().and_then(|l| l.trim().strip_prefix("- "))
    {
        return Some(dir.trim().to_owned());
    }
    prompt.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Command Working Directory:")
            .map(|d| d.trim().to_owned())
    })
}

/// Tool output with the harness's `Created At:` / `Completed At:` header lines removed.
pub fn strip_output_header(output: &str) -> &str {
    let mut rest = output;
    for header in ["Created At:", "Completed At:"] {
        if rest.starts_with(header) {
            rest = rest.split_once('\n').map_or("", |(_, tail)| tail);
        }
    }
    rest.trim_matches('\n')
}

/// The useful part of a tool result: the header lines removed and, for host
/// tools, the JSON inside the harness's ``Tool response for X:`` code fence.
pub fn tool_output_text(output: &str) -> &str {
    let body = strip_output_header(output);
    let fenced = body
        .strip_prefix("Tool response for ")
        .and_then(|rest| rest.split_once('\n'))
        .and_then(|(_, after)| {
            after
                .strip_prefix("```json\n")
                .or_else(|| after.strip_prefix("```\n"))
        })
        .and_then(|inner| inner.trim_end().strip_suffix("```"));
    fenced.map_or(body, |inner| inner.trim_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({
            "systemInstruction": {"parts": [{"text": "x\nActive Workspaces:\n- /srv/ws\nCommand Working Directory: /srv/ws\n"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "<USER_REQUEST>\nWeather in Paris?\n</USER_REQUEST>\n<ADDITIONAL_METADATA>\nt\n</ADDITIONAL_METADATA>"}]},
                {"role": "model", "parts": [{"text": "hmm", "thought": true}, {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}}]},
                {"role": "model", "parts": [{"functionResponse": {"id": "c1", "name": "get_weather", "response": {"output": "Created At: a\nCompleted At: b\nTool response for get_weather:\nsunny"}}}]}
            ],
            "tools": [{"functionDeclarations": [{"name": "list_dir"}, {"name": "get_weather", "parametersJsonSchema": {"type": "object"}}]}]
        })
    }

    #[test]
    fn reads_the_harness_conventions() {
        let b = body();
        assert_eq!(last_user_text(&b).as_deref(), Some("Weather in Paris?"));
        assert_eq!(last_role(&b), Some("model"));
        assert_eq!(last_part_keys(&b), vec!["functionResponse"]);
        assert_eq!(declared_functions(&b), vec!["list_dir", "get_weather"]);
        assert_eq!(
            parameters_schema(&b, "get_weather"),
            Some(&json!({"type": "object"}))
        );
        assert_eq!(workspace(&b).as_deref(), Some("/srv/ws"));
        assert_eq!(
            last_function_response_names(&b).collect::<Vec<_>>(),
            vec!["get_weather"]
        );
        let responses = last_function_responses(&b);
        assert_eq!(responses.len(), 1);
        assert_eq!(responses[0].name, "get_weather");
        assert_eq!(
            strip_output_header(responses[0].output.as_deref().unwrap_or_default()),
            "Tool response for get_weather:\nsunny"
        );
        assert_eq!(function_calls(&b)[0].args, json!({"city": "Paris"}));
    }

    #[test]
    fn strips_the_user_request_wrapper() {
        for (input, expected) in [
            ("plain", "plain"),
            ("<USER_REQUEST>\nhi\n</USER_REQUEST>\nmeta", "hi"),
            (
                "</USER_REQUEST><USER_REQUEST>",
                "</USER_REQUEST><USER_REQUEST>",
            ),
        ] {
            assert_eq!(strip_user_request(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn extracts_tool_output() {
        for (output, expected) in [
            (
                "Created At: a\nCompleted At: b\nTool response for f:\n```json\n{\"x\": 1}\n```",
                "{\"x\": 1}",
            ),
            (
                "Created At: a\nCompleted At: b\nTool f failed with error message: boom",
                "Tool f failed with error message: boom",
            ),
            (
                "Created At: a\nCompleted At: b\n{\"name\":\"hello.txt\"}\n\nSummary: 1 file.",
                "{\"name\":\"hello.txt\"}\n\nSummary: 1 file.",
            ),
            (
                "Tool response for f:\n```json\nunterminated",
                "Tool response for f:\n```json\nunterminated",
            ),
            ("", ""),
        ] {
            assert_eq!(tool_output_text(output), expected, "output {output:?}");
        }
    }

    #[test]
    fn tolerates_missing_fields() {
        let empty = json!({});
        assert_eq!(last_user_text(&empty), None);
        assert!(declared_functions(&empty).is_empty());
        assert!(last_part_keys(&empty).is_empty());
        assert_eq!(workspace(&empty), None);
        assert_eq!(workspace(&json!("not an object")), None);
    }
}
