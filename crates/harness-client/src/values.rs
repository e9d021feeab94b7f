//! Conversions between JSON and the harness's own `genai.Struct` / `genai.Value`.

use harness_proto::genai::{self, value::Kind};
use serde_json::{Map, Value};

/// A JSON object as a `genai.Struct` (a list of named fields, not `google.protobuf.Struct`).
pub fn to_struct(object: &Map<String, Value>) -> genai::Struct {
    genai::Struct {
        fields: object
            .iter()
            .map(|(name, value)| genai::Field {
                name: Some(name.clone()),
                value: Some(to_value(value)),
            })
            .collect(),
    }
}

/// A JSON value as a `genai.Value`.
pub fn to_value(value: &Value) -> genai::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(genai::ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    genai::Value { kind: Some(kind) }
}

/// A `genai.Struct` as a JSON object (content and function values become their protojson).
pub fn from_struct(s: &genai::Struct) -> Map<String, Value> {
    s.fields
        .iter()
        .map(|f| {
            (
                f.name().to_owned(),
                f.value.as_ref().map(from_value).unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// A `genai.Value` as JSON.
pub fn from_value(v: &genai::Value) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => Value::Object(from_struct(s)),
        Some(Kind::ContentValue(c)) => serde_json::to_value(c).unwrap_or(Value::Null),
        Some(Kind::FunctionValue(f)) => serde_json::to_value(f).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_round_trips_through_genai_struct() {
        let object =
            json!({"city": "Paris", "days": 2.0, "none": null, "tags": ["a", {"b": true}]});
        let Value::Object(map) = &object else {
            unreachable!()
        };
        let s = to_struct(map);
        assert_eq!(Value::Object(from_struct(&s)), object);
        let wire: Value = serde_json::from_str(&harness_proto::to_json(&s)).unwrap();
        assert_eq!(
            wire["fields"][2],
            json!({"name": "none", "value": {"nullValue": null}})
        );
    }
}
