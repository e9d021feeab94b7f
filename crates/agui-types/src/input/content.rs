//! Message content: plain text or a list of (multimodal) content parts.

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::json::{describe, deserialize_tagged, from_value_located, is_none_or_null};

/// The content of a user or tool message, or of a `TOOL_CALL_RESULT`: a string or parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text (structured tool output travels as JSON text).
    Text(String),
    /// Text and media parts, in order.
    Parts(Vec<ContentPart>),
}

impl Default for Content {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Vec<ContentPart>> for Content {
    fn from(parts: Vec<ContentPart>) -> Self {
        Self::Parts(parts)
    }
}

impl Content {
    /// The text of the content: the string itself, or the text parts concatenated (media
    /// parts are dropped, nothing is invented for them).
    pub fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text(text) => Some(text.text.as_str()),
                    _ => None,
                })
                .collect(),
        }
    }

    /// True when any part is not text (what [`Content::text`] would drop).
    pub fn has_media(&self) -> bool {
        matches!(self, Self::Parts(parts) if parts.iter().any(|p| !matches!(p, ContentPart::Text(_))))
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Untagged enums only say "did not match any variant"; dispatch on the JSON kind
        // so an error inside a part keeps its location.
        match Value::deserialize(deserializer)? {
            Value::String(text) => Ok(Self::Text(text)),
            parts @ Value::Array(_) => from_value_located(parts)
                .map(Self::Parts)
                .map_err(|error| D::Error::custom(error.to_string())),
            other => Err(D::Error::custom(format!(
                "invalid type: {}, expected a string or an array of content parts",
                describe(&other)
            ))),
        }
    }
}

/// One part of a message body, discriminated by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    /// `{"type":"text"}`.
    Text(TextPart),
    /// `{"type":"image"}`.
    Image(MediaPart),
    /// `{"type":"audio"}`.
    Audio(MediaPart),
    /// `{"type":"video"}`.
    Video(MediaPart),
    /// `{"type":"document"}`.
    Document(MediaPart),
    /// The 0.x `{"type":"binary"}` part, retired in 1.0. Accepted on input so a server can
    /// convert it ([`BinaryPart::to_media_part`]) or report it; 1.0 clients never send it.
    Binary(BinaryPart),
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const KINDS: &[&str] = &["text", "image", "audio", "video", "document", "binary"];
        deserialize_tagged(deserializer, "type", KINDS, |kind, value| match kind {
            "text" => from_value_located(value).map(Self::Text),
            "image" => from_value_located(value).map(Self::Image),
            "audio" => from_value_located(value).map(Self::Audio),
            "video" => from_value_located(value).map(Self::Video),
            "document" => from_value_located(value).map(Self::Document),
            _ => from_value_located(value).map(Self::Binary),
        })
    }
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextPart {
            text: text.into(),
            id: None,
            metadata: None,
        })
    }
}

/// A text part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
    /// The text.
    pub text: String,
    /// Optional part id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Extra information (any JSON but `null`).
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub metadata: Option<Value>,
}

/// An image, audio, video or document part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaPart {
    /// Where the bytes are.
    pub source: PartSource,
    /// Optional part id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Extra information (any JSON but `null`).
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub metadata: Option<Value>,
}

impl MediaPart {
    /// A part with only a source.
    pub fn new(source: PartSource) -> Self {
        Self {
            source,
            id: None,
            metadata: None,
        }
    }
}

/// Where a media part's bytes come from, discriminated by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum PartSource {
    /// Inline base64 bytes.
    Data {
        /// Base64 of the bytes.
        value: String,
        /// Media type (required for inline data).
        mime_type: String,
    },
    /// Bytes to fetch from a URL.
    Url {
        /// The URL.
        value: String,
        /// Media type, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A provider-issued handle (file id, Gemini file URI); opaque, never fetched.
    File {
        /// The handle.
        value: String,
        /// Lowercase vendor id that minted it, e.g. `google`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// Media type, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// Field-by-field mirrors of the [`PartSource`] variants, so that they can be deserialized
/// with located errors.
mod source_repr {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Data {
        pub(super) value: String,
        pub(super) mime_type: String,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Url {
        pub(super) value: String,
        #[serde(default)]
        pub(super) mime_type: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct File {
        pub(super) value: String,
        #[serde(default)]
        pub(super) provider: Option<String>,
        #[serde(default)]
        pub(super) mime_type: Option<String>,
    }
}

impl<'de> Deserialize<'de> for PartSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_tagged(
            deserializer,
            "type",
            &["data", "url", "file"],
            |kind, value| match kind {
                "data" => from_value_located::<source_repr::Data>(value).map(|s| Self::Data {
                    value: s.value,
                    mime_type: s.mime_type,
                }),
                "url" => from_value_located::<source_repr::Url>(value).map(|s| Self::Url {
                    value: s.value,
                    mime_type: s.mime_type,
                }),
                _ => from_value_located::<source_repr::File>(value).map(|s| Self::File {
                    value: s.value,
                    provider: s.provider,
                    mime_type: s.mime_type,
                }),
            },
        )
    }
}

/// The retired 0.x binary part: `{type:"binary", mimeType, id?, url?, data?, filename?}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BinaryPart {
    /// Media type of the bytes.
    pub mime_type: String,
    /// A reference id (cannot be converted on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A URL to fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Base64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Original file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

impl BinaryPart {
    /// The 1.0 media part the official client would upgrade this to: image/audio/video by
    /// media type prefix, otherwise document; `data` wins over `url`; the file name moves to
    /// `metadata.filename`. `None` when the part carries neither data nor a URL.
    pub fn to_media_part(&self) -> Option<ContentPart> {
        let mime_type = self.mime_type.clone();
        let source = match (&self.data, &self.url) {
            (Some(data), _) if !data.is_empty() => PartSource::Data {
                value: data.clone(),
                mime_type,
            },
            (_, Some(url)) if !url.is_empty() => PartSource::Url {
                value: url.clone(),
                mime_type: Some(mime_type),
            },
            _ => return None,
        };
        let metadata = self
            .filename
            .as_ref()
            .filter(|name| !name.is_empty())
            .map(|name| {
                Value::Object(Map::from_iter([(
                    "filename".to_owned(),
                    Value::from(name.clone()),
                )]))
            });
        let part = MediaPart {
            source,
            id: None,
            metadata,
        };
        let prefix = self.mime_type.split('/').next().unwrap_or_default();
        Some(match prefix {
            "image" => ContentPart::Image(part),
            "audio" => ContentPart::Audio(part),
            "video" => ContentPart::Video(part),
            _ => ContentPart::Document(part),
        })
    }
}
