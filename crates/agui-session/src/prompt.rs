//! What a run sends to the harness.
//!
//! - [`newest_unforwarded`] picks the user message a run forwards and converts it: messages
//!   are matched by id, never by position or content; the newest unforwarded one is sent (older
//!   ones sent in the same request are not), a blank one is skipped, and each is sent once.
//! - [`convert_user_message`] turns a user message into a harness `UserInput`: text and inline
//!   media in order (legacy `binary` parts too), and a one-line note in the text wherever an
//!   attachment cannot be forwarded (a URL or file reference instead of inline data, a missing
//!   or unsupported media type, data that is empty or not base64, a part over the size cap),
//!   so the model knows something was attached. A document or binary part over the size cap
//!   is an [`Upload`] instead: the thread saves it in its workspace before the prompt goes, and
//!   [`resolve_uploads`] tells the model where it is.
//! - [`tool_result_text`] is what a frontend tool's `ToolMessage` returns to the model, with
//!   `ToolMessage.error` kept as an error rather than passed off as a result.
//!
//! Everything here is pure and total: no input makes it panic.

use std::borrow::Cow;

use agui_types::{
    BinaryPart, Content, ContentPart, MediaPart, Message, PartSource, ToolMessage, UserMessage,
};
use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use harness_client::input::{media_part, text_part};
use harness_proto::lh::{UserInput, user_input};
use serde_json::Value;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

/// Media types forwarded inline: what the Antigravity SDK 0.1.22 accepts, plus
/// common aliases of the same formats. Compared lowercase and without parameters; the part's
/// kind (`image`, `document`, …) is not checked against it, only the type itself. GIF is
/// deliberately absent: the SDK rejects it.
pub(crate) const SUPPORTED_MIME_TYPES: &[&str] = &[
    // Images.
    "image/bmp",
    "image/jpeg",
    "image/png",
    "image/webp",
    // Documents.
    "application/pdf",
    "application/json",
    "text/css",
    "text/csv",
    "text/html",
    "text/javascript",
    "application/javascript",
    "application/x-javascript",
    "text/plain",
    "text/rtf",
    "application/rtf",
    "text/xml",
    "application/xml",
    // Audio.
    "audio/wav",
    "audio/wave",
    "audio/x-wav",
    "audio/vnd.wave",
    "audio/mp3",
    "audio/mp4",
    "audio/webm",
    "audio/aac",
    "audio/x-aac",
    "audio/ogg",
    "audio/flac",
    "audio/x-flac",
    "audio/opus",
    "audio/mpeg",
    "audio/m4a",
    "audio/x-m4a",
    "audio/l16",
    // Video.
    "video/3gpp",
    "video/avi",
    "video/x-msvideo",
    "video/mp4",
    "video/mpeg",
    "video/mpg",
    "video/quicktime",
    "video/webm",
    "video/wmv",
    "video/x-ms-wmv",
    "video/x-flv",
];

/// Limits applied while converting a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PromptLimits {
    /// Largest decoded size of one inline attachment; larger ones become a note.
    pub(crate) max_attachment_bytes: usize,
}

impl Default for PromptLimits {
    fn default() -> Self {
        Self {
            max_attachment_bytes: crate::defaults::MAX_ATTACHMENT_BYTES,
        }
    }
}

/// The user message a run forwards to the harness.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompt {
    /// Id of the user message; record it as forwarded only after the send succeeded.
    pub(crate) message_id: String,
    /// What to send (never empty). Its text holds each upload's [`Upload::token`] until
    /// [`resolve_uploads`] replaces it.
    pub(crate) input: UserInput,
    /// Warnings to log, one per attachment that was not forwarded.
    pub(crate) notes: Vec<String>,
    /// The message's text (its text parts joined), for a thread's title.
    pub(crate) text: String,
    /// Attachments too large to send inline, to save in the workspace before sending.
    pub(crate) uploads: Vec<Upload>,
}

/// A document or binary attachment over the size cap: saved in the thread's workspace under
/// `uploads/`, and the model told where, instead of a note that it was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upload {
    /// The file name to save it under (made unique when saved): from the part's filename,
    /// reduced to one safe path component, or a default. Never a path from the client.
    pub(crate) name: String,
    /// The bytes.
    pub(crate) data: Vec<u8>,
    /// How the note names it (`document 'report.pdf'`).
    pub(crate) what: String,
    /// Stands in the prompt's text where the note goes.
    pub(crate) token: String,
}

