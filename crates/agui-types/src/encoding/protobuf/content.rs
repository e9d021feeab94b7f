//! Protobuf mapping of message content: string or `content_parts`, each part a oneof of
//! text/image/audio/video/document with a data/url/file source.

use serde_json::{Map, Value};

use super::bad;
use super::value::{opt_from_pb, opt_to_pb, to_pb};
use crate::error::Result;
use crate::input::{BinaryPart, Content, ContentPart, MediaPart, PartSource, TextPart};
use crate::proto as pb;
use pb::input_content::Part;
use pb::input_content_source::Source;

fn source_to_pb(source: &PartSource) -> pb::InputContentSource {
    let source = match source {
        PartSource::Data { value, mime_type } => Source::Data(pb::InputContentDataSource {
            value: value.clone(),
            mime_type: mime_type.clone(),
        }),
        PartSource::Url { value, mime_type } => Source::Url(pb::InputContentUrlSource {
            value: value.clone(),
            mime_type: mime_type.clone(),
        }),
        PartSource::File {
            value,
            provider,
            mime_type,
        } => Source::File(pb::InputContentFileSource {
            value: value.clone(),
            provider: provider.clone(),
            mime_type: mime_type.clone(),
        }),
    };
    pb::InputContentSource {
        source: Some(source),
    }
}

fn source_from_pb(source: Option<pb::InputContentSource>) -> Result<PartSource> {
    match source.and_then(|s| s.source) {
        Some(Source::Data(s)) => Ok(PartSource::Data {
            value: s.value,
            mime_type: s.mime_type,
        }),
        Some(Source::Url(s)) => Ok(PartSource::Url {
            value: s.value,
            mime_type: s.mime_type,
        }),
        Some(Source::File(s)) => Ok(PartSource::File {
            value: s.value,
            provider: s.provider,
            mime_type: s.mime_type,
        }),
        None => Err(bad("media part without a source")),
    }
}

macro_rules! media_to_pb {
    ($arm:ident, $ty:ident, $part:expr) => {
        Part::$arm(pb::$ty {
            source: Some(source_to_pb(&$part.source)),
            metadata: opt_to_pb(&$part.metadata),
            id: $part.id.clone(),
        })
    };
}

/// A legacy binary part travels as a document part marked `legacyBinary`, as
/// `@ag-ui/proto` encodes it; without data, url or id there is nothing to send.
fn binary_to_pb(part: &BinaryPart) -> Option<Part> {
    let mime_type = part.mime_type.clone();
    let present = |field: &Option<String>| field.clone().filter(|value| !value.is_empty());
    let source = if let Some(data) = present(&part.data) {
        Source::Data(pb::InputContentDataSource {
            value: data,
            mime_type,
        })
    } else if let Some(url) = present(&part.url).or_else(|| present(&part.id)) {
        Source::Url(pb::InputContentUrlSource {
            value: url,
            mime_type: Some(mime_type),
        })
    } else {
        return None;
    };
    let mut metadata = Map::new();
    metadata.insert("legacyBinary".to_owned(), Value::Bool(true));
    if let Some(filename) = &part.filename {
        metadata.insert("filename".to_owned(), Value::from(filename.clone()));
    }
    if let Some(id) = &part.id {
        metadata.insert("id".to_owned(), Value::from(id.clone()));
    }
    Some(Part::Document(pb::DocumentInputPart {
        source: Some(pb::InputContentSource {
            source: Some(source),
        }),
        metadata: Some(to_pb(&Value::Object(metadata))),
        id: None,
    }))
}

fn part_to_pb(part: &ContentPart) -> Option<pb::InputContent> {
    let part = match part {
        ContentPart::Text(t) => Part::Text(pb::TextInputPart {
            text: t.text.clone(),
            id: t.id.clone(),
            metadata: opt_to_pb(&t.metadata),
        }),
        ContentPart::Image(p) => media_to_pb!(Image, ImageInputPart, p),
        ContentPart::Audio(p) => media_to_pb!(Audio, AudioInputPart, p),
        ContentPart::Video(p) => media_to_pb!(Video, VideoInputPart, p),
        ContentPart::Document(p) => media_to_pb!(Document, DocumentInputPart, p),
        ContentPart::Binary(p) => binary_to_pb(p)?,
    };
    Some(pb::InputContent { part: Some(part) })
}

fn parts_to_pb(parts: &[ContentPart]) -> Vec<pb::InputContent> {
    parts.iter().filter_map(part_to_pb).collect()
}

fn part_from_pb(part: pb::InputContent) -> Result<ContentPart> {
    let media = |source, metadata, id| -> Result<MediaPart> {
        Ok(MediaPart {
            source: source_from_pb(source)?,
            id,
            metadata: opt_from_pb(metadata),
        })
    };
    Ok(match part.part {
        Some(Part::Text(t)) => ContentPart::Text(TextPart {
            text: t.text,
            id: t.id,
            metadata: opt_from_pb(t.metadata),
        }),
        Some(Part::Image(p)) => ContentPart::Image(media(p.source, p.metadata, p.id)?),
        Some(Part::Audio(p)) => ContentPart::Audio(media(p.source, p.metadata, p.id)?),
        Some(Part::Video(p)) => ContentPart::Video(media(p.source, p.metadata, p.id)?),
        Some(Part::Document(p)) => ContentPart::Document(media(p.source, p.metadata, p.id)?),
        None => return Err(bad("content part names no known kind")),
    })
}

fn parts_from_pb(parts: Vec<pb::InputContent>) -> Result<Vec<ContentPart>> {
    parts.into_iter().map(part_from_pb).collect()
}

/// String content → `content`, parts → `content_parts` (never both).
pub(super) fn content_to_pb(content: &Content) -> (Option<String>, Vec<pb::InputContent>) {
    match content {
        Content::Text(text) => (Some(text.clone()), Vec::new()),
        Content::Parts(parts) => (None, parts_to_pb(parts)),
    }
}

pub(super) fn content_from_pb(
    text: Option<String>,
    parts: Vec<pb::InputContent>,
) -> Result<Content> {
    match text {
        Some(_) if !parts.is_empty() => Err(bad("both string content and content parts")),
        Some(text) => Ok(Content::Text(text)),
        None => Ok(Content::Parts(parts_from_pb(parts)?)),
    }
}
