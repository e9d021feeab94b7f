//! The request log: what the model was asked and what it answered.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::inspect::{self, FunctionCall, FunctionResponse};

/// Which part of the script answered a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum AnsweredBy {
    /// A script entry: its position in the loaded script (pushed entries
    /// continue the numbering) and its name.
    Entry {
        /// Position of the entry.
        index: usize,
        /// The entry's label, if any.
        name: Option<String>,
    },
    /// The script's default reply (no entry matched).
    Default,
    /// Answered without the script (`countTokens`).
    Builtin,
    /// Rejected before the script was consulted (unknown path, bad JSON).
    Rejected,
}

impl AnsweredBy {
    /// The entry index, if an entry answered.
    pub fn entry_index(&self) -> Option<usize> {
        match self {
            Self::Entry { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// One request the server received, as the tests see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// 1-based arrival number.
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// Path and query, e.g. `/v1beta/models/m:streamGenerateContent?alt=sse`.
    pub path: String,
    /// The model name from the path.
    pub model: Option<String>,
    /// The method after the colon: `streamGenerateContent`, `generateContent`, `countTokens`.
    pub rpc: Option<String>,
    /// Request headers (lower-case names; repeated headers joined with `, `).
    pub headers: BTreeMap<String, String>,
    /// The parsed JSON body (a JSON string holding the raw text if it was not JSON).
    pub body: Value,
    /// Which script entry (or the default) answered.
    pub answered_by: AnsweredBy,
    /// The HTTP status sent.
    pub status: u16,
}

impl LoggedRequest {
    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The last user text, with the harness's `<USER_REQUEST>` wrapper removed.
    pub fn last_user_text(&self) -> Option<String> {
        inspect::last_user_text(&self.body)
    }

    /// The names in `tools[].functionDeclarations[]`.
    pub fn declared_functions(&self) -> Vec<String> {
        inspect::declared_functions(&self.body)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The declaration of a function, if declared.
    pub fn function_declaration(&self, name: &str) -> Option<&Value> {
        inspect::function_declaration(&self.body, name)
    }

    /// The `functionResponse` parts of the last content (the results this request reports).
    pub fn function_responses(&self) -> Vec<FunctionResponse> {
        inspect::last_function_responses(&self.body)
    }

    /// Every `functionResponse` in the history.
    pub fn all_function_responses(&self) -> Vec<FunctionResponse> {
        inspect::function_responses(&self.body)
    }

    /// Every `functionCall` in the history.
    pub fn function_calls(&self) -> Vec<FunctionCall> {
        inspect::function_calls(&self.body)
    }

    /// The system prompt text.
    pub fn system_instruction(&self) -> String {
        inspect::system_instruction(&self.body)
    }
}
