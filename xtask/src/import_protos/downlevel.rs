//! Rewriting an editions `FileDescriptorProto` as proto3 without changing the wire or JSON form.

use anyhow::bail;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto};

use super::editions::Features;

/// Changes made while downlevelling, written into the generated file's header.
#[derive(Default)]
pub(crate) struct Notes {
    pub(crate) lines: Vec<String>,
}

/// Turns `file` into proto3: explicit-presence scalars become `optional`, defaults (which proto3
/// cannot state) are dropped and listed, and oneofs that clash with a nested type are renamed.
pub(crate) fn to_proto3(
    file: &mut FileDescriptorProto,
    features: &Features,
) -> anyhow::Result<Notes> {
    let mut notes = Notes::default();
    file.syntax = Some("proto3".to_owned());
    let scope = file.package().to_owned();
    for e in &file.enum_type {
        check_enum(e, &scope)?;
    }
    for message in &mut file.message_type {
        message_to_proto3(message, &scope, features, &mut notes)?;
    }
    Ok(notes)
}

fn message_to_proto3(
    message: &mut DescriptorProto,
    scope: &str,
    features: &Features,
    notes: &mut Notes,
) -> anyhow::Result<()> {
    let name = format!("{scope}.{}", message.name());
    for field in &mut message.field {
        let full = format!("{name}.{}", field.name());
        if field.label() == Label::Required {
            bail!("{full}: required fields have no proto3 form");
        }
        if let Some(default) = field.default_value.take() {
            notes.lines.push(format!(
                "{full}: default {default:?} dropped (proto3 cannot state it; the harness applies it when the field is absent)"
            ));
        }
        let singular = field.label() == Label::Optional;
        let has_presence_already =
            field.oneof_index.is_some() || matches!(field.r#type(), Type::Message | Type::Group);
        if singular && !has_presence_already && features.explicit_presence.contains(&full) {
            field.proto3_optional = Some(true);
        }
    }
    let nested_names: Vec<String> = (message.nested_type.iter().map(|m| m.name()))
        .chain(message.enum_type.iter().map(|e| e.name()))
        .map(str::to_ascii_lowercase)
        .collect();
    for oneof in &mut message.oneof_decl {
        let camel = oneof.name().replace('_', "").to_ascii_lowercase();
        if nested_names.contains(&camel) {
            let renamed = format!("{}_kind", oneof.name());
            notes.lines.push(format!(
                "{name}: oneof `{}` renamed `{renamed}` (it clashes with a nested type in generated Rust; oneof names never reach the wire)",
                oneof.name()
            ));
            oneof.name = Some(renamed);
        }
    }
    for e in &message.enum_type {
        check_enum(e, &name)?;
    }
    for nested in &mut message.nested_type {
        message_to_proto3(nested, &name, features, notes)?;
    }
    Ok(())
}

fn check_enum(e: &EnumDescriptorProto, scope: &str) -> anyhow::Result<()> {
    if e.value.first().map(|v| v.number()) != Some(0) {
        bail!(
            "{scope}.{}: proto3 enums must start with a zero value",
            e.name()
        );
    }
    Ok(())
}
