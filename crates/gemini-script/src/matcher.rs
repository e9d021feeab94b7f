//! Predicates that decide whether a script entry answers a request.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::inspect;

/// A part kind that can appear in the last content of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PartKind {
    /// Plain (non-thought) text.
    Text,
    /// A tool result. The harness sends these with `role: "model"`.
    FunctionResponse,
    /// A function call (rare as a last part; the harness replays calls before their results).
    FunctionCall,
    /// Inline media.
    InlineData,
}

impl PartKind {
    fn key(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::FunctionResponse => "functionResponse",
            Self::FunctionCall => "functionCall",
            Self::InlineData => "inlineData",
        }
    }
}

/// The role of a content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `role: "user"` (user prompts and system injections).
    User,
    /// `role: "model"` (model turns, and tool results from this harness).
    Model,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Model => "model",
        }
    }
}

/// Conditions on a request; every condition that is set must hold.
/// An empty matcher accepts every request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Matcher {
    /// The model name from the URL must equal this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The last content must contain a part of this kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_part: Option<PartKind>,
    /// The last content must have this role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_role: Option<Role>,
    /// The raw request body must contain this substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The raw request body must not contain this substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_contains: Option<String>,
    /// The last user text (wrapper stripped) must contain this substring (case-sensitive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_text_contains: Option<String>,
    /// The last user text must contain at least one of these words (case-insensitive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// Every one of these functions must be declared in `tools`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub declares: Vec<String>,
    /// None of these functions may be declared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_declares: Vec<String>,
    /// The last content must carry a `functionResponse` for this function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_response: Option<String>,
    /// Whether the last user text must (true) or must not (false) be a harness
    /// `<SYSTEM_MESSAGE>` injection (subagent prompts and reports, Stop-hook continuations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_message: Option<bool>,
}

impl Matcher {
    /// A matcher that accepts everything.
    pub fn any() -> Self {
        Self::default()
    }

    /// Requests whose last content is user text (a new prompt or a system injection).
    pub fn user_text() -> Self {
        Self {
            last_part: Some(PartKind::Text),
            last_role: Some(Role::User),
            ..Self::default()
        }
    }

    /// Requests that report tool results (`functionResponse` in the last content).
    pub fn function_response() -> Self {
        Self::any().last_part(PartKind::FunctionResponse)
    }

    /// Requests that report the result of the named function.
    pub fn function_response_to(name: impl Into<String>) -> Self {
        Self {
            function_response: Some(name.into()),
            ..Self::function_response()
        }
    }

    /// Requires the model name.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Requires a part kind in the last content.
    pub fn last_part(mut self, kind: PartKind) -> Self {
        self.last_part = Some(kind);
        self
    }

    /// Requires the role of the last content.
    pub fn last_role(mut self, role: Role) -> Self {
        self.last_role = Some(role);
        self
    }

    /// Requires a substring of the raw body.
    pub fn contains(mut self, needle: impl Into<String>) -> Self {
        self.contains = Some(needle.into());
        self
    }

    /// Forbids a substring of the raw body.
    pub fn not_contains(mut self, needle: impl Into<String>) -> Self {
        self.not_contains = Some(needle.into());
        self
    }

    /// Requires a substring of the last user text.
    pub fn user_text_contains(mut self, needle: impl Into<String>) -> Self {
        self.user_text_contains = Some(needle.into());
        self
    }

