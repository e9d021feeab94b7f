//! What the scripted model answers: reply types and their builder methods.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};
use serde_json::{Map, Value};

/// One model answer: a stream of thought, text and function-call parts, or an error.
///
/// Built in code with [`Reply::text`], [`Reply::thought`], [`Reply::call`],
/// [`Reply::error`], [`Reply::chunks`] and the chained modifiers, or read from
/// JSON (see the crate docs for the field list).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reply {
    /// Thought parts (`thought: true`), streamed first, one SSE event per string.
    #[serde(
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub thought: Vec<String>,
    /// Text parts, streamed after the thoughts, one SSE event per string.
    #[serde(
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub text: Vec<String>,
    /// Function calls, sent together in one event after the text.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// A `thoughtSignature` (base64) for the first call part, else the last text
    /// part, else the last thought part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// `finishReason` of the last event (default `STOP`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// Send no `finishReason` and no `usageMetadata` at all.
    #[serde(skip_serializing_if = "is_false")]
    pub no_finish: bool,
    /// `usageMetadata` of the last event (default: small fixed numbers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// Pause before every event, in milliseconds.
    #[serde(skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Split every thought and text string into smaller events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunking: Option<Chunking>,
    /// Keep the stream open after the last event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<Hang>,
    /// Answer with a Gemini error instead of (or, `in_stream`, after) the content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReply>,
    /// Raw `GenerateContentResponse` objects sent verbatim, one event each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<Value>>,
    /// Extra response headers (e.g. `Retry-After`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// One `functionCall` part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Call {
    /// The function name. Exactly one of `name` and `first_declared_except` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Call the first declared function that is neither a harness built-in nor
    /// listed here (e.g. a frontend tool). The entry is skipped when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_declared_except: Option<Vec<String>>,
    /// The arguments object. String values may use template variables.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub args: Map<String, Value>,
    /// The call `id` (the harness mints one when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Send `args` exactly as given: no default `toolSummary` / `toolAction`.
    #[serde(skip_serializing_if = "is_false")]
    pub exact_args: bool,
    /// Add placeholder values for required arguments (from the declared schema)
    /// that `args` does not give.
    #[serde(skip_serializing_if = "is_false")]
    pub fill_required: bool,
}

/// A Gemini error answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    /// HTTP status and `error.code`: 400–599 (401, 403, 429, 500, 503 ...).
    pub code: u16,
    /// `error.message` (default: a message naming the status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `error.status` (default: the canonical name, e.g. `RESOURCE_EXHAUSTED` for 429).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Send the error object as an SSE event inside an HTTP 200 stream, after any content.
    #[serde(default, skip_serializing_if = "is_false")]
    pub in_stream: bool,
}

/// How to split thought and text strings into SSE events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Chunking {
    /// At most this many characters per event.
    Chars(usize),
    /// At most this many words per event (whitespace stays with the preceding word).
    Words(usize),
}

/// Keep the response stream open after the last event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hang {
    /// For this many milliseconds, then end the stream.
    Millis(u64),
    /// Until the client goes away or the server shuts down.
    Forever,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Visitor;
    impl<'de> de::Visitor<'de> for Visitor {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or a list of strings")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            Ok(vec![s.to_owned()])
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<String>()? {
                out.push(s);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Visitor)
}

impl Serialize for Hang {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Millis(ms) => s.serialize_u64(*ms),
            Self::Forever => s.serialize_str("forever"),
        }
    }
}

