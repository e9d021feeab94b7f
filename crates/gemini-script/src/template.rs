//! `{{variable}}` substitution in reply strings, filled from the request.
//!
//! Known variables: `workspace`, `user_text`, `tool_name`, `tool_output`,
//! `model`, `location`. Unknown `{{...}}` sequences are left untouched.

use serde_json::Value;

use crate::inspect;

/// What a reply is rendered against.
pub(crate) struct RequestCtx<'a> {
    pub(crate) model: &'a str,
    pub(crate) raw: &'a str,
    pub(crate) body: &'a Value,
}

/// Used when the request names no place for `{{location}}`.
const DEFAULT_LOCATION: &str = "Paris";

impl RequestCtx<'_> {
    fn variable(&self, name: &str) -> Option<String> {
        Some(match name {
            "workspace" => inspect::workspace(self.body).unwrap_or_else(|| ".".into()),
            "user_text" => inspect::last_user_text(self.body).unwrap_or_default(),
            "tool_name" => inspect::last_function_response_names(self.body)
                .last()
                .unwrap_or_default()
                .to_owned(),
            "tool_output" => inspect::last_function_responses(self.body)
                .pop()
                .and_then(|r| r.output)
                .map(|o| inspect::tool_output_text(&o).to_owned())
                .unwrap_or_default(),
            "model" => self.model.to_owned(),
            "location" => location(&inspect::last_user_text(self.body).unwrap_or_default()),
            _ => return None,
        })
    }

    /// Replaces known `{{variables}}` in `text`.
    pub(crate) fn expand(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let Some(len) = rest[start + 2..].find("}}") else {
                break;
            };
            let name = rest[start + 2..start + 2 + len].trim();
            out.push_str(&rest[..start]);
            match self.variable(name) {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[start..start + 4 + len]),
            }
            rest = &rest[start + 4 + len..];
        }
        out.push_str(rest);
        out
    }

    /// Expands templates in every string inside a JSON value.
    pub(crate) fn expand_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.expand(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.expand_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.expand_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// A place named after "in" or "for" in the prompt: the capitalised words
/// that follow (e.g. "weather in New York today?" gives "New York").
fn location(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        if !matches!(w.to_lowercase().as_str(), "in" | "for" | "at") {
            continue;
        }
        let place: Vec<&str> = words[i + 1..]
            .iter()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '-'))
            .take_while(|w| w.chars().next().is_some_and(char::is_uppercase))
            .collect();
        if !place.is_empty() {
            return place.join(" ");
        }
    }
    DEFAULT_LOCATION.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(template: &str, expected: &str) {
        let body = json!({
            "systemInstruction": {"parts": [{"text": "Active Workspaces:\n- /ws\n"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "<USER_REQUEST>\nweather in New York today?\n</USER_REQUEST>"}]},
                {"role": "model", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "Created At: x\nCompleted At: y\nsunny"}}}]}
            ]
        });
        let ctx = RequestCtx {
            model: "m1",
            raw: "",
            body: &body,
        };
        assert_eq!(ctx.expand(template), expected, "template {template:?}");
    }

    #[test]
    fn expands_known_variables() {
        for (template, expected) in [
            ("{{workspace}}", "/ws"),
            ("dir={{ workspace }}!", "dir=/ws!"),
            ("{{user_text}}", "weather in New York today?"),
            ("{{tool_name}}: {{tool_output}}", "get_weather: sunny"),
            ("{{model}}", "m1"),
            ("{{location}}", "New York"),
            ("{{unknown}} stays", "{{unknown}} stays"),
            ("unclosed {{workspace", "unclosed {{workspace"),
            ("no templates", "no templates"),
            ("€{{model}}€", "€m1€"),
        ] {
            check(template, expected);
        }
    }

    #[test]
    fn finds_locations() {
        for (text, expected) in [
            ("What's the weather in Tokyo?", "Tokyo"),
            ("forecast for San Francisco, please", "San Francisco"),
            ("weather in paris", DEFAULT_LOCATION),
            ("weather", DEFAULT_LOCATION),
        ] {
            assert_eq!(location(text), expected, "text {text:?}");
        }
    }
}