/// A user message converted to harness parts.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Converted {
    /// Text and media parts in message order; adjacent text (and notes) is one part.
    pub(crate) parts: Vec<user_input::Part>,
    /// Warnings to log, one per attachment that was not forwarded.
    pub(crate) notes: Vec<String>,
    /// Attachments to save in the workspace (their tokens are in the text).
    pub(crate) uploads: Vec<Upload>,
}

impl Converted {
    /// True when there is nothing to send (a blank message): not a prompt.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The harness input.
    #[cfg(test)]
    pub(crate) fn into_input(self) -> UserInput {
        UserInput { parts: self.parts }
    }
}

/// A frontend tool's answer as the model should see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolResultText {
    /// A normal result.
    Ok(String),
    /// The client reported a failure (`ToolMessage.error`); send it as an error response.
    Err(String),
}

/// The newest user message not yet forwarded, converted with the default [`PromptLimits`].
///
/// See [`newest_unforwarded_with`].
#[cfg(test)]
pub(crate) fn newest_unforwarded(
    messages: &[Message],
    is_forwarded: impl Fn(&str) -> bool,
) -> Option<Prompt> {
    newest_unforwarded_with(messages, is_forwarded, &PromptLimits::default())
}

/// The newest user message not yet forwarded.
///
/// Clients resend the whole transcript while the harness owns the history, so messages are
/// matched by id: scanning `user` messages newest first, the first already forwarded one ends
/// the search (`None`: nothing new), and the first unforwarded one with something to send is
/// the prompt. Blank messages are skipped so an empty bubble neither becomes a turn nor hides
/// the message before it; older unforwarded messages behind the prompt are never sent.
pub(crate) fn newest_unforwarded_with(
    messages: &[Message],
    is_forwarded: impl Fn(&str) -> bool,
    limits: &PromptLimits,
) -> Option<Prompt> {
    for message in messages.iter().rev() {
        let Message::User(user) = message else {
            continue;
        };
        if is_forwarded(&user.id) {
            return None;
        }
        let Converted {
            parts,
            notes,
            uploads,
        } = convert_user_message_with(user, limits);
        if !parts.is_empty() {
            return Some(Prompt {
                message_id: user.id.clone(),
                input: UserInput { parts },
                notes,
                text: message_text(user),
                uploads,
            });
        }
    }
    None
}

/// Converts a user message with the default [`PromptLimits`]; see [`convert_user_message_with`].
#[cfg(test)]
pub(crate) fn convert_user_message(message: &UserMessage) -> Converted {
    convert_user_message_with(message, &PromptLimits::default())
}

/// Converts a user message into harness parts.
///
/// String content is trimmed. Parts keep their order: text parts are trimmed (blank ones
/// dropped); image, audio, video, document and legacy binary parts whose bytes travel inline
/// (a `data` source, or a `data:…;base64,` URL) become media when their type is in
/// [`SUPPORTED_MIME_TYPES`] and they fit the size limit. A document or binary part with
/// inline bytes over the size limit, whatever its type, becomes an [`Upload`] (its token in the
/// text at its position). Any other attachment becomes a one-line note in the text at its
/// position, and a warning in [`Converted::notes`], so the model knows something was attached
/// and the message still counts as a prompt.
pub(crate) fn convert_user_message_with(message: &UserMessage, limits: &PromptLimits) -> Converted {
    let mut builder = Builder::default();
    match &message.content {
        Content::Text(text) => builder.text(text),
        Content::Parts(parts) => {
            for part in parts {
                match part {
                    ContentPart::Text(text) => builder.text(&text.text),
                    ContentPart::Image(media) => builder.media(Kind::Image, media, limits, false),
                    ContentPart::Audio(media) => builder.media(Kind::Audio, media, limits, false),
                    ContentPart::Video(media) => builder.media(Kind::Video, media, limits, false),
                    ContentPart::Document(media) => {
                        builder.media(Kind::Document, media, limits, true);
                    }
                    ContentPart::Binary(binary) => builder.binary(binary, limits),
                }
            }
        }
    }
    builder.finish()
}

