//! The playground: a chat page for each agent, for people to try it in a browser.
//!
//! `GET <agent path>` asking for HTML (`Accept: text/html`, as a browser does) serves the page,
//! which talks to the same path with the official `@ag-ui/client`; its script and style are
//! served at `<agent path>/playground/playground.js` and `…/playground.css`. The page is built
//! from `crates/agui-server/playground/` by `cargo xtask playground` into `playground/dist/`,
//! committed, and embedded here, so serving it needs neither Node nor a network.
//!
//! The page and its assets are public (with `auth_token` set, the page asks for the token and
//! sends it on every request itself); they are sent with a Content-Security-Policy that allows
//! only this origin, and `X-Content-Type-Options: nosniff`.

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

const INDEX_HTML: &str = include_str!("../playground/dist/index.html");
const SCRIPT: &str = include_str!("../playground/dist/playground.js");
const STYLE: &str = include_str!("../playground/dist/playground.css");

/// The page's Content-Security-Policy: scripts, styles and requests to this origin only. Images
/// may also be `blob:` URLs: the Files panel previews a workspace image from a blob it fetched
/// with the token (an `<img>` pointing at the file route could not send it); a blob URL is made
/// only by this page's own script.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Where the assets of the agent at `path` are served (`/playground` for `/`).
pub(crate) fn assets_path(path: &str) -> String {
    format!("{}/playground", path.trim_end_matches('/'))
}

/// The page for the agent mounted at `path`: it posts to that path, and loads its assets from
/// [`assets_path`].
pub(crate) fn page(path: &str) -> String {
    INDEX_HTML
        .replace("__AGENT_PATH__", &html_escape(path))
        .replace("__ASSETS__", &html_escape(&assets_path(path)))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The routes serving the page of each agent at `paths` (mount paths as configured, e.g. `/`
/// or `/chat`): `GET <path>` and `GET <path>/playground/{playground.js,playground.css}`.
/// Merged into the service router beside the agents' `POST <path>`, outside authentication.
pub(crate) fn router<S: Clone + Send + Sync + 'static>(paths: &[&str]) -> Router<S> {
    let mut router = Router::new();
    for path in paths {
        let html = page(path);
        let assets = assets_path(path);
        router = router
            .route(
                path,
                get(move |headers: HeaderMap| async move { serve_page(&headers, html) }),
            )
            .route(
                &format!("{assets}/playground.js"),
                get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
            )
            .route(
                &format!("{assets}/playground.css"),
                get(|| async { asset("text/css; charset=utf-8", STYLE) }),
            );
    }
    router
}

/// Whether the request asks for HTML, as a browser navigating to the URL does.
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/html"))
        })
}

fn serve_page(headers: &HeaderMap, html: String) -> Response {
    if !wants_html(headers) {
        // What a GET here got before the page existed, with a hint.
        let mut response = (
            StatusCode::METHOD_NOT_ALLOWED,
            axum::Json(json!({
                "error": "method not allowed",
                "detail": "POST a RunAgentInput to run the agent; open this URL in a browser for the playground",
            })),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        response
            .headers_mut()
            .insert(header::VARY, HeaderValue::from_static("accept"));
        return response;
    }
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    let headers = response.headers_mut();
    secure(headers);
    headers.insert(header::VARY, HeaderValue::from_static("accept"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    secure(response.headers_mut());
    response
}

/// Headers every playground response carries.
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The binary changes with the page: no stale copy after an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    async fn get(router: &Router, uri: &str, accept: &str) -> (StatusCode, HeaderMap, String) {
        let request = Request::get(uri)
            .header(header::ACCEPT, accept)
            .body(Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = to_bytes(body, usize::MAX).await.unwrap();
        (
            parts.status,
            parts.headers,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

    #[tokio::test]
    async fn a_browser_gets_the_page_of_each_agent_with_strict_headers() {
        let router: Router = router(&["/", "/team/coder"]);
        for (path, assets) in [
            ("/", "/playground"),
            ("/team/coder", "/team/coder/playground"),
        ] {
            let (status, headers, body) = get(&router, path, BROWSER).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
            assert_eq!(
                headers[header::CONTENT_SECURITY_POLICY],
                CONTENT_SECURITY_POLICY
            );
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert!(
                body.contains(&format!(
                    r#"<meta name="agui-agent-path" content="{path}">"#
                )),
                "the page posts to its own agent: {path}"
            );
            assert!(body.contains(&format!(r#"src="{assets}/playground.js""#)));
            assert!(body.contains(&format!(r#"href="{assets}/playground.css""#)));
            assert!(!body.contains("__"), "every placeholder is filled");

            let (status, headers, script) =
                get(&router, &format!("{assets}/playground.js"), "*/*").await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(
                headers[header::CONTENT_TYPE],
                "text/javascript; charset=utf-8"
            );
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(script, SCRIPT);
            let (status, headers, _) =
                get(&router, &format!("{assets}/playground.css"), "text/css").await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(headers[header::CONTENT_TYPE], "text/css; charset=utf-8");
        }
    }

    #[tokio::test]
    async fn a_program_asking_for_json_is_told_to_post() {
        let router: Router = router(&["/"]);
        for accept in ["application/json", "text/event-stream", "*/*", ""] {
            let (status, headers, body) = get(&router, "/", accept).await;
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "Accept: {accept}");
            assert_eq!(headers[header::ALLOW], "POST");
            assert!(body.contains("POST a RunAgentInput"), "{body}");
        }
    }

    #[test]
    fn the_embedded_build_has_the_page_its_script_and_its_style() {
        assert!(INDEX_HTML.contains("__AGENT_PATH__") && INDEX_HTML.contains("__ASSETS__"));
        assert!(
            SCRIPT.contains("change_background"),
            "the page offers its frontend tool"
        );
        assert!(STYLE.contains("#composer"));
    }

    #[test]
    fn accept_headers_are_read_like_browsers_send_them() {
        let accepts = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_static(value));
            wants_html(&headers)
        };
        assert!(accepts(BROWSER));
        assert!(accepts("TEXT/HTML"));
        assert!(accepts("application/json, text/html;q=0.5"));
        assert!(!accepts("text/event-stream"));
        assert!(!accepts("text/htmlx"));
        assert!(!wants_html(&HeaderMap::new()));
    }
}
