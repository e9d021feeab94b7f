//! Hand-written protojson for `genai.Value`.
//!
//! pbjson reads `"nullValue": null` as "field absent", so a JSON `null` inside tool arguments
//! or results would silently vanish (and a `Value` would come back empty). Go protojson and
//! Python `json_format` both write a null as `{"nullValue": null}`, so this impl keeps it.

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::genai::{Content, Function, ListValue, Struct, Value, value::Kind};

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(usize::from(self.kind.is_some())))?;
        match &self.kind {
            None => {}
            Some(Kind::NullValue(_)) => map.serialize_entry("nullValue", &())?,
            Some(Kind::NumberValue(n)) if n.is_finite() => map.serialize_entry("numberValue", n)?,
            Some(Kind::NumberValue(n)) => {
                map.serialize_entry("numberValue", non_finite_name(*n))?
            }
            Some(Kind::StringValue(s)) => map.serialize_entry("stringValue", s)?,
            Some(Kind::BoolValue(b)) => map.serialize_entry("boolValue", b)?,
            Some(Kind::StructValue(s)) => map.serialize_entry("structValue", s)?,
            Some(Kind::ListValue(l)) => map.serialize_entry("listValue", l)?,
            Some(Kind::ContentValue(c)) => map.serialize_entry("contentValue", c)?,
            Some(Kind::FunctionValue(f)) => map.serialize_entry("functionValue", f)?,
        }
        map.end()
    }
}

fn non_finite_name(n: f64) -> &'static str {
    if n.is_nan() {
        "NaN"
    } else if n > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a genai.Value object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kind = None;
        while let Some(key) = map.next_key::<String>()? {
            let next = match key.as_str() {
                "nullValue" | "null_value" => {
                    map.next_value::<NullMarker>()?;
                    Kind::NullValue(0)
                }
                "numberValue" | "number_value" => Kind::NumberValue(map.next_value::<Number>()?.0),
                "stringValue" | "string_value" => Kind::StringValue(map.next_value()?),
                "boolValue" | "bool_value" => Kind::BoolValue(map.next_value()?),
                "structValue" | "struct_value" => Kind::StructValue(map.next_value::<Struct>()?),
                "listValue" | "list_value" => Kind::ListValue(map.next_value::<ListValue>()?),
                "contentValue" | "content_value" => {
                    Kind::ContentValue(map.next_value::<Content>()?)
                }
                "functionValue" | "function_value" => {
                    Kind::FunctionValue(Box::new(map.next_value::<Function>()?))
                }
                _ => {
                    // Version skew: a newer harness may add members; ignore what we do not know.
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if kind.replace(next).is_some() {
                return Err(de::Error::custom(
                    "genai.Value has more than one member of its `kind` oneof",
                ));
            }
        }
        Ok(Value { kind })
    }
}

/// The payload of `nullValue`: JSON `null`, the enum name, or its number.
struct NullMarker;

impl<'de> Deserialize<'de> for NullMarker {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Null => Ok(NullMarker),
            serde_json::Value::String(s) if s == "NULL_VALUE" => Ok(NullMarker),
            serde_json::Value::Number(n) if n.as_u64() == Some(0) => Ok(NullMarker),
            other => Err(de::Error::custom(format!("invalid nullValue {other}"))),
        }
    }
}

/// A protojson double: a number, or a string (`"NaN"`, `"Infinity"`, `"-Infinity"`, `"1.5"`).
struct Number(f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Number(n) => n
                .as_f64()
                .map(Number)
                .ok_or_else(|| de::Error::custom(format!("number {n} is not a double"))),
            serde_json::Value::String(s) => match s.as_str() {
                "NaN" => Ok(Number(f64::NAN)),
                "Infinity" => Ok(Number(f64::INFINITY)),
                "-Infinity" => Ok(Number(f64::NEG_INFINITY)),
                _ => s
                    .parse()
                    .map(Number)
                    .map_err(|_| de::Error::custom(format!("invalid numberValue {s:?}"))),
            },
            other => Err(de::Error::custom(format!("invalid numberValue {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    /// Parses `input`, checks the decoded kind, and checks the re-encoded JSON.
    fn check(input: serde_json::Value, kind: Option<Kind>, reencoded: serde_json::Value) {
        let value: Value =
            serde_json::from_value(input.clone()).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(value.kind, kind, "{input}");
        assert_eq!(serde_json::to_value(&value).unwrap(), reencoded, "{input}");
    }

    #[test]
    fn null_survives_a_round_trip() {
        check(
            json!({"nullValue": null}),
            Some(Kind::NullValue(0)),
            json!({"nullValue": null}),
        );
        check(
            json!({"null_value": "NULL_VALUE"}),
            Some(Kind::NullValue(0)),
            json!({"nullValue": null}),
        );
        check(
            json!({"nullValue": 0}),
            Some(Kind::NullValue(0)),
            json!({"nullValue": null}),
        );
    }

    #[test]
    fn scalar_members_round_trip() {
        check(
            json!({"numberValue": 2}),
            Some(Kind::NumberValue(2.0)),
            json!({"numberValue": 2.0}),
        );
        check(
            json!({"stringValue": "Paris"}),
            Some(Kind::StringValue("Paris".into())),
            json!({"stringValue": "Paris"}),
        );
        check(
            json!({"boolValue": false}),
            Some(Kind::BoolValue(false)),
            json!({"boolValue": false}),
        );
        check(json!({}), None, json!({}));
        check(json!({"futureMember": 1}), None, json!({}));
    }

    #[test]
    fn non_finite_numbers_use_protojson_names() {
        let nan: Value = serde_json::from_value(json!({"numberValue": "NaN"})).unwrap();
        assert!(matches!(nan.kind, Some(Kind::NumberValue(n)) if n.is_nan()));
        check(
            json!({"numberValue": "-Infinity"}),
            Some(Kind::NumberValue(f64::NEG_INFINITY)),
            json!({"numberValue": "-Infinity"}),
        );
    }

    #[test]
    fn nulls_inside_structs_survive() {
        let args = json!({"fields": [
            {"name": "city", "value": {"stringValue": "Paris"}},
            {"name": "note", "value": {"nullValue": null}},
            {"name": "tags", "value": {"listValue": {"values": [{"nullValue": null}, {"numberValue": 1.5}]}}}
        ]});
        let parsed: Struct = serde_json::from_value(args.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), args);
    }

    #[test]
    fn invalid_values_are_errors() {
        for bad in [
            json!({"nullValue": "x"}),
            json!({"numberValue": "many"}),
            json!({"numberValue": null}),
            json!({"stringValue": "a", "boolValue": true}),
            json!([]),
        ] {
            assert!(
                serde_json::from_value::<Value>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }
}
