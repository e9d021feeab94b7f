use serde::{Serialize, de::DeserializeOwned};

use crate::error::{ProtoError, Result};

/// Serialises a message as the compact protojson text the harness reads.
pub fn to_json<T: Serialize>(message: &T) -> String {
    // Serialising generated messages into a String cannot fail: every map key is a string and
    // no custom Serialize impl returns an error.
    serde_json::to_string(message)
        .unwrap_or_else(|e| unreachable!("protojson serialisation failed: {e}"))
}

/// Parses protojson text into `T`, naming the message type in the error.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|source| ProtoError::Json {
        message: crate::error::short_type_name::<T>(),
        source,
    })
}
