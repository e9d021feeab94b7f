//! Serde helpers shared by the event and input types.
//!
//! Serde's derived internally-tagged enums buffer their input, which loses the position of an
//! error inside the variant: a bad `mimeType` deep in a message would only be reported as "at
//! `messages[3]`". The tagged unions of the input side are therefore dispatched by hand
//! ([`deserialize_tagged`]), and the inner location travels in the error text as
//! ``at `path`: reason`` until [`locate`] splits it back out at the top.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde_json::{Map, Value};

/// `skip_serializing_if` for optional JSON payloads the protocol forbids to be `null`.
pub(crate) fn is_none_or_null(value: &Option<Value>) -> bool {
    matches!(value, None | Some(Value::Null))
}

/// Deserializes a list that the protocol requires to be non-empty.
pub(crate) fn non_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let items = Vec::<T>::deserialize(deserializer)?;
    if items.is_empty() {
        return Err(D::Error::custom("must contain at least one entry"));
    }
    Ok(items)
}

/// Joins a JSON path and a relative one (`a` + `b` → `a.b`, `a` + `[0]` → `a[0]`).
pub(crate) fn join_path(base: &str, rest: &str) -> String {
    match (base, rest) {
        (".", r) | ("", r) => r.to_owned(),
        (b, ".") | (b, "") => b.to_owned(),
        (b, r) if r.starts_with('[') => format!("{b}{r}"),
        (b, r) => format!("{b}.{r}"),
    }
}

/// Prefixes `message` with a location, merging with a location it already carries.
pub(crate) fn located(path: &str, message: &str) -> String {
    let (inner, reason) = split_located(message);
    let full = join_path(path, inner.unwrap_or("."));
    if full == "." || full.is_empty() {
        reason.to_owned()
    } else {
        format!("at `{full}`: {reason}")
    }
}

fn split_located(message: &str) -> (Option<&str>, &str) {
    message
        .strip_prefix("at `")
        .and_then(|rest| rest.split_once("`: "))
        .map_or((None, message), |(path, reason)| (Some(path), reason))
}

/// Splits an error raised at `path` into the precise path of the bad value and the reason.
///
/// A "missing field" error is raised by the object that lacks the field; the field itself is
/// the more useful location.
pub(crate) fn locate(path: &str, message: &str) -> (String, String) {
    let (inner, reason) = split_located(message);
    let mut full = join_path(path, inner.unwrap_or("."));
    if let Some(field) = reason
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(field, _)| field)
    {
        full = join_path(&full, field);
        return (full, "required field is missing".to_owned());
    }
    if full.is_empty() {
        full = ".".to_owned();
    }
    (full, reason.to_owned())
}

/// Removes serde_json's " at line L column C" suffix (the JSON path is more useful).
pub(crate) fn strip_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&suffix) {
        Some(bare) if error.line() > 0 => bare.to_owned(),
        _ => text,
    }
}

/// Deserializes `T` from `value`, keeping the location of a failure inside it.
pub(crate) fn from_value_located<T: DeserializeOwned>(
    value: Value,
) -> Result<T, serde_json::Error> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        serde_json::Error::custom(located(&path, &strip_position(&inner)))
    })
}

/// Short description of a JSON value for "invalid type" messages.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => format!("number `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// Deserializes a union discriminated by the string field `tag`, dispatching by hand so that
/// errors inside the chosen variant keep their location.
///
/// `build` receives the tag value (one of `variants`) and the whole object.
pub(crate) fn deserialize_tagged<'de, D, T>(
    deserializer: D,
    tag: &'static str,
    variants: &'static [&'static str],
    build: impl FnOnce(&str, Value) -> Result<T, serde_json::Error>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let map = Map::<String, Value>::deserialize(deserializer)?;
    let name = match map.get(tag) {
        Some(Value::String(name)) => name.clone(),
        Some(other) => {
            let reason = format!("invalid type: {}, expected a string", describe(other));
            return Err(D::Error::custom(located(tag, &reason)));
        }
        None => return Err(D::Error::missing_field(tag)),
    };
    if !variants.contains(&name.as_str()) {
        let expected = variants
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let reason = format!("unknown variant `{name}`, expected one of {expected}");
        return Err(D::Error::custom(located(tag, &reason)));
    }
    build(&name, Value::Object(map)).map_err(|error| D::Error::custom(strip_position(&error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_and_split() {
        let cases = [
            (".", "a", "a"),
            ("a", "[0]", "a[0]"),
            ("a[0]", "b", "a[0].b"),
            ("a", ".", "a"),
        ];
        for (base, rest, expected) in cases {
            assert_eq!(join_path(base, rest), expected, "{base} + {rest}");
        }
        assert_eq!(
            located("messages[1]", "at `content[0]`: bad"),
            "at `messages[1].content[0]`: bad"
        );
        assert_eq!(located(".", "bad"), "bad");
        assert_eq!(
            locate(
                "messages[1]",
                "at `content[0].source`: missing field `mimeType`"
            ),
            (
                "messages[1].content[0].source.mimeType".to_owned(),
                "required field is missing".to_owned()
            )
        );
        assert_eq!(locate(".", "oops"), (".".to_owned(), "oops".to_owned()));
    }
}
