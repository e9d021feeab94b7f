//! `serde_json::Value` ⇄ `google.protobuf.Value`/`Struct`.
//!
//! Protobuf numbers are doubles, as in JavaScript. Integral doubles within ±2^53 decode back
//! to JSON integers so that `42` survives a round trip as `42`, not `42.0`.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value as PbValue};
use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// Largest integer a double (and a JavaScript number) holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

pub(super) fn to_pb(value: &Value) -> PbValue {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_pb).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_pb_struct(map)),
    };
    PbValue { kind: Some(kind) }
}

pub(super) fn to_pb_struct(map: &Map<String, Value>) -> Struct {
    Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), to_pb(v))).collect(),
    }
}

pub(super) fn from_pb(value: PbValue) -> Value {
    match value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::NumberValue(n)) => number(n),
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::ListValue(list)) => Value::Array(list.values.into_iter().map(from_pb).collect()),
        Some(Kind::StructValue(s)) => Value::Object(from_pb_struct(s)),
    }
}

pub(super) fn from_pb_struct(value: Struct) -> Map<String, Value> {
    value
        .fields
        .into_iter()
        .map(|(k, v)| (k, from_pb(v)))
        .collect()
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER {
        // Exact: |n| ≤ 2^53 fits an i64 without rounding.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(n as i64));
    }
    // NaN and infinities have no JSON form; JSON.stringify writes them as null too.
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// An optional payload: absent or `null` → `None`.
pub(super) fn opt_from_pb(value: Option<PbValue>) -> Option<Value> {
    value.map(from_pb).filter(|v| !v.is_null())
}

/// An optional payload that must not be `null` on the wire: `None` and `null` both → absent.
pub(super) fn opt_to_pb(value: &Option<Value>) -> Option<PbValue> {
    value.as_ref().filter(|v| !v.is_null()).map(to_pb)
}

/// A required payload: absent → `null`.
pub(super) fn req_from_pb(value: Option<PbValue>) -> Value {
    value.map_or(Value::Null, from_pb)
}

/// A JSON object carried in a `Value` field (interrupt metadata and response schema).
pub(super) fn object_from_pb(
    value: Option<PbValue>,
    what: &str,
) -> Result<Option<Map<String, Value>>> {
    match opt_from_pb(value) {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(Error::ProtoEvent(format!("{what} is not an object"))),
    }
}

/// A JSON object as a `Value`.
pub(super) fn object_to_pb(map: &Option<Map<String, Value>>) -> Option<PbValue> {
    map.as_ref().map(|m| PbValue {
        kind: Some(Kind::StructValue(to_pb_struct(m))),
    })
}