    /// Requires one of these words in the last user text (case-insensitive).
    pub fn keywords<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.keywords = words.into_iter().map(Into::into).collect();
        self
    }

    /// Requires the function to be declared.
    pub fn declares(mut self, name: impl Into<String>) -> Self {
        self.declares.push(name.into());
        self
    }

    /// Requires the function not to be declared.
    pub fn not_declares(mut self, name: impl Into<String>) -> Self {
        self.not_declares.push(name.into());
        self
    }

    /// Requires (true) or forbids (false) a `<SYSTEM_MESSAGE>` as the last user text.
    pub fn system_message(mut self, is_system: bool) -> Self {
        self.system_message = Some(is_system);
        self
    }

    /// Whether this matcher accepts the request.
    pub fn matches(&self, model: &str, raw_body: &str, body: &Value) -> bool {
        if self.model.as_deref().is_some_and(|m| m != model) {
            return false;
        }
        if self
            .contains
            .as_deref()
            .is_some_and(|n| !raw_body.contains(n))
            || self
                .not_contains
                .as_deref()
                .is_some_and(|n| raw_body.contains(n))
        {
            return false;
        }
        if let Some(kind) = self.last_part
            && !inspect::last_part_keys(body).contains(&kind.key())
        {
            return false;
        }
        if let Some(role) = self.last_role
            && inspect::last_role(body) != Some(role.as_str())
        {
            return false;
        }
        if !self.declares.is_empty() || !self.not_declares.is_empty() {
            let declared = inspect::declared_functions(body);
            if !self.declares.iter().all(|n| declared.contains(&n.as_str()))
                || self
                    .not_declares
                    .iter()
                    .any(|n| declared.contains(&n.as_str()))
            {
                return false;
            }
        }
        if let Some(name) = &self.function_response
            && !inspect::last_function_response_names(body).any(|n| n == name)
        {
            return false;
        }
        self.matches_user_text(body)
    }

    fn matches_user_text(&self, body: &Value) -> bool {
        if self.user_text_contains.is_none()
            && self.keywords.is_empty()
            && self.system_message.is_none()
        {
            return true;
        }
        let Some(text) = inspect::last_user_text(body) else {
            return false;
        };
        if self
            .user_text_contains
            .as_deref()
            .is_some_and(|n| !text.contains(n))
        {
            return false;
        }
        if self
            .system_message
            .is_some_and(|want| inspect::is_system_message(&text) != want)
        {
            return false;
        }
        let lower = text.to_lowercase();
        self.keywords.is_empty()
            || self
                .keywords
                .iter()
                .any(|k| lower.contains(&k.to_lowercase()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt(text: &str) -> Value {
        json!({
            "contents": [{"role": "user", "parts": [{"text": format!("<USER_REQUEST>\n{text}\n</USER_REQUEST>")}]}],
            "tools": [{"functionDeclarations": [{"name": "list_dir"}, {"name": "get_weather"}]}]
        })
    }

    fn tool_result(name: &str) -> Value {
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "<USER_REQUEST>\nWeather?\n</USER_REQUEST>"}]},
                {"role": "model", "parts": [{"functionCall": {"name": name, "args": {}}}]},
                {"role": "model", "parts": [{"functionResponse": {"name": name, "response": {"output": "ok"}}}]}
            ]
        })
    }

    fn check(matcher: Matcher, model: &str, body: Value, expected: bool) {
        let raw = body.to_string();
        assert_eq!(
            matcher.matches(model, &raw, &body),
            expected,
            "matcher {matcher:?} on {body}"
        );
    }

    #[test]
    fn matching_table() {
        let m = "gemini-3-flash-preview";
        let system = json!({"contents": [{"role": "user", "parts": [{"text": "The following is a <SYSTEM_MESSAGE> not actually sent by the user. content=SUBTASK"}]}]});
        let cases: Vec<(Matcher, &str, Value, bool)> = vec![
            (Matcher::any(), m, json!({}), true),
            (Matcher::any().model("other"), m, prompt("hi"), false),
            (Matcher::any().model(m), m, prompt("hi"), true),
            (Matcher::user_text(), m, prompt("hi"), true),
            (Matcher::user_text(), m, tool_result("get_weather"), false),
            (
                Matcher::function_response(),
                m,
                tool_result("get_weather"),
                true,
            ),
            // The harness sends tool results with role "model", not "user".
            (
                Matcher::function_response().last_role(Role::User),
                m,
                tool_result("x"),
                false,
            ),
            (
                Matcher::function_response_to("get_weather"),
                m,
                tool_result("get_weather"),
                true,
            ),
            (
                Matcher::function_response_to("list_dir"),
                m,
                tool_result("get_weather"),
                false,
            ),
            (Matcher::any().contains("list_dir"), m, prompt("hi"), true),
            (
                Matcher::any().not_contains("list_dir"),
                m,
                prompt("hi"),
                false,
            ),
            (
                Matcher::any().user_text_contains("Paris"),
                m,
                prompt("Weather in Paris"),
                true,
            ),
            (
                Matcher::any().user_text_contains("paris"),
                m,
                prompt("Weather in Paris"),
                false,
            ),
            (
                Matcher::any().keywords(["PARIS", "rome"]),
                m,
                prompt("Weather in Paris"),
                true,
            ),
            (
                Matcher::any().keywords(["rome"]),
                m,
                prompt("Weather in Paris"),
                false,
            ),
            // Keywords still see the prompt while the turn reports tool results.
            (
                Matcher::any().keywords(["weather"]),
                m,
                tool_result("x"),
                true,
            ),
            (Matcher::any().keywords(["weather"]), m, json!({}), false),
            (
                Matcher::any().declares("list_dir").declares("get_weather"),
                m,
                prompt("x"),
                true,
            ),
            (
                Matcher::any().declares("change_background"),
                m,
                prompt("x"),
                false,
            ),
            (
                Matcher::any().not_declares("list_dir"),
                m,
                prompt("x"),
                false,
            ),
            (Matcher::any().system_message(true), m, system.clone(), true),
            (
                Matcher::any().system_message(false),
                m,
                system.clone(),
                false,
            ),
            (Matcher::any().system_message(false), m, prompt("x"), true),
            (
                Matcher::any().last_part(PartKind::InlineData),
                m,
                prompt("x"),
                false,
            ),
        ];
        for (matcher, model, body, expected) in cases {
            check(matcher, model, body, expected);
        }
    }
}