/// A user message's text: its text, or its text parts joined with `"\n"`.
fn message_text(message: &UserMessage) -> String {
    content_text(&message.content)
}

/// A message content's text: the text, or its text parts joined with `"\n"`.
fn content_text(content: &Content) -> String {
    match content {
        Content::Text(text) => text.clone(),
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The text a frontend tool's `ToolMessage` returns to the model.
///
/// String content is passed unchanged (whitespace included: it may be data); parts give their
/// text parts joined with `"\n"`. A non-blank `error` makes it an error result carrying the
/// error, followed by the content when there is any, so a client-side failure never reads as
/// success.
pub(crate) fn tool_result_text(message: &ToolMessage) -> ToolResultText {
    let text = content_text(&message.content);
    match message.error.as_deref().map(str::trim) {
        Some(error) if !error.is_empty() => {
            let output = text.trim();
            if output.is_empty() || output == error {
                ToolResultText::Err(error.to_owned())
            } else {
                ToolResultText::Err(format!("{error}\n{output}"))
            }
        }
        _ => ToolResultText::Ok(text),
    }
}

/// The attachment kind named in notes.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Image,
    Audio,
    Video,
    Document,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Audio => "audio",
            Self::Video => "video",
            Self::Document => "document",
        }
    }

    /// The kind the official client gives a legacy binary part: by media type prefix.
    fn of_mime(mime_type: &str) -> Self {
        let prefix = mime_type.trim().split('/').next().unwrap_or_default();
        if prefix.eq_ignore_ascii_case("image") {
            Self::Image
        } else if prefix.eq_ignore_ascii_case("audio") {
            Self::Audio
        } else if prefix.eq_ignore_ascii_case("video") {
            Self::Video
        } else {
            Self::Document
        }
    }
}

/// Why an attachment was not forwarded.
#[derive(Debug)]
enum Failure {
    /// The bytes are elsewhere (what they are: "a remote URL", …).
    NotInline(&'static str),
    /// The bytes are inline but unusable.
    Unreadable(String),
}

/// Inline bytes ready to send.
struct Inline {
    mime_type: String,
    data: Vec<u8>,
}

/// What an attachment with inline bytes becomes.
enum Attached {
    /// Sent inline.
    Inline(Inline),
    /// Too large to send: saved in the workspace (the media type, if any, names a default).
    Upload {
        mime_type: Option<String>,
        data: Vec<u8>,
    },
}

#[derive(Default)]
struct Builder {
    parts: Vec<user_input::Part>,
    /// Text since the last media part; joined with newlines into one part, because the model
    /// would otherwise read adjacent text parts glued together.
    text: Vec<String>,
    notes: Vec<String>,
    uploads: Vec<Upload>,
}

impl Builder {
    /// Adds trimmed text, if any. Control characters count as blank at the ends; those inside
    /// become spaces when [`text_part`] sanitises the joined text.
    fn text(&mut self, text: &str) {
        let clean = text.trim_matches(|c: char| c.is_whitespace() || c.is_control());
        if !clean.is_empty() {
            self.text.push(clean.to_owned());
        }
    }

    /// A media part; `uploadable`: over the size limit, it is saved in the workspace.
    fn media(&mut self, kind: Kind, part: &MediaPart, limits: &PromptLimits, uploadable: bool) {
        let filename = part
            .metadata
            .as_ref()
            .and_then(|metadata| metadata.get("filename"))
            .and_then(Value::as_str);
        let inline = match &part.source {
            PartSource::Data { value, mime_type } => {
                inline(value, Some(mime_type), limits, uploadable)
            }
            PartSource::Url { value, mime_type } if is_data_url(value) => {
                inline(value, mime_type.as_deref(), limits, uploadable)
            }
            PartSource::Url { .. } => Err(Failure::NotInline("a remote URL")),
            PartSource::File { .. } => Err(Failure::NotInline("a provider file reference")),
        };
        self.attachment(kind, filename, inline);
    }

