//! Printing a proto3 `FileDescriptorProto` as a readable `.proto` file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
};

/// Renders `file`; `import` maps each dependency path to the path written in the output.
pub(crate) fn render(
    file: &FileDescriptorProto,
    header: &str,
    import: impl Fn(&str) -> String,
) -> String {
    let mut out = String::new();
    for line in header.lines() {
        let _ = writeln!(out, "//{}{line}", if line.is_empty() { "" } else { " " });
    }
    let _ = writeln!(out, "\nsyntax = \"proto3\";\n\npackage {};", file.package());
    if !file.dependency.is_empty() {
        out.push('\n');
        for dep in &file.dependency {
            let _ = writeln!(out, "import \"{}\";", import(dep));
        }
    }
    let mut printer = Printer { out, indent: 0 };
    for e in &file.enum_type {
        printer.blank();
        printer.enumeration(e);
    }
    for m in &file.message_type {
        printer.blank();
        printer.message(m, &format!(".{}", file.package()));
    }
    printer.extensions(&file.extension);
    printer.out
}

struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn blank(&mut self) {
        if !self.out.ends_with("{\n") && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn message(&mut self, m: &DescriptorProto, scope: &str) {
        let full = format!("{scope}.{}", m.name());
        let map_entries: BTreeMap<String, &DescriptorProto> = m
            .nested_type
            .iter()
            .filter(|n| n.options.as_ref().is_some_and(|o| o.map_entry()))
            .map(|n| (format!("{full}.{}", n.name()), n))
            .collect();
        self.line(&format!("message {} {{", m.name()));
        self.indent += 1;
        let mut printed_oneofs = Vec::new();
        for field in &m.field {
            match field.oneof_index {
                Some(index) if !field.proto3_optional() => {
                    if printed_oneofs.contains(&index) {
                        continue;
                    }
                    printed_oneofs.push(index);
                    let name = m
                        .oneof_decl
                        .get(index as usize)
                        .map(|o| o.name())
                        .unwrap_or("unnamed");
                    self.line(&format!("oneof {name} {{"));
                    self.indent += 1;
                    for member in m.field.iter().filter(|f| f.oneof_index == Some(index)) {
                        self.field(member, &map_entries);
                    }
                    self.indent -= 1;
                    self.line("}");
                }
                _ => self.field(field, &map_entries),
            }
        }
        self.reserved(
            m.reserved_range.iter().map(|r| (r.start(), r.end() - 1)),
            &m.reserved_name,
        );
        for e in &m.enum_type {
            self.blank();
            self.enumeration(e);
        }
        for nested in m
            .nested_type
            .iter()
            .filter(|n| !n.options.as_ref().is_some_and(|o| o.map_entry()))
        {
            self.blank();
            self.message(nested, &full);
        }
        self.extensions(&m.extension);
        self.indent -= 1;
        self.line("}");
    }

    fn field(
        &mut self,
        f: &FieldDescriptorProto,
        map_entries: &BTreeMap<String, &DescriptorProto>,
    ) {
        let mut options = Vec::new();
        if let Some(json) = &f.json_name
            && *json != default_json_name(f.name())
        {
            options.push(format!("json_name = \"{json}\""));
        }
        if let Some(o) = &f.options {
            if o.deprecated() {
                options.push("deprecated = true".to_owned());
            }
            if o.packed == Some(false) {
                options.push("packed = false".to_owned());
            }
        }
        let options = if options.is_empty() {
            String::new()
        } else {
            format!(" [{}]", options.join(", "))
        };
        let declared = match map_entries.get(f.type_name()) {
            Some(entry) if f.label() == Label::Repeated => {
                // A map entry message: field 1 is the key, field 2 the value.
                let of = |number| {
                    entry
                        .field
                        .iter()
                        .find(|e| e.number() == number)
                        .map(type_name)
                        .unwrap_or_default()
                };
                format!("map<{}, {}>", of(1), of(2))
            }
            _ => {
                let label = match f.label() {
                    Label::Repeated => "repeated ",
                    _ if f.proto3_optional() => "optional ",
                    _ => "",
                };
                format!("{label}{}", type_name(f))
            }
        };
        self.line(&format!(
            "{declared} {} = {}{options};",
            f.name(),
            f.number()
        ));
    }

    fn enumeration(&mut self, e: &EnumDescriptorProto) {
        self.line(&format!("enum {} {{", e.name()));
        self.indent += 1;
        if e.options.as_ref().is_some_and(|o| o.allow_alias()) {
            self.line("option allow_alias = true;");
        }
        for v in &e.value {
            let deprecated = v.options.as_ref().is_some_and(|o| o.deprecated());
            let suffix = if deprecated {
                " [deprecated = true]"
            } else {
                ""
            };
            self.line(&format!("{} = {}{suffix};", v.name(), v.number()));
        }
        self.reserved(
            e.reserved_range.iter().map(|r| (r.start(), r.end())),
            &e.reserved_name,
        );
        self.indent -= 1;
        self.line("}");
    }

    /// Prints `reserved` statements; ranges are inclusive.
    fn reserved(&mut self, ranges: impl Iterator<Item = (i32, i32)>, names: &[String]) {
        let ranges: Vec<String> = ranges
            .map(|(start, end)| {
                if start == end {
                    start.to_string()
                } else {
                    format!("{start} to {end}")
                }
            })
            .collect();
        if !ranges.is_empty() {
            self.line(&format!("reserved {};", ranges.join(", ")));
        }
        if !names.is_empty() {
            let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
            self.line(&format!("reserved {};", names.join(", ")));
        }
    }

    fn extensions(&mut self, extensions: &[FieldDescriptorProto]) {
        let mut by_extendee: BTreeMap<&str, Vec<&FieldDescriptorProto>> = BTreeMap::new();
        for ext in extensions {
            by_extendee.entry(ext.extendee()).or_default().push(ext);
        }
        for (extendee, fields) in by_extendee {
            self.blank();
            self.line(&format!("extend {extendee} {{"));
            self.indent += 1;
            for f in fields {
                let label = if f.label() == Label::Repeated {
                    "repeated "
                } else {
                    ""
                };
                self.line(&format!(
                    "{label}{} {} = {};",
                    type_name(f),
                    f.name(),
                    f.number()
                ));
            }
            self.indent -= 1;
            self.line("}");
        }
    }
}

fn type_name(f: &FieldDescriptorProto) -> String {
    let scalar = match f.r#type() {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
        Type::Message | Type::Enum | Type::Group => return f.type_name().to_owned(),
    };
    scalar.to_owned()
}

/// protoc's default JSON name: `foo_bar` → `fooBar`.
fn default_json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_json_names_follow_protoc() {
        for (name, json) in [
            ("mime_type", "mimeType"),
            ("x", "x"),
            ("a_b_c", "aBC"),
            ("already", "already"),
        ] {
            assert_eq!(default_json_name(name), json);
        }
    }
}
