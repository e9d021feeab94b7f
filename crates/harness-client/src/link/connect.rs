//! Opening a conversation's socket: connecting with retries, sending the config, waiting for the
//! init answer, and explaining a refused init. The harness gives no error frame for a refusal —
//! it drops the connection and says why on stderr — so the reason is read from there.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use harness_proto::lh::{
    HarnessConfig, InitializeConversationEvent, InitializeConversationResponse, OutputEvent,
    output_event,
};
use harness_proto::step::Step;
use tokio::sync::broadcast;
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::socket::{self, Socket};
use super::{ConnectOptions, FrameDirection, FrameTap, InitInfo, Link, observe};
use crate::callbacks::Callbacks;
use crate::error::{HarnessError, InitRefusal, Result};
use crate::events::CloseReason;
use crate::process::HarnessProcess;

/// Opens a socket, initializes the conversation and starts the reader and writer.
pub(crate) async fn open(
    process: &HarnessProcess,
    config: &HarnessConfig,
    callbacks: Arc<dyn Callbacks>,
    options: &ConnectOptions,
) -> Result<(Link, InitInfo)> {
    let deadline = tokio::time::Instant::now() + options.reattach_window;
    loop {
        match try_open(process, config, callbacks.clone(), options).await {
            // The harness releases a closed socket's conversation id asynchronously; a re-attach
            // right after a close is refused with "already in use" for a few milliseconds.
            Err(HarnessError::InitFailed {
                kind: InitRefusal::InUse,
                reason,
            }) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(%reason, "conversation id still attached; retrying the init");
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            other => return other,
        }
    }
}

async fn try_open(
    process: &HarnessProcess,
    config: &HarnessConfig,
    callbacks: Arc<dyn Callbacks>,
    options: &ConnectOptions,
) -> Result<(Link, InitInfo)> {
    if let Some(info) = process.exit_info() {
        return Err(HarnessError::Closed(CloseReason::ProcessExited(info)));
    }
    if !process.is_usable() {
        return Err(HarnessError::Closed(CloseReason::ClosedByHost));
    }
    // Subscribe before connecting: an init failure is only explained on stderr.
    let mut stderr = process.subscribe_stderr();
    let mut socket = connect(process, options).await?;
    let mut config = config.clone();
    if let Some(token) = process.model_token() {
        crate::redirect::redirect_models(&mut config, token.as_deref());
    }
    let init = InitializeConversationEvent {
        config: Some(config),
    };
    let text = harness_proto::to_json(&init);
    observe(options.tap.as_ref(), FrameDirection::ToHarness, &text);
    socket
        .send(Message::text(text))
        .await
        .map_err(|e| HarnessError::InitFailed {
            kind: InitRefusal::SendFailed,
            reason: format!("sending the config failed: {e}"),
        })?;
    let mut response = match tokio::time::timeout(
        options.init_timeout,
        first_event(&mut socket, options.tap.as_ref()),
    )
    .await
    {
        Err(_) => {
            return Err(HarnessError::InitFailed {
                kind: InitRefusal::NoAnswer,
                reason: format!("no answer to the config within {:?}", options.init_timeout),
            });
        }
        Ok(Ok(response)) => response,
        Ok(Err(dropped)) => {
            if let Some(info) = process.exit_info() {
                return Err(HarnessError::Closed(CloseReason::ProcessExited(info)));
            }
            let reason = explain_init_failure(&mut stderr, &dropped).await;
            return Err(HarnessError::InitFailed {
                kind: InitRefusal::from_explanation(&reason),
                reason,
            });
        }
    };
    let conversation_id = response.cascade_id().to_owned();
    let init = InitInfo {
        history: std::mem::take(&mut response.history)
            .into_iter()
            .map(Step::from)
            .collect(),
        cumulative_usage: response.cumulative_usage.clone(),
        sandbox_available: response
            .sandbox_status
            .as_ref()
            .is_some_and(|s| s.available()),
        conversation_id: conversation_id.clone(),
    };
    let link = socket::start(
        process,
        socket,
        conversation_id,
        callbacks,
        options.tap.clone(),
    );
    Ok((link, init))
}