    fn binary(&mut self, part: &BinaryPart, limits: &PromptLimits) {
        let kind = Kind::of_mime(&part.mime_type);
        let data = part.data.as_deref().filter(|data| !data.trim().is_empty());
        let url = part.url.as_deref().filter(|url| !url.trim().is_empty());
        // Data wins over a URL, as in the official client's upgrade to a media part.
        let inline = match (data, url) {
            (Some(data), _) => inline(data, Some(&part.mime_type), limits, true),
            (None, Some(url)) if is_data_url(url) => {
                inline(url, Some(&part.mime_type), limits, true)
            }
            (None, Some(_)) => Err(Failure::NotInline("a remote URL")),
            (None, None) if part.id.as_deref().is_some_and(|id| !id.trim().is_empty()) => {
                Err(Failure::NotInline("a file reference"))
            }
            (None, None) => Err(Failure::Unreadable("it carries no data".to_owned())),
        };
        self.attachment(kind, part.filename.as_deref(), inline);
    }

    fn attachment(
        &mut self,
        kind: Kind,
        filename: Option<&str>,
        inline: Result<Attached, Failure>,
    ) {
        let kind = kind.as_str();
        let given = filename;
        let filename = filename
            .map(|name| one_line(name, 120))
            .filter(|name| !name.is_empty());
        let name = filename
            .as_deref()
            .map(|name| format!(" '{name}'"))
            .unwrap_or_default();
        match inline {
            Ok(Attached::Inline(Inline { mime_type, data })) => {
                self.flush_text();
                let description = filename.as_deref().unwrap_or_default();
                self.parts.push(media_part(&mime_type, data, description));
            }
            Ok(Attached::Upload { mime_type, data }) => {
                let token = format!("{UPLOAD_MARK}upload {}{UPLOAD_MARK}", self.uploads.len());
                self.text.push(token.clone());
                self.uploads.push(Upload {
                    name: upload_name(given, mime_type.as_deref()),
                    what: format!("{kind}{name} ({})", human_size(data.len())),
                    data,
                    token,
                });
            }
            Err(Failure::NotInline(what)) => {
                self.text.push(format!(
                    "[Attached {kind}{name} was not forwarded: only inline attachments reach \
                     this agent.]"
                ));
                self.notes.push(format!(
                    "Not forwarding the attached {kind}{name}: it is {what}, and only inline \
                     attachments reach the agent."
                ));
            }
            Err(Failure::Unreadable(reason)) => {
                self.text.push(format!(
                    "[Attached {kind}{name} could not be read: {reason}]"
                ));
                self.notes
                    .push(format!("Dropping the attached {kind}{name}: {reason}"));
            }
        }
    }

    fn flush_text(&mut self) {
        if !self.text.is_empty() {
            self.parts.push(text_part(&self.text.join("\n")));
            self.text.clear();
        }
    }

    fn finish(mut self) -> Converted {
        self.flush_text();
        Converted {
            parts: self.parts,
            notes: self.notes,
            uploads: self.uploads,
        }
    }
}

/// True for a `data:` URL (scheme compared case-insensitively, leading spaces ignored).
fn is_data_url(value: &str) -> bool {
    value
        .trim_start()
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("data:"))
}

/// The bytes of an inline attachment: `value` is base64, or a `data:` URL (some clients put
/// one in a `data` source; base64 never contains `:`, so the two cannot be confused).
/// `part_mime` wins over the URL's media type when it is not blank. Over the size limit, an
/// `uploadable` attachment is decoded whatever its type, to be saved.
fn inline(
    value: &str,
    part_mime: Option<&str>,
    limits: &PromptLimits,
    uploadable: bool,
) -> Result<Attached, Failure> {
    let part_mime = part_mime.map(str::trim).filter(|mime| !mime.is_empty());
    let (url_mime, payload) = if is_data_url(value) {
        let (mime, payload) = parse_data_url(value.trim_start())?;
        (Some(mime), payload)
    } else {
        (None, value)
    };
    let mime = part_mime.or(url_mime.filter(|mime| !mime.is_empty()));
    // Read once; what is wrong with it is said after the media type, as for any attachment.
    let mut digits = None;
    if uploadable && let Ok(plain) = base64_digits(payload) {
        if decoded_size(&plain).is_ok_and(|size| size > limits.max_attachment_bytes) {
            return Ok(Attached::Upload {
                mime_type: mime.map(essence),
                data: decode_digits(&plain)?,
            });
        }
        digits = Some(plain);
    }
    let mime_type = supported_mime(mime)?;
    let digits = match digits {
        Some(digits) => digits,
        None => base64_digits(payload)?,
    };
    let size = decoded_size(&digits)?;
    if size > limits.max_attachment_bytes {
        return Err(Failure::Unreadable(format!(
            "it is larger than the {} limit ({})",
            human_size(limits.max_attachment_bytes),
            human_size(size)
        )));
    }
    let data = decode_digits(&digits)?;
    Ok(Attached::Inline(Inline { mime_type, data }))
}

