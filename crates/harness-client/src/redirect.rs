//! The model endpoint of a confined harness: its sandbox has no network but its own loopback,
//! where the launcher opened the model listener the host serves
//! ([`harness_sandbox::MODEL_PORT`]). Each conversation's model base URLs are pointed there,
//! and, when the host's service granted the process a token, that token replaces the first
//! segment of the URL's path and the API key (the host's model proxy keys its routes that way).

use harness_proto::lh::HarnessConfig;
use harness_proto::lh::model_config::Endpoint;

/// Points every model of `config` at the sandbox's model listener, with `token`.
pub(crate) fn redirect_models(config: &mut HarnessConfig, token: Option<&str>) {
    for model in &mut config.models {
        match &mut model.endpoint {
            Some(Endpoint::GeminiApiEndpoint(e)) => {
                e.base_url = Some(redirect_url(e.base_url.as_deref(), token));
                if e.api_key.is_some() {
                    e.api_key = token.map(str::to_owned).or(e.api_key.take());
                }
            }
            Some(Endpoint::VertexEndpoint(e)) => {
                e.base_url = Some(redirect_url(e.base_url.as_deref(), token));
                if e.api_key.is_some() {
                    e.api_key = token.map(str::to_owned).or(e.api_key.take());
                }
            }
            Some(Endpoint::GemmaEndpoint(e)) => {
                e.base_url = Some(redirect_url(e.base_url.as_deref(), token));
            }
            _ => {}
        }
    }
}

/// `url` on the sandbox's model listener: its path kept, or with `token` as its first segment.
fn redirect_url(url: Option<&str>, token: Option<&str>) -> String {
    let url = url.unwrap_or_default();
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
    let path = match token {
        Some(token) => {
            let rest = path
                .trim_start_matches('/')
                .split_once('/')
                .map(|(_, rest)| format!("/{rest}"))
                .unwrap_or_default();
            format!("/{token}{rest}")
        }
        None => path.trim_end_matches('/').to_owned(),
    };
    format!("http://127.0.0.1:{}{path}", harness_sandbox::MODEL_PORT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConversationConfig, ModelEndpoint};

    #[test]
    fn a_token_replaces_the_first_path_segment_and_the_rest_is_kept() {
        let port = harness_sandbox::MODEL_PORT;
        assert_eq!(
            redirect_url(Some("http://127.0.0.1:4100/agenttoken"), Some("proc")),
            format!("http://127.0.0.1:{port}/proc")
        );
        assert_eq!(
            redirect_url(
                Some("http://127.0.0.1:4100/agenttoken/warm-up"),
                Some("proc")
            ),
            format!("http://127.0.0.1:{port}/proc/warm-up")
        );
        assert_eq!(
            redirect_url(Some("https://gw.example/v1/"), None),
            format!("http://127.0.0.1:{port}/v1")
        );
        assert_eq!(redirect_url(None, None), format!("http://127.0.0.1:{port}"));
    }

    #[test]
    fn every_model_of_a_config_goes_to_the_sandbox_with_the_token_as_its_key() {
        let mut config = ConversationConfig::new(
            "m",
            ModelEndpoint::gemini("http://127.0.0.1:4100/agenttoken", "agenttoken"),
        )
        .app_data_dir("/tmp/app")
        .workspace("/tmp/ws")
        .policy(crate::policy::allow_all())
        .build()
        .unwrap();
        redirect_models(&mut config, Some("proc"));
        assert!(!config.models.is_empty());
        for model in &config.models {
            let Some(Endpoint::GeminiApiEndpoint(e)) = &model.endpoint else {
                panic!("a Gemini endpoint: {model:?}");
            };
            assert_eq!(
                e.base_url.as_deref(),
                Some(format!("http://127.0.0.1:{}/proc", harness_sandbox::MODEL_PORT).as_str())
            );
            assert_eq!(e.api_key.as_deref(), Some("proc"));
        }
    }
}
