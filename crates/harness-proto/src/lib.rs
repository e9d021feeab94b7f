//! Rust types for the Antigravity `localharness` protocol.
//!
//! The message types are generated from `proto/antigravity/` (see `cargo xtask import-protos`
//! and `cargo xtask codegen`) with prost, and their JSON mapping with pbjson. The mapping is the
//! one the harness speaks over its WebSocket (Go protojson): lowerCamelCase names, enums by
//! name, 64-bit integers as strings, oneof members as plain keys.
//!
//! Reading is lenient for version skew (snake_case names, numeric enums, unknown fields and
//! unknown enum values are accepted). Writing emits only fields of the pinned schema, which
//! matters because the harness drops any frame with a field it does not know.
//!
//! Modules mirror the protobuf packages: [`antigravity::localharness`] (the host protocol),
//! [`genai`] (content, steps, tools), [`genai::skills`] and [`gaos::parsing`].

mod error;
mod json;
mod stdio;
pub mod step;
pub mod trajectory;
mod value;

pub use error::{ProtoError, Result};
pub use json::{from_json, to_json};
pub use stdio::{MAX_STDIO_FRAME, decode_stdio_frame, encode_stdio_frame, read_stdio_frame};

/// Generated code: lints that do not apply to machine output are silenced here only.
macro_rules! generated {
    ($(#[$doc:meta])* $name:ident, $types:literal, $serde:literal $(, $($inner:tt)*)?) => {
        $(#[$doc])*
        #[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic, rustdoc::all)]
        pub mod $name {
            include!(concat!("generated/", $types));
            include!(concat!("generated/", $serde));
            $($($inner)*)?
        }
    };
}

generated!(
    /// `genai`: content parts, steps, tool declarations and the harness's own `Struct`/`Value`.
    genai,
    "genai.rs",
    "genai.serde.rs",
    generated!(
        /// `genai.skills`: skill definitions.
        skills,
        "genai.skills.rs",
        "genai.skills.serde.rs"
    );
);

/// `antigravity`: the harness host protocol.
pub mod antigravity {
    generated!(
        /// `antigravity.localharness`: stdio handshake, WebSocket input and output events, config.
        localharness,
        "antigravity.localharness.rs",
        "antigravity.localharness.serde.rs"
    );
}

/// `gaos`: annotation types referenced by the schema.
pub mod gaos {
    generated!(
        /// `gaos.parsing`: JSON annotation definitions (used only as options in the schema).
        parsing,
        "gaos.parsing.rs",
        "gaos.parsing.serde.rs"
    );
}

/// Short alias for the host protocol package.
pub use antigravity::localharness as lh;