/// Splits `data:<mime>[;param…];base64,<payload>` into the media type and the payload.
fn parse_data_url(url: &str) -> Result<(&str, &str), Failure> {
    let rest = url.get(5..).unwrap_or_default();
    let Some((header, payload)) = rest.split_once(',') else {
        return Err(Failure::Unreadable(
            "its data: URL is malformed (no comma before the data)".to_owned(),
        ));
    };
    let mut fields = header.split(';');
    let mime = fields.next().unwrap_or_default().trim();
    if !fields.any(|field| field.trim().eq_ignore_ascii_case("base64")) {
        return Err(Failure::Unreadable(
            "its data: URL is not base64-encoded".to_owned(),
        ));
    }
    Ok((mime, payload))
}

/// The normalised media type (lowercase, parameters dropped) if the harness accepts it.
fn supported_mime(mime: Option<&str>) -> Result<String, Failure> {
    let Some(mime) = mime else {
        return Err(Failure::Unreadable("no media type was given".to_owned()));
    };
    let essence = essence(mime);
    if essence.is_empty() {
        return Err(Failure::Unreadable("no media type was given".to_owned()));
    }
    if SUPPORTED_MIME_TYPES.contains(&essence.as_str()) {
        Ok(essence)
    } else {
        Err(Failure::Unreadable(format!(
            "the media type {} is not supported",
            one_line(&essence, 80)
        )))
    }
}

/// Padding is optional and both alphabets are accepted: clients differ, and the bytes are
/// unambiguous either way.
const LENIENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD_LENIENT: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const URL_SAFE_LENIENT: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// A media type's essence: lowercase, parameters dropped.
fn essence(mime: &str) -> String {
    mime.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Base64 that may be wrapped in whitespace or percent-encoded (inside a `data:` URL), made
/// plain: its digits and padding.
fn base64_digits(payload: &str) -> Result<Vec<u8>, Failure> {
    let Some(unescaped) = percent_decode(payload) else {
        return Err(invalid_base64());
    };
    Ok(unescaped
        .iter()
        .copied()
        .filter(|byte| !byte.is_ascii_whitespace())
        .collect())
}

/// The size plain base64 decodes to, known before decoding (so what is over a limit is never
/// allocated).
fn decoded_size(cleaned: &[u8]) -> Result<usize, Failure> {
    let digits = cleaned
        .iter()
        .rev()
        .skip_while(|&&byte| byte == b'=')
        .count();
    if digits == 0 {
        return Err(Failure::Unreadable("it is empty".to_owned()));
    }
    // Exact for valid base64: four digits carry three bytes, a tail of n digits n - 1.
    Ok(digits / 4 * 3 + (digits % 4).saturating_sub(1))
}

/// Decodes plain base64 in either alphabet.
fn decode_digits(cleaned: &[u8]) -> Result<Vec<u8>, Failure> {
    STANDARD_LENIENT
        .decode(cleaned)
        .or_else(|_| URL_SAFE_LENIENT.decode(cleaned))
        .map_err(|_| invalid_base64())
}

/// Brackets an upload's token in the prompt's text: a private-use character, which no note of
/// ours and no sanitising of text touches.
const UPLOAD_MARK: char = '\u{F8FF}';

/// Where the uploads of a prompt ended up, in order: the path saved, relative to the
/// workspace, or why it could not be.
pub(crate) type Saved = Result<String, String>;

/// Replaces each upload's token in `input`'s text with a note: where it was saved (relative to
/// the workspace), or that it could not be. A token with no outcome (fewer outcomes than
/// uploads) says the file was not saved.
pub(crate) fn resolve_uploads(input: &mut UserInput, uploads: &[Upload], saved: &[Saved]) {
    for (i, upload) in uploads.iter().enumerate() {
        let note = match saved.get(i) {
            Some(Ok(path)) => format!(
                "[Attached {} is too large to send inline; it is saved in your workspace as \
                 {path}]",
                upload.what
            ),
            Some(Err(reason)) => format!(
                "[Attached {} was too large to send inline and could not be saved in the \
                 workspace: {reason}]",
                upload.what
            ),
            None => format!(
                "[Attached {} was too large to send inline and was not saved.]",
                upload.what
            ),
        };
        for part in &mut input.parts {
            if let Some(user_input::part::Part::Text(text)) = &mut part.part
                && text.contains(&upload.token)
            {
                *text = text.replace(&upload.token, &one_line(&note, 400));
            }
        }
    }
}

/// The file name an upload is saved under: the last component of the client's `filename`
/// (after `/` or a backslash), control characters dropped, leading dots dropped (no `.`, `..` or
/// hidden name), at most 150 bytes with its extension kept; else `attachment` with an
/// extension from the media type.
pub(crate) fn upload_name(filename: Option<&str>, mime_type: Option<&str>) -> String {
    let last = filename
        .unwrap_or_default()
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default();
    let clean: String = last.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim().trim_start_matches('.').trim();
    if clean.is_empty() {
        return format!("attachment.{}", extension_of(mime_type.unwrap_or_default()));
    }
    // Bytes, not characters: a file name is at most 255 bytes, and a number may be added.
    const MAX_BYTES: usize = 150;
    if clean.len() <= MAX_BYTES {
        return clean.to_owned();
    }
    let (stem, ext) = match clean.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && ext.len() <= 16 => (stem, ext),
        _ => (clean, ""),
    };
    let mut cut = MAX_BYTES - ext.len() - usize::from(!ext.is_empty());
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    let stem = stem.get(..cut).unwrap_or_default();
    if ext.is_empty() {
        stem.to_owned()
    } else {
        format!("{stem}.{ext}")
    }
}

