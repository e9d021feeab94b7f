//! The model proxy's warm-up answers: what a harness started ahead of need talks to in its
//! throwaway turn (`harness_client::WarmUp`), answered here at once, never by the real model.
//!
//! A warm-up endpoint is the agent's proxied endpoint with [`PREFIX`] after the token, so it
//! needs the agent's token like any call, and accepts exactly the generation routes the agent's
//! endpoint accepts.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use harness_client::ModelEndpoint;

/// The path segment after the token that marks a warm-up call.
pub(super) const PREFIX: &str = "/warm-up";

/// What every warm-up call is told: one short text, finished, with token counts.
fn canned() -> serde_json::Value {
    serde_json::json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": "Ready."}]},
            "index": 0,
            "finishReason": "STOP"
        }],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "warm-up"
    })
}

/// The warm-up endpoint of `proxied`, an endpoint the proxy at `proxy_url` registered; `None`
/// for an OpenAI-compatible endpoint (only Gemini's answer format is canned) or an endpoint
/// that is not the proxy's.
pub(super) fn endpoint(proxy_url: &str, proxied: &ModelEndpoint) -> Option<ModelEndpoint> {
    let mut warm = proxied.clone();
    match &mut warm {
        ModelEndpoint::Gemini { base_url, .. } | ModelEndpoint::Vertex { base_url, .. } => {
            let base = base_url
                .as_deref()
                .filter(|base| base.starts_with(proxy_url))?;
            *base_url = Some(format!("{base}{PREFIX}"));
        }
        ModelEndpoint::OpenAiCompatible { .. } => return None,
    }
    Some(warm)
}

/// The answer to the generation call `rpc` (`streamGenerateContent`, `generateContent` or
/// `countTokens`) of a warm-up.
pub(super) fn answer(rpc: &str) -> Response {
    match rpc {
        "streamGenerateContent" => (
            [(header::CONTENT_TYPE, "text/event-stream")],
            format!("data: {}\r\n\r\n", canned()),
        )
            .into_response(),
        "countTokens" => axum::Json(serde_json::json!({"totalTokens": 1})).into_response(),
        _ => axum::Json(canned()).into_response(),
    }
}

/// The RPC a generation path names (`…/models/<model>:<rpc>`).
pub(super) fn rpc_of(path: &str) -> Option<&str> {
    path.rsplit_once(':').map(|(_, rpc)| rpc)
}

/// Refuses a warm-up call an OpenAI-compatible agent's harness would make (none is given a
/// warm-up endpoint).
pub(super) fn not_offered() -> Response {
    super::google_error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "the model proxy answers warm-up calls only for Gemini and Vertex endpoints",
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_warm_up_endpoint_is_the_proxied_one_with_the_prefix() {
        let proxied = ModelEndpoint::Gemini {
            base_url: Some("http://127.0.0.1:9/tok".into()),
            api_key: Some("tok".into()),
            headers: BTreeMap::new(),
            thinking_level: None,
        };
        let Some(ModelEndpoint::Gemini {
            base_url, api_key, ..
        }) = endpoint("http://127.0.0.1:9/", &proxied)
        else {
            panic!("a Gemini warm-up endpoint");
        };
        assert_eq!(base_url.as_deref(), Some("http://127.0.0.1:9/tok/warm-up"));
        assert_eq!(api_key.as_deref(), Some("tok"));
        assert!(
            endpoint("http://127.0.0.1:10/", &proxied).is_none(),
            "not this proxy's endpoint"
        );
        let openai = ModelEndpoint::OpenAiCompatible {
            base_url: "http://127.0.0.1:9/tok".into(),
        };
        assert!(endpoint("http://127.0.0.1:9/", &openai).is_none());
    }
}
