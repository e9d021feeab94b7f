//! The `/_script/*` control routes, used by tests and processes that only speak HTTP.

use gemini_script::{AnsweredBy, LoggedRequest, Script, ScriptedModel};
use serde_json::{Value, json};

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&str>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.body(body.to_owned());
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("JSON")
        };
        (status, value)
    }

    async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    /// One model request; returns the concatenated text of the answer.
    async fn ask(&self, text: &str) -> String {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": text}]}]});
        let sse = self
            .http
            .post(format!(
                "{}/v1beta/models/m:streamGenerateContent?alt=sse",
                self.base
            ))
            .json(&body)
            .send()
            .await
            .expect("request")
            .text()
            .await
            .expect("body");
        sse.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|e| {
                e.pointer("/candidates/0/content/parts/0/text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }
}

#[tokio::test]
async fn load_push_inspect_and_reset_over_http() {
    let model = ScriptedModel::start(Script::new()).await.expect("start");
    let client = Client {
        http: reqwest::Client::new(),
        base: model.base_url(),
    };
    let script = r#"{"replies": [{"name": "hi", "match": {"keywords": ["hello"]}, "reply": {"text": "Hi there"}}],
                     "default": {"text": "default answer"}}"#;
    assert_eq!(
        client.post("/_script/load", script).await,
        (200, json!({"entries": 1}))
    );
    assert_eq!(
        client
            .post(
                "/_script/push",
                r#"{"reply": {"text": "pushed"}, "repeat": 2}"#
            )
            .await,
        (200, json!({"entries": 2}))
    );
    assert_eq!(
        client
            .post(
                "/_script/push",
                r#"[{"reply": {"text": "a"}}, {"reply": {"text": "b"}}]"#
            )
            .await,
        (200, json!({"entries": 4}))
    );
    let (status, state) = client.get("/_script/state").await;
    assert_eq!(status, 200);
    assert_eq!(
        state,
        json!({
            "entries": [
                {"index": 0, "name": "hi", "remaining": 1},
                {"index": 1, "name": null, "remaining": 2},
                {"index": 2, "name": null, "remaining": 1},
                {"index": 3, "name": null, "remaining": 1}
            ],
            "default": {"text": ["default answer"]},
            "requests": 0,
            "served": 0
        })
    );

    let answers = [
        client.ask("hello model").await,
        client.ask("x").await,
        client.ask("x").await,
        client.ask("x").await,
        client.ask("x").await,
        client.ask("x").await,
    ];
    assert_eq!(
        answers,
        ["Hi there", "pushed", "pushed", "a", "b", "default answer"]
    );

    let (status, log) = client.get("/_script/requests").await;
    assert_eq!(status, 200);
    let log: Vec<LoggedRequest> = serde_json::from_value(log).expect("log entries deserialize");
    assert_eq!(log.len(), 6);
    assert_eq!(
        log[0].answered_by,
        AnsweredBy::Entry {
            index: 0,
            name: Some("hi".into())
        }
    );
    assert_eq!(log[0].last_user_text().as_deref(), Some("hello model"));
    assert_eq!(log[5].answered_by, AnsweredBy::Default);
    assert_eq!(log, model.requests());

    let (status, _) = client
        .send(reqwest::Method::DELETE, "/_script/requests", None)
        .await;
    assert_eq!(status, 204);
    assert_eq!(client.get("/_script/requests").await, (200, json!([])));

    client.ask("x").await;
    let (status, taken) = client.post("/_script/requests/take", "").await;
    assert_eq!(status, 200);
    assert_eq!(
        taken.as_array().map(Vec::len),
        Some(1),
        "take returns the log"
    );
    assert_eq!(
        client.get("/_script/requests").await,
        (200, json!([])),
        "and leaves it empty"
    );

    client.ask("x").await;
    assert_eq!(
        client.post("/_script/reset", "").await,
        (200, json!({"entries": 0}))
    );
    assert_eq!(model.request_count(), 0);
    assert_eq!(model.served(), 8, "the served count survives a reset");
}

#[tokio::test]
async fn a_log_limit_keeps_the_newest_requests_and_counts_them_all() {
    let model = ScriptedModel::start(Script::new()).await.expect("start");
    let client = Client {
        http: reqwest::Client::new(),
        base: model.base_url(),
    };
    for text in ["one", "two", "three"] {
        client.ask(text).await;
    }
    model.set_log_limit(Some(2));
    let texts = |log: Vec<LoggedRequest>| -> Vec<String> {
        log.iter()
            .filter_map(LoggedRequest::last_user_text)
            .collect()
    };
    assert_eq!(texts(model.requests()), ["two", "three"]);
    client.ask("four").await;
    assert_eq!(texts(model.requests()), ["three", "four"]);
    model.set_log_limit(Some(0));
    client.ask("five").await;
    assert_eq!(model.request_count(), 0);
    let (_, state) = client.get("/_script/state").await;
    assert_eq!(
        (state["requests"].clone(), state["served"].clone()),
        (json!(0), json!(5))
    );
    model.set_log_limit(None);
    client.ask("six").await;
    assert_eq!(texts(model.requests()), ["six"]);
}

#[tokio::test]
async fn malformed_control_bodies_are_explained_and_change_nothing() {
    let model = ScriptedModel::start(Script::new()).await.expect("start");
    let client = Client {
        http: reqwest::Client::new(),
        base: model.base_url(),
    };
    client
        .post("/_script/load", r#"[{"reply": {"text": "kept"}}]"#)
        .await;
    for (path, body, fragment) in [
        (
            "/_script/load",
            r#"[{"reply": {"text": "ok"}}, {"reply": {"error": {"code": 99}}}]"#,
            "entry 1",
        ),
        (
            "/_script/load",
            r#"{"replies": [{"reply": {"texts": "x"}}]}"#,
            "replies[0].reply.texts",
        ),
        ("/_script/load", "", "line 1"),
        (
            "/_script/push",
            r#"{"match": {"last_part": "image"}, "reply": {}}"#,
            "match.last_part",
        ),
        (
            "/_script/push",
            r#"[{"reply": {}}, {"reply": {"calls": [{}]}}]"#,
            "pushed entry 1",
        ),
    ] {
        let (status, body) = client.post(path, body).await;
        assert_eq!(status, 400, "{path} {body}");
        let message = body["error"].as_str().unwrap_or_default();
        assert!(
            message.contains(fragment),
            "{path}: {message:?} should mention {fragment:?}"
        );
    }
    assert_eq!(client.ask("x").await, "kept");
}