/// A file extension for a media type (`bin` when unknown).
fn extension_of(mime_type: &str) -> &'static str {
    match essence(mime_type).as_str() {
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/zip" => "zip",
        "application/gzip" => "gz",
        "application/x-tar" => "tar",
        "application/xml" | "text/xml" => "xml",
        "text/plain" => "txt",
        "text/csv" => "csv",
        "text/html" => "html",
        "text/markdown" => "md",
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        "video/mp4" => "mp4",
        "video/webm" => "webm",
        _ => "bin",
    }
}

fn invalid_base64() -> Failure {
    Failure::Unreadable("its data is not valid base64".to_owned())
}

/// Undoes `%XX` escapes; `None` on a broken escape. Borrowed when there is none.
fn percent_decode(text: &str) -> Option<Cow<'_, [u8]>> {
    let bytes = text.as_bytes();
    if !bytes.contains(&b'%') {
        return Some(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let [high, low, ..] = tail else {
                return None;
            };
            let hex = |digit: u8| char::from(digit).to_digit(16);
            let value = hex(*high)? * 16 + hex(*low)?;
            out.push(u8::try_from(value).ok()?);
            rest = tail.get(2..).unwrap_or_default();
        } else {
            out.push(byte);
            rest = tail;
        }
    }
    Some(Cow::Owned(out))
}

/// A size for people: bytes, KiB or MiB with at most one decimal.
fn human_size(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    let scaled = |unit: usize, name: &str| {
        let tenths = bytes % unit * 10 / unit;
        let whole = bytes / unit;
        if tenths == 0 {
            format!("{whole} {name}")
        } else {
            format!("{whole}.{tenths} {name}")
        }
    };
    if bytes >= MIB {
        scaled(MIB, "MiB")
    } else if bytes >= KIB {
        scaled(KIB, "KiB")
    } else if bytes == 1 {
        "1 byte".to_owned()
    } else {
        format!("{bytes} bytes")
    }
}

/// Client text quoted in a note: one line, trimmed, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        flat.to_owned()
    } else {
        let mut short: String = flat.chars().take(max.saturating_sub(1)).collect();
        short.push('…');
        short
    }
}
