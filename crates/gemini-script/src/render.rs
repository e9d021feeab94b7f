//! Turns a [`Reply`] into Gemini REST response shapes for one request.

use std::{collections::BTreeMap, time::Duration};

use serde_json::{Map, Value, json};

use crate::{
    inspect,
    reply::{Call, Chunking, ErrorReply, Hang, Reply},
    template::RequestCtx,
};

/// What the server sends for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// A non-200 answer with a Gemini error body.
    Error {
        status: u16,
        body: Value,
        headers: BTreeMap<String, String>,
    },
    /// An HTTP 200 answer: these events (SSE) or their merge (`generateContent`).
    Stream {
        events: Vec<Value>,
        delay: Duration,
        hang: Option<Hang>,
        headers: BTreeMap<String, String>,
    },
}

/// The canonical `error.status` name of an HTTP status.
pub(crate) fn status_name(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "NOT_IMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// A Gemini error body `{"error": {"code", "message", "status"}}`.
pub(crate) fn error_body(code: u16, message: &str, status: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": status}})
}

fn error_reply_body(e: &ErrorReply, ctx: &RequestCtx<'_>) -> Value {
    let message = e.message.as_deref().map_or_else(
        || format!("gemini-script: scripted {} error", e.code),
        |m| ctx.expand(m),
    );
    let status = e.status.as_deref().unwrap_or_else(|| status_name(e.code));
    error_body(e.code, &message, status)
}

/// Renders `reply`; `None` when one of its calls cannot be resolved for this
/// request (then the entry does not apply).
pub(crate) fn render(reply: &Reply, ctx: &RequestCtx<'_>, response_id: &str) -> Option<Plan> {
    if let Some(e) = reply.error.as_ref().filter(|e| !e.in_stream) {
        return Some(Plan::Error {
            status: e.code,
            body: error_reply_body(e, ctx),
            headers: reply.headers.clone(),
        });
    }
    if let Some(chunks) = &reply.chunks {
        return Some(Plan::Stream {
            events: chunks.clone(),
            delay: Duration::from_millis(reply.delay_ms),
            hang: reply.hang,
            headers: reply.headers.clone(),
        });
    }
    let calls = reply
        .calls
        .iter()
        .map(|c| resolve_call(c, ctx))
        .collect::<Option<Vec<_>>>()?;
    Some(stream(reply, calls, ctx, response_id))
}

/// A plain text answer; unlike [`render`] it cannot fail (there are no calls to resolve).
pub(crate) fn text(text: &str, ctx: &RequestCtx<'_>, response_id: &str) -> Plan {
    stream(&Reply::text(text), Vec::new(), ctx, response_id)
}

/// The 200 stream of `reply`, whose calls were resolved into `calls`.
fn stream(reply: &Reply, calls: Vec<Value>, ctx: &RequestCtx<'_>, response_id: &str) -> Plan {
    let thoughts = split(reply.chunking, reply.thought.iter().map(|t| ctx.expand(t)));
    let texts = split(reply.chunking, reply.text.iter().map(|t| ctx.expand(t)));

    let mut parts: Vec<Value> = thoughts
        .iter()
        .map(|t| json!({"text": t, "thought": true}))
        .chain(texts.iter().map(|t| json!({"text": t})))
        .collect();
    if let Some(sig) = &reply.signature {
        // Real Gemini signs the first call, else the final text/thought part.
        let target = if calls.is_empty() {
            parts.last_mut()
        } else {
            None
        };
        if let Some(Value::Object(part)) = target {
            part.insert("thoughtSignature".into(), json!(sig));
        }
    }
    let wrap = |parts: Vec<Value>| {
        json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": ctx.model,
            "responseId": response_id,
        })
    };
    let mut events: Vec<Value> = parts.into_iter().map(|p| wrap(vec![p])).collect();
    if !calls.is_empty() {
        let call_parts = calls
            .into_iter()
            .enumerate()
            .map(|(i, fc)| match (&reply.signature, i) {
                (Some(sig), 0) => json!({"functionCall": fc, "thoughtSignature": sig}),
                _ => json!({"functionCall": fc}),
            })
            .collect();
        events.push(wrap(call_parts));
    }
    match &reply.error {
        Some(e) => events.push(error_reply_body(e, ctx)),
        None if !reply.no_finish => {
            if events.is_empty() {
                events.push(wrap(vec![json!({"text": ""})]));
            }
            let usage = reply
                .usage
                .clone()
                .unwrap_or_else(|| default_usage(thoughts.len(), texts.len() + reply.calls.len()));
            if let Some(last) = events.last_mut() {
                last["candidates"][0]["finishReason"] =
                    json!(reply.finish.as_deref().unwrap_or("STOP"));
                last["usageMetadata"] = usage;
            }
        }
        None => {}
    }
    Plan::Stream {
        events,
        delay: Duration::from_millis(reply.delay_ms),
        hang: reply.hang,
        headers: reply.headers.clone(),
    }
}

