//! Scripts: ordered entries (matcher + reply + repeat count), a default reply,
//! JSON loading and validation.

use std::{num::NonZeroU32, path::Path};

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::{
    error::{Error, Result},
    matcher::Matcher,
    reply::{Chunking, Reply},
};

/// How many requests an entry answers before it is used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// This many requests (JSON: a positive number; default 1).
    Times(NonZeroU32),
    /// Every matching request (JSON: `"forever"`).
    Forever,
}

impl Default for Repeat {
    fn default() -> Self {
        Self::Times(NonZeroU32::MIN)
    }
}

impl Serialize for Repeat {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Times(n) => s.serialize_u32(n.get()),
            Self::Forever => s.serialize_str("forever"),
        }
    }
}

impl<'de> Deserialize<'de> for Repeat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Repeat;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a positive number or "forever""#)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Repeat, E> {
                u32::try_from(n)
                    .ok()
                    .and_then(NonZeroU32::new)
                    .map(Repeat::Times)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Unsigned(n), &self))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Repeat, E> {
                Err(E::invalid_value(de::Unexpected::Signed(n), &self))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Repeat, E> {
                match s {
                    "forever" => Ok(Repeat::Forever),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// One script entry: when it applies, what it answers, how often.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// A label shown in the request log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The conditions (JSON key `match`); empty accepts everything.
    #[serde(default, rename = "match", skip_serializing_if = "is_any")]
    pub matcher: Matcher,
    /// How many requests this entry answers.
    #[serde(default, skip_serializing_if = "is_once")]
    pub repeat: Repeat,
    /// The answer.
    pub reply: Reply,
}

fn is_any(m: &Matcher) -> bool {
    *m == Matcher::default()
}

fn is_once(r: &Repeat) -> bool {
    *r == Repeat::default()
}

impl Entry {
    /// Labels the entry.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Answers `n` requests (0 is treated as 1).
    pub fn times(mut self, n: u32) -> Self {
        self.repeat = Repeat::Times(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN));
        self
    }

    /// Answers every matching request.
    pub fn forever(mut self) -> Self {
        self.repeat = Repeat::Forever;
        self
    }
}

impl From<Reply> for Entry {
    fn from(reply: Reply) -> Self {
        Self {
            reply,
            ..Self::default()
        }
    }
}

impl Reply {
    /// Makes an entry that answers only requests accepted by `matcher`.
    pub fn when(self, matcher: Matcher) -> Entry {
        Entry {
            matcher,
            ..Entry::from(self)
        }
    }

    /// Makes an entry that answers every matching request, forever.
    pub fn forever(self) -> Entry {
        Entry::from(self).forever()
    }

    /// Makes an entry that answers `n` requests.
    pub fn times(self, n: u32) -> Entry {
        Entry::from(self).times(n)
    }
}

/// An ordered list of entries plus the reply used when none matches.
///
/// Each request is answered by the first entry whose matcher accepts it (and
/// whose calls can be resolved); that entry's repeat count is then decremented.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The entries, tried in order.
    #[serde(default)]
    pub replies: Vec<Entry>,
    /// The reply when no entry matches (default: a text saying so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Reply>,
}

impl Script {
    /// An empty script (every request gets the default reply).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an entry (a bare [`Reply`] becomes a once-only, match-anything entry).
    pub fn then(mut self, entry: impl Into<Entry>) -> Self {
        self.replies.push(entry.into());
        self
    }

    /// Sets the default reply.
    pub fn default_reply(mut self, reply: Reply) -> Self {
        self.default = Some(reply);
        self
    }

    /// Parses a script: either a JSON list of entries or an object
    /// `{"replies": [...], "default": {...}}`. The result is validated.
    pub fn from_json(text: &str) -> Result<Self> {
        let script = if text.trim_start().starts_with('[') {
            Self {
                replies: parse::<Vec<Entry>>(text)?,
                default: None,
            }
        } else {
            parse::<Self>(text)?
        };
        script.validate()?;
        Ok(script)
    }

    /// Reads and parses a script file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// The script as pretty JSON (the object form).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Checks every entry for values the server cannot serve.
    pub fn validate(&self) -> Result<()> {
        for (i, entry) in self.replies.iter().enumerate() {
            let location = match &entry.name {
                Some(name) => format!("entry {i} ({name:?})"),
                None => format!("entry {i}"),
            };
            validate_entry(entry).map_err(invalid(location))?;
        }
        if let Some(default) = &self.default {
            validate_reply(default)
                .map_err(|(field, problem)| {
                    (field.trim_start_matches("reply.").to_owned(), problem)
                })
                .map_err(invalid("default reply".into()))?;
        }
        Ok(())
    }
}

