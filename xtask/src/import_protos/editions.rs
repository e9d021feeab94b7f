//! Reading Protobuf Editions features that `prost-types` (whose descriptor predates editions)
//! silently drops, so the proto3 downlevel knows which fields have explicit presence.

use std::collections::HashSet;

use anyhow::bail;
use prost::Message as _;

// Only the descriptor fields needed to resolve features; everything else is skipped by prost.
#[derive(Clone, PartialEq, prost::Message)]
struct RawFile {
    #[prost(string, optional, tag = "2")]
    package: Option<String>,
    #[prost(message, repeated, tag = "4")]
    message_type: Vec<RawMessage>,
    #[prost(message, repeated, tag = "5")]
    enum_type: Vec<RawEnum>,
    #[prost(message, optional, tag = "8")]
    options: Option<RawFileOptions>,
    #[prost(string, optional, tag = "12")]
    syntax: Option<String>,
    #[prost(int32, optional, tag = "14")]
    edition: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    field: Vec<RawField>,
    #[prost(message, repeated, tag = "3")]
    nested_type: Vec<RawMessage>,
    #[prost(message, repeated, tag = "4")]
    enum_type: Vec<RawEnum>,
    #[prost(message, optional, tag = "7")]
    options: Option<RawMessageOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawField {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, optional, tag = "8")]
    options: Option<RawFieldOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawEnum {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, optional, tag = "3")]
    options: Option<RawEnumOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawFileOptions {
    #[prost(message, optional, tag = "50")]
    features: Option<FeatureSet>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawMessageOptions {
    #[prost(message, optional, tag = "12")]
    features: Option<FeatureSet>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawFieldOptions {
    #[prost(message, optional, tag = "21")]
    features: Option<FeatureSet>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawEnumOptions {
    #[prost(message, optional, tag = "7")]
    features: Option<FeatureSet>,
}

/// `google.protobuf.FeatureSet`; values are the enum numbers of descriptor.proto.
#[derive(Clone, PartialEq, prost::Message)]
struct FeatureSet {
    #[prost(int32, optional, tag = "1")]
    field_presence: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    enum_type: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    repeated_field_encoding: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    message_encoding: Option<i32>,
}

const PRESENCE_EXPLICIT: i32 = 1;
const PRESENCE_IMPLICIT: i32 = 2;
const ENUM_CLOSED: i32 = 2;
const REPEATED_EXPANDED: i32 = 2;
const MESSAGE_DELIMITED: i32 = 2;

/// What the downlevel needs to know about an editions file.
pub(crate) struct Features {
    /// Fully qualified `package.Message.Nested.field` names with explicit presence.
    pub(crate) explicit_presence: HashSet<String>,
}

/// Resolves the features of every field in a serialized descriptor.
///
/// Fails on features proto3 cannot express (closed enums, expanded repeated fields, delimited
/// messages, legacy required), so a future wheel that starts using them is noticed here.
pub(crate) fn resolve(bytes: &[u8]) -> anyhow::Result<Features> {
    let file = RawFile::decode(bytes)?;
    let mut out = Features {
        explicit_presence: HashSet::new(),
    };
    match file.syntax.as_deref() {
        Some("editions") => {}
        Some("proto3") | Some("proto2") | None => {
            bail!(
                "expected an editions descriptor, found syntax {:?}; adapt the downlevel",
                file.syntax
            )
        }
        Some(other) => bail!("unknown syntax {other:?}"),
    }
    if !matches!(file.edition, Some(1000) | Some(1001)) {
        bail!(
            "unsupported edition {:?} (expected 2023 or 2024)",
            file.edition
        );
    }
    let mut presence = PRESENCE_EXPLICIT;
    let file_features = file.options.and_then(|o| o.features);
    apply(&mut presence, file_features.as_ref(), "file")?;
    let scope = file.package.unwrap_or_default();
    for e in &file.enum_type {
        check_enum(e, &scope)?;
    }
    for m in &file.message_type {
        walk(m, &scope, presence, &mut out)?;
    }
    Ok(out)
}

fn walk(
    message: &RawMessage,
    scope: &str,
    presence: i32,
    out: &mut Features,
) -> anyhow::Result<()> {
    let name = format!("{scope}.{}", message.name.as_deref().unwrap_or_default());
    let mut presence = presence;
    apply(
        &mut presence,
        message.options.as_ref().and_then(|o| o.features.as_ref()),
        &name,
    )?;
    for field in &message.field {
        let field_name = format!("{name}.{}", field.name.as_deref().unwrap_or_default());
        let mut field_presence = presence;
        apply(
            &mut field_presence,
            field.options.as_ref().and_then(|o| o.features.as_ref()),
            &field_name,
        )?;
        if field_presence == PRESENCE_EXPLICIT {
            out.explicit_presence.insert(field_name);
        }
    }
    for e in &message.enum_type {
        check_enum(e, &name)?;
    }
    for nested in &message.nested_type {
        walk(nested, &name, presence, out)?;
    }
    Ok(())
}

fn check_enum(e: &RawEnum, scope: &str) -> anyhow::Result<()> {
    if let Some(features) = e.options.as_ref().and_then(|o| o.features.as_ref()) {
        let mut presence = PRESENCE_EXPLICIT;
        apply(
            &mut presence,
            Some(features),
            &format!("{scope}.{}", e.name.as_deref().unwrap_or_default()),
        )?;
    }
    Ok(())
}

fn apply(presence: &mut i32, features: Option<&FeatureSet>, what: &str) -> anyhow::Result<()> {
    let Some(f) = features else { return Ok(()) };
    match f.field_presence {
        None => {}
        Some(p @ (PRESENCE_EXPLICIT | PRESENCE_IMPLICIT)) => *presence = p,
        Some(other) => bail!("{what}: field_presence {other} (LEGACY_REQUIRED) has no proto3 form"),
    }
    if f.enum_type == Some(ENUM_CLOSED) {
        bail!("{what}: closed enums have no proto3 form");
    }
    if f.repeated_field_encoding == Some(REPEATED_EXPANDED) {
        bail!("{what}: expanded repeated encoding is not handled by the downlevel");
    }
    if f.message_encoding == Some(MESSAGE_DELIMITED) {
        bail!("{what}: delimited message encoding has no proto3 form");
    }
    Ok(())
}