impl<'de> Deserialize<'de> for Hang {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Hang;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a number of milliseconds or "forever""#)
            }
            fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Hang, E> {
                Ok(Hang::Millis(ms))
            }
            fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Hang, E> {
                u64::try_from(ms)
                    .map(Hang::Millis)
                    .map_err(|_| E::custom("hang must not be negative"))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Hang, E> {
                match s {
                    "forever" => Ok(Hang::Forever),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Reply {
    /// Streamed text; each string is one SSE event.
    pub fn text<I, S>(chunks: I) -> Self
    where
        I: IntoTexts<S>,
        S: Into<String>,
    {
        Self {
            text: chunks.into_texts(),
            ..Self::default()
        }
    }

    /// A reply with only the given function call (default `toolSummary`/`toolAction` added).
    pub fn call(name: impl Into<String>, args: Value) -> Self {
        Self::default().with_call(Call::new(name, args))
    }

    /// A reply with several function calls in one response (parallel calls).
    pub fn calls(calls: impl IntoIterator<Item = Call>) -> Self {
        Self {
            calls: calls.into_iter().collect(),
            ..Self::default()
        }
    }

    /// An HTTP error with the given status (400, 401, 403, 429, 500, 503 ...).
    pub fn error(code: u16) -> Self {
        Self {
            error: Some(ErrorReply {
                code,
                ..ErrorReply::default()
            }),
            ..Self::default()
        }
    }

    /// Raw `GenerateContentResponse` objects, sent verbatim.
    pub fn chunks(chunks: impl IntoIterator<Item = Value>) -> Self {
        Self {
            chunks: Some(chunks.into_iter().collect()),
            ..Self::default()
        }
    }

    /// Adds thought parts (streamed before the text).
    pub fn thought<I, S>(mut self, chunks: I) -> Self
    where
        I: IntoTexts<S>,
        S: Into<String>,
    {
        self.thought.extend(chunks.into_texts());
        self
    }

    /// Adds text parts (streamed after thoughts, before calls).
    pub fn and_text<I, S>(mut self, chunks: I) -> Self
    where
        I: IntoTexts<S>,
        S: Into<String>,
    {
        self.text.extend(chunks.into_texts());
        self
    }

    /// Adds a function call (default `toolSummary`/`toolAction` added).
    pub fn and_call(self, name: impl Into<String>, args: Value) -> Self {
        self.with_call(Call::new(name, args))
    }

    /// Adds a fully specified call.
    pub fn with_call(mut self, call: Call) -> Self {
        self.calls.push(call);
        self
    }

    /// Sets the `thoughtSignature` (base64).
    pub fn signature(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// Sets the `finishReason` (e.g. `MAX_TOKENS`, `SAFETY`).
    pub fn finish(mut self, reason: impl Into<String>) -> Self {
        self.finish = Some(reason.into());
        self
    }

    /// Sends no `finishReason` and no usage.
    pub fn no_finish(mut self) -> Self {
        self.no_finish = true;
        self
    }

    /// Sets the `usageMetadata` object.
    pub fn usage(mut self, usage: Value) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Waits this long before every event.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }

    /// Splits strings into events of at most `n` characters.
    pub fn chunk_chars(mut self, n: usize) -> Self {
        self.chunking = Some(Chunking::Chars(n));
        self
    }

    /// Splits strings into events of at most `n` words.
    pub fn chunk_words(mut self, n: usize) -> Self {
        self.chunking = Some(Chunking::Words(n));
        self
    }

    /// Keeps the stream open for `ms` after the last event.
    pub fn hang_ms(mut self, ms: u64) -> Self {
        self.hang = Some(Hang::Millis(ms));
        self
    }

    /// Keeps the stream open until the client disconnects or the server stops.
    pub fn hang_forever(mut self) -> Self {
        self.hang = Some(Hang::Forever);
        self
    }

    /// Sets the error message (for [`Reply::error`] replies).
    pub fn message(mut self, message: impl Into<String>) -> Self {
        if let Some(e) = &mut self.error {
            e.message = Some(message.into());
        }
        self
    }

    /// Sets the error status name (for [`Reply::error`] replies).
    pub fn status(mut self, status: impl Into<String>) -> Self {
        if let Some(e) = &mut self.error {
            e.status = Some(status.into());
        }
        self
    }

    /// Sends the error as an event inside an HTTP 200 stream, after any content.
    pub fn in_stream(mut self) -> Self {
        if let Some(e) = &mut self.error {
            e.in_stream = true;
        }
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }
}

impl Call {
    /// A call to `name`; `args` should be a JSON object (anything else becomes `{}`).
    pub fn new(name: impl Into<String>, args: Value) -> Self {
        Self {
            name: Some(name.into()),
            args: into_object(args),
            ..Self::default()
        }
    }

    /// A call to the first declared non-built-in function not in `except`,
    /// with missing required arguments filled from its schema.
    pub fn first_declared_except<I, S>(except: I, args: Value) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            first_declared_except: Some(except.into_iter().map(Into::into).collect()),
            args: into_object(args),
            fill_required: true,
            ..Self::default()
        }
    }

    /// Sets the call id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sends the arguments exactly as given (no default `toolSummary`/`toolAction`).
    pub fn exact_args(mut self) -> Self {
        self.exact_args = true;
        self
    }

    /// Fills missing required arguments from the declared schema.
    pub fn fill_required(mut self) -> Self {
        self.fill_required = true;
        self
    }
}

fn into_object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Things that can be turned into a list of text chunks: a string or a list of strings.
pub trait IntoTexts<S> {
    /// The chunks.
    fn into_texts(self) -> Vec<String>;
}

impl IntoTexts<String> for String {
    fn into_texts(self) -> Vec<String> {
        vec![self]
    }
}

impl IntoTexts<&str> for &str {
    fn into_texts(self) -> Vec<String> {
        vec![self.to_owned()]
    }
}

impl<S: Into<String>, const N: usize> IntoTexts<S> for [S; N] {
    fn into_texts(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<S: Into<String>> IntoTexts<S> for Vec<S> {
    fn into_texts(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}