/// How much the socket reads at once. The codec zero-fills this much of its buffer before every
/// read, including the read that finds nothing more (with tungstenite's default of 128 KiB that
/// fill was about a twentieth of a busy server's CPU); the harness's frames are a few KiB, and a
/// larger frame still arrives whole (the buffer grows to the frame's length).
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Connects to the harness's port, retrying with backoff while it is not yet listening.
async fn connect(process: &HarnessProcess, options: &ConnectOptions) -> Result<Socket> {
    let url = format!("ws://127.0.0.1:{}/", process.port());
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(options.max_message_size))
        .max_frame_size(Some(options.max_message_size));
    // The key comes from the harness's stdout: a malformed one is an error, not a panic.
    let key = process
        .ws_key()
        .parse::<HeaderValue>()
        .map_err(|e| HarnessError::Connect {
            port: process.port(),
            attempts: 0,
            last_error: format!("the harness's key is not a valid header value: {e}"),
        })?;
    let mut last_error = String::new();
    for attempt in 0..options.connect_attempts.max(1) {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 << (attempt - 1).min(6))).await;
        }
        let mut request = url
            .as_str()
            .into_client_request()
            .expect("a ws:// URL on loopback is valid");
        request.headers_mut().insert("x-goog-api-key", key.clone());
        match process.connect_socket().await {
            Ok(stream) => {
                // Each frame is a small write that must leave at once (no Nagle delay).
                let _ = stream.set_nodelay(true);
                match tokio_tungstenite::client_async_with_config(
                    request,
                    MaybeTlsStream::Plain(stream),
                    Some(ws_config),
                )
                .await
                {
                    Ok((socket, _)) => return Ok(socket),
                    Err(e) => last_error = e.to_string(),
                }
            }
            Err(e) => last_error = e.to_string(),
        }
        if let Some(info) = process.exit_info() {
            return Err(HarnessError::Closed(CloseReason::ProcessExited(info)));
        }
    }
    Err(HarnessError::Connect {
        port: process.port(),
        attempts: options.connect_attempts.max(1),
        last_error,
    })
}

/// Waits for the init response; `Err` describes how the connection ended instead.
async fn first_event(
    socket: &mut Socket,
    tap: Option<&FrameTap>,
) -> std::result::Result<InitializeConversationResponse, String> {
    while let Some(frame) = socket.next().await {
        let text = match frame {
            Ok(Message::Text(text)) => text.to_string(),
            Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Message::Close(close)) => {
                return Err(format!("the harness closed the connection ({close:?})"));
            }
            Ok(_) => continue,
            Err(e) => return Err(format!("the connection dropped ({e})")),
        };
        observe(tap, FrameDirection::FromHarness, &text);
        match harness_proto::from_json::<OutputEvent>(&text) {
            Ok(OutputEvent {
                event: Some(output_event::Event::InitializeConversationResponse(r)),
                ..
            }) => {
                return Ok(r);
            }
            Ok(other) => tracing::warn!(?other, "unexpected frame before the init response"),
            Err(e) => tracing::warn!(error = %e, "undecodable frame before the init response"),
        }
    }
    Err("the connection dropped".into())
}

/// The stderr lines that explain a dropped init (the harness prints e.g.
/// `Failed to create agent: conversation "…" not found in "…" (cannot resume)`).
async fn explain_init_failure(stderr: &mut broadcast::Receiver<String>, dropped: &str) -> String {
    let mut reasons = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    loop {
        match tokio::time::timeout_at(deadline, stderr.recv()).await {
            Ok(Ok(line)) => {
                if explains_a_refusal(&line) {
                    reasons.push(line);
                    // One explanatory line is the norm; take what arrives with it.
                    if reasons.len() >= 3 {
                        break;
                    }
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(_)) | Err(_) => break,
        }
    }
    if reasons.is_empty() {
        format!("{dropped}, without an explanation on stderr")
    } else {
        reasons.join("; ")
    }
}

/// Whether a stderr line can explain a refused init: the harness's own explanations are plain
/// lines; glog lines (prefixed `ERROR: logging before …` whatever their severity) are noise.
fn explains_a_refusal(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    [
        "fail",
        "already",
        "invalid",
        "not found",
        "cannot",
        "error:",
    ]
    .iter()
    .any(|k| lower.contains(k))
        && !line.starts_with("ERROR: logging before")
}