/// Fixed, deterministic numbers so recorded fixtures do not depend on prompt size.
fn default_usage(thought_events: usize, content_events: usize) -> Value {
    let prompt = 100;
    let candidates = 10 * content_events.max(1);
    let thoughts = 5 * thought_events;
    let mut usage = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
    });
    if thoughts > 0 {
        usage["thoughtsTokenCount"] = json!(thoughts);
    }
    usage
}

fn split(chunking: Option<Chunking>, strings: impl Iterator<Item = String>) -> Vec<String> {
    strings
        .flat_map(|s| match chunking {
            None => vec![s],
            Some(Chunking::Chars(n)) => {
                let chars: Vec<char> = s.chars().collect();
                chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
            }
            Some(Chunking::Words(n)) => {
                let words: Vec<&str> = s.split_inclusive(char::is_whitespace).collect();
                words.chunks(n.max(1)).map(|w| w.concat()).collect()
            }
        })
        .collect()
}

/// The `functionCall` object for `call`, or `None` if its target is not declared.
fn resolve_call(call: &Call, ctx: &RequestCtx<'_>) -> Option<Value> {
    let name = match (&call.name, &call.first_declared_except) {
        (Some(name), _) => ctx.expand(name),
        (None, Some(except)) => inspect::declared_functions(ctx.body)
            .into_iter()
            .find(|n| !inspect::BUILTIN_TOOLS.contains(n) && !except.iter().any(|e| e == n))?
            .to_owned(),
        (None, None) => return None,
    };
    let mut args = match ctx.expand_value(&Value::Object(call.args.clone())) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if call.fill_required {
        fill_required(&mut args, inspect::parameters_schema(ctx.body, &name));
    }
    if !call.exact_args {
        let (summary, action) = default_summary(&name);
        args.entry("toolSummary").or_insert_with(|| json!(summary));
        args.entry("toolAction").or_insert_with(|| json!(action));
    }
    let mut fc = json!({"name": name, "args": args});
    if let Some(id) = &call.id {
        fc["id"] = json!(ctx.expand(id));
    }
    Some(fc)
}

/// Placeholder values for required properties the caller did not give.
fn fill_required(args: &mut Map<String, Value>, schema: Option<&Value>) {
    let Some(schema) = schema else { return };
    let required = schema.get("required").and_then(Value::as_array);
    for prop in required.into_iter().flatten().filter_map(Value::as_str) {
        if args.contains_key(prop) || prop == "toolSummary" || prop == "toolAction" {
            continue;
        }
        let spec = &schema["properties"][prop];
        let value = match spec
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            Some(first) => first.clone(),
            None => match spec.get("type").and_then(Value::as_str) {
                Some("integer" | "number") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("demo"),
            },
        };
        args.insert(prop.to_owned(), value);
    }
}

/// The harness requires `toolSummary` (a noun phrase) and `toolAction`
/// (an -ing phrase) on every call; it shows them in the UI.
fn default_summary(name: &str) -> (String, String) {
    let known = match name {
        "list_dir" => Some(("Directory listing", "Listing directory")),
        "run_command" => Some(("Command execution", "Running command")),
        "view_file" => Some(("File view", "Viewing file")),
        "write_to_file" => Some(("File creation", "Creating file")),
        "replace_file_content" => Some(("File edit", "Editing file")),
        "ask_question" => Some(("User question", "Asking user")),
        "invoke_subagent" => Some(("Subagent delegation", "Delegating task")),
        "grep_search" => Some(("Code search", "Searching code")),
        "find_by_name" => Some(("File search", "Finding files")),
        "get_weather" => Some(("Weather lookup", "Fetching weather")),
        _ => None,
    };
    if let Some((summary, action)) = known {
        return (summary.into(), action.into());
    }
    let words = name.replace(['_', '-'], " ");
    let mut summary: String = words.trim().to_owned();
    if let Some(first) = summary.get(..1) {
        summary = first.to_uppercase() + &summary[1..];
    }
    (summary, format!("Calling {name}"))
}

#[cfg(test)]
mod tests;
