//! A scripted, deterministic Gemini-compatible model endpoint.
//!
//! The Antigravity harness calls its model at
//! `POST {baseUrl}/v1beta/models/{model}:streamGenerateContent?alt=sse`. This
//! crate serves that route (plus `:generateContent` and `:countTokens`) on
//! 127.0.0.1 from a [`Script`], so every harness behaviour — text, reasoning,
//! tool calls, errors, slow or hanging streams — is reproducible offline. It
//! also carries the offline [`demo`] script and the named [`scenarios`] that
//! drive fixture recording.
//!
//! ```no_run
//! use gemini_script::{Matcher, Reply, Script, ScriptedModel};
//! use serde_json::json;
//!
//! # async fn example() -> gemini_script::Result<()> {
//! let script = Script::new()
//!     .then(Reply::call("get_weather", json!({"city": "Paris"})).thought("I need the weather."))
//!     .then(Reply::text(["Paris ", "is sunny."]).when(Matcher::function_response_to("get_weather")));
//! let model = ScriptedModel::start(script).await?;
//! // Point the harness at model.base_url(), run a turn, then:
//! let requests = model.requests();
//! assert!(requests[0].declared_functions().contains(&"get_weather".to_string()));
//! # Ok(()) }
//! ```
//!
//! # Script format
//!
//! A script is JSON: either a list of entries, or an object
//! `{"replies": [entry...], "default": reply}`. Each model request is answered
//! by the **first** entry whose `match` accepts it (and whose calls can be
//! resolved); that entry's `repeat` count is then used up by one. When no entry
//! matches, the `default` reply answers (built-in default: a short text saying
//! nothing matched). Unknown fields are errors, and every error names the entry
//! and field.
//!
//! **Entry**: `{"name"?: str, "match"?: matcher, "repeat"?: n | "forever" (default 1), "reply": reply}`.
//!
//! **Matcher** (all set conditions must hold; see [`Matcher`]):
//! `model` (exact model name), `last_part` (`"text"`, `"functionResponse"`,
//! `"functionCall"`, `"inlineData"` present in the last content), `last_role`
//! (`"user"`/`"model"` — note the harness sends tool results with role
//! `"model"`, so match them with `last_part: "functionResponse"`), `contains` /
//! `not_contains` (substring of the raw body), `user_text_contains` (substring
//! of the last user text, `<USER_REQUEST>` wrapper removed), `keywords` (any of
//! these words in the last user text, case-insensitive), `declares` /
//! `not_declares` (function names in `tools`), `function_response` (the last
//! content reports this function's result), `system_message` (the last user
//! text is / is not a harness `<SYSTEM_MESSAGE>` injection).
//!
//! **Reply** (see [`Reply`]):
//! `thought` and `text` (a string or a list; one SSE event per string),
//! `calls` (`[{"name", "args", "id"?, "exact_args"?, "fill_required"?}]` or
//! `{"first_declared_except": [names], ...}`; all calls go in one event after
//! the text; `toolSummary`/`toolAction` are added unless `exact_args`),
//! `signature` (base64 `thoughtSignature`), `finish` (default `"STOP"`),
//! `no_finish`, `usage`, `delay_ms` (before each event), `chunking`
//! (`{"chars": n}` or `{"words": n}`), `hang` (milliseconds or `"forever"`
//! after the last event), `error` (`{"code": 400..599, "message"?, "status"?,
//! "in_stream"?}`), `chunks` (raw response objects sent verbatim), `headers`.
//!
//! Strings in `thought`, `text`, call names, ids and args may use the template
//! variables `{{workspace}}` (first workspace in the system prompt),
//! `{{user_text}}`, `{{tool_name}}` and `{{tool_output}}` (the last reported
//! tool result, timestamps removed), `{{model}}` and `{{location}}` (a
//! capitalised place after "in"/"for" in the prompt, default Paris).
//!
//! # Control routes
//!
//! `POST /_script/load` (replace the script), `POST /_script/push` (append
//! entries), `POST /_script/reset` (empty script and log), `GET
//! /_script/requests` / `DELETE /_script/requests` / `POST
//! /_script/requests/take` (the log: read, empty, or both at once), `GET
//! /_script/state` (remaining entries). Malformed bodies get HTTP 400 with
//! `{"error": "..."}` naming the entry and field. The crate's `README.md` has
//! the full reference with examples.

mod control;
pub mod demo;
mod engine;
mod error;
pub mod inspect;
mod log;
mod matcher;
mod render;
mod reply;
pub mod scenarios;
mod script;
mod server;
mod shared;
mod template;

pub use engine::EntryState;
pub use error::{Error, Result};
pub use log::{AnsweredBy, LoggedRequest};
pub use matcher::{Matcher, PartKind, Role};
pub use reply::{Call, Chunking, ErrorReply, Hang, IntoTexts, Reply};
pub use script::{Entry, Repeat, Script};
pub use server::{Handle, ScriptedModel};