/// Checks an entry added to a running script; `i` is its position in the added batch.
pub(crate) fn validate_pushed(i: usize, entry: &Entry) -> Result<()> {
    validate_entry(entry).map_err(invalid(format!("pushed entry {i}")))
}

/// Parses the body of the push control route: one entry or a list of entries.
pub(crate) fn parse_entries(text: &str) -> Result<Vec<Entry>> {
    let entries = if text.trim_start().starts_with('[') {
        parse::<Vec<Entry>>(text)?
    } else {
        vec![parse::<Entry>(text)?]
    };
    for (i, entry) in entries.iter().enumerate() {
        validate_pushed(i, entry)?;
    }
    Ok(entries)
}

/// Turns a [`Problem`] found at `location` into the crate error.
fn invalid(location: String) -> impl FnOnce(Problem) -> Error {
    move |(field, problem)| Error::Invalid {
        location,
        field,
        problem,
    }
}

fn parse<T: de::DeserializeOwned>(text: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = (inner.line(), inner.column());
        let message = inner.to_string();
        // serde_json appends the position, which the error already reports.
        let suffix = format!(" at line {line} column {column}");
        Error::Parse {
            path,
            line,
            column,
            message: message.strip_suffix(&suffix).unwrap_or(&message).to_owned(),
        }
    })
}

type Problem = (String, String);

fn problem(field: impl Into<String>, what: impl Into<String>) -> Problem {
    (field.into(), what.into())
}

fn validate_entry(entry: &Entry) -> std::result::Result<(), Problem> {
    let m = &entry.matcher;
    for (field, words) in [
        ("keywords", &m.keywords),
        ("declares", &m.declares),
        ("not_declares", &m.not_declares),
    ] {
        if words.iter().any(|w| w.is_empty()) {
            return Err(problem(
                format!("match.{field}"),
                "must not contain empty strings",
            ));
        }
    }
    validate_reply(&entry.reply)
}

fn validate_reply(reply: &Reply) -> std::result::Result<(), Problem> {
    let has_content =
        !reply.text.is_empty() || !reply.thought.is_empty() || !reply.calls.is_empty();
    if reply.chunks.is_some() && (has_content || reply.error.is_some()) {
        return Err(problem(
            "reply.chunks",
            "cannot be combined with text, thought, calls or error (raw chunks are sent verbatim)",
        ));
    }
    if let Some(error) = &reply.error {
        if !(400..=599).contains(&error.code) {
            return Err(problem(
                "reply.error.code",
                format!(
                    "is {}; use an HTTP error status from 400 to 599",
                    error.code
                ),
            ));
        }
        if !error.in_stream && has_content {
            return Err(problem(
                "reply.error",
                "an HTTP error reply cannot also carry text, thought or calls; \
                 set `in_stream: true` to send the error after streamed content",
            ));
        }
    }
    if let Some(Chunking::Chars(0) | Chunking::Words(0)) = reply.chunking {
        return Err(problem("reply.chunking", "must be at least 1"));
    }
    if reply.finish.as_deref() == Some("") {
        return Err(problem(
            "reply.finish",
            "must not be empty (use `no_finish: true` to omit it)",
        ));
    }
    if let Some(sig) = &reply.signature
        && base64::engine::general_purpose::STANDARD
            .decode(sig)
            .is_err()
    {
        return Err(problem(
            "reply.signature",
            format!(
                "{sig:?} is not standard base64 (the harness decodes thoughtSignature as bytes)"
            ),
        ));
    }
    if let Some(usage) = &reply.usage
        && !usage.is_object()
    {
        return Err(problem("reply.usage", "must be a usageMetadata object"));
    }
    if let Some(chunks) = &reply.chunks
        && let Some(i) = chunks.iter().position(|c| !c.is_object())
    {
        return Err(problem(
            format!("reply.chunks[{i}]"),
            "must be a JSON object",
        ));
    }
    for (name, value) in &reply.headers {
        if axum::http::HeaderName::try_from(name.as_str()).is_err()
            || axum::http::HeaderValue::try_from(value.as_str()).is_err()
        {
            return Err(problem(
                "reply.headers",
                format!("{name:?}: {value:?} is not a valid HTTP header"),
            ));
        }
    }
    for (i, call) in reply.calls.iter().enumerate() {
        let field = |f: &str| format!("reply.calls[{i}].{f}");
        match (&call.name, &call.first_declared_except) {
            (Some(_), Some(_)) => {
                return Err(problem(
                    field("name"),
                    "cannot be combined with `first_declared_except`",
                ));
            }
            (None, None) => {
                return Err(problem(
                    field("name"),
                    "is missing (or give `first_declared_except`)",
                ));
            }
            (Some(name), None) if name.is_empty() => {
                return Err(problem(field("name"), "must not be empty"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
