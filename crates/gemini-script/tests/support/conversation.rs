//! One WebSocket conversation with the harness: connect with the API key header, send the
//! `config` frame and wait for `initializeConversationResponse`, send user input, answer the
//! harness's requests, and read frames until the root trajectory goes idle.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::{SinkExt as _, StreamExt as _};
use gemini_script::scenarios::HostSetup;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{Message, client::IntoClientRequest as _, http::HeaderValue},
};

use super::{GUARD, StderrTail};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// An initialised conversation.
pub(crate) struct Conversation {
    socket: Socket,
    /// The conversation id (also the root trajectory id).
    pub(crate) cascade_id: String,
    /// The `initializeConversationResponse` payload.
    pub(crate) init: Value,
    stderr: StderrTail,
}

/// Everything the harness sent during one turn.
#[derive(Debug)]
pub(crate) struct TurnOutcome {
    /// Every frame, in order.
    pub(crate) frames: Vec<Value>,
    /// The `error` of the root's final `trajectoryStateUpdate`, if any.
    pub(crate) error: Option<String>,
    /// The socket closed before the root went idle.
    pub(crate) closed: bool,
    root: String,
}

impl Conversation {
    /// Connects and initialises; `None` if the harness dropped the socket
    /// during init (it logs the reason to stderr).
    pub(crate) async fn open(
        port: u16,
        api_key: &str,
        config: Value,
        stderr: StderrTail,
    ) -> Option<Self> {
        let mut request = format!("ws://127.0.0.1:{port}/")
            .into_client_request()
            .expect("WebSocket request");
        request.headers_mut().insert(
            "x-goog-api-key",
            HeaderValue::from_str(api_key).expect("api key header"),
        );
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .unwrap_or_else(|e| {
                panic!("WebSocket connect failed: {e}\nstderr:\n{}", stderr.text())
            });
        let mut conversation = Self {
            socket,
            cascade_id: String::new(),
            init: Value::Null,
            stderr,
        };
        conversation.send(json!({"config": config})).await;
        loop {
            let frame = conversation.next_frame().await?;
            if let Some(init) = frame.get("initializeConversationResponse") {
                conversation.cascade_id = init["cascadeId"].as_str().unwrap_or_default().to_owned();
                conversation.init = init.clone();
                return Some(conversation);
            }
        }
    }

    async fn send(&mut self, frame: Value) {
        self.socket
            .send(Message::text(frame.to_string()))
            .await
            .unwrap_or_else(|e| panic!("send failed: {e}\nstderr:\n{}", self.stderr.text()));
    }

    /// The next JSON frame; `None` once the socket is closed.
    async fn next_frame(&mut self) -> Option<Value> {
        loop {
            let message = match tokio::time::timeout(GUARD, self.socket.next()).await {
                Ok(message) => message,
                Err(_) => panic!(
                    "no frame from the harness within the guard\nstderr:\n{}",
                    self.stderr.text()
                ),
            };
            let text = match message? {
                Ok(Message::Text(text)) => text.as_str().to_owned(),
                Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            };
            return Some(
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad frame {text}: {e}")),
            );
        }
    }

    /// Sends `prompt` and reads until the root trajectory is idle, answering
    /// tool calls and questions from `setup` on the way.
    pub(crate) async fn turn(&mut self, prompt: &str, setup: &HostSetup) -> TurnOutcome {
        self.send(json!({"userInput": {"parts": [{"text": prompt}]}}))
            .await;
        let mut outcome = TurnOutcome {
            frames: Vec::new(),
            error: None,
            closed: false,
            root: self.cascade_id.clone(),
        };
        let mut answered = BTreeSet::new();
        loop {
            let Some(frame) = self.next_frame().await else {
                outcome.closed = true;
                return outcome;
            };
            outcome.frames.push(frame.clone());
            if let Some(call) = frame.get("toolCall") {
                let reply = match setup.tool_result(call["name"].as_str().unwrap_or_default()) {
                    Some(result) => json!({"id": call["id"], "responseJson": result.to_string()}),
                    None => {
                        json!({"id": call["id"], "errorMessage": "the test host has no such tool"})
                    }
                };
                self.send(json!({"toolResponse": reply})).await;
            }
            if let Some(step) = frame.get("stepUpdate")
                && step["state"] == "STATE_WAITING_FOR_USER"
                && step.get("questionsRequest").is_some()
                && answered.insert((
                    step["trajectoryId"].to_string(),
                    step["stepIndex"].to_string(),
                ))
            {
                let response = setup
                    .question_answer
                    .clone()
                    .unwrap_or_else(|| json!({"answers": []}));
                let reply = json!({
                    "trajectoryId": step["trajectoryId"],
                    "stepIndex": step["stepIndex"],
                    "response": response,
                });
                self.send(json!({"questionResponse": reply})).await;
            }
            if let Some(update) = frame.get("trajectoryStateUpdate")
                && update["trajectoryId"] == self.cascade_id.as_str()
                && matches!(
                    update["state"].as_str(),
                    Some("STATE_FULLY_IDLE" | "STATE_CANCELLED")
                )
            {
                outcome.error = update["error"]
                    .as_str()
                    .filter(|e| !e.is_empty())
                    .map(str::to_owned);
                return outcome;
            }
        }
    }

    /// Closes the socket and waits for the close handshake.
    pub(crate) async fn close(mut self) {
        let _ = self.socket.close(None).await;
        while self.next_frame().await.is_some() {}
    }
}

impl TurnOutcome {
    /// The final snapshot of every step, keyed by (trajectory id, step index).
    pub(crate) fn steps(&self) -> BTreeMap<(String, u64), Value> {
        let mut steps = BTreeMap::new();
        for step in self.frames.iter().filter_map(|f| f.get("stepUpdate")) {
            let key = (
                step["trajectoryId"].as_str().unwrap_or_default().to_owned(),
                step["stepIndex"].as_u64().unwrap_or_default(),
            );
            steps.insert(key, step.clone());
        }
        steps
    }

    /// Final root steps the model addressed to the user, in step order.
    fn root_model_steps(&self) -> Vec<Value> {
        self.steps()
            .into_iter()
            .filter(|((trajectory, _), s)| {
                *trajectory == self.root
                    && s["source"] == "SOURCE_MODEL"
                    && s["target"] == "TARGET_USER"
            })
            .map(|(_, s)| s)
            .collect()
    }

    /// The non-empty texts of the root's model steps.
    pub(crate) fn model_texts(&self) -> Vec<String> {
        self.root_model_steps()
            .iter()
            .filter_map(|s| {
                s["text"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The non-empty thinking of the root's model steps.
    pub(crate) fn thinking(&self) -> Vec<String> {
        self.root_model_steps()
            .iter()
            .filter_map(|s| {
                s["thinking"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The `toolCall` events.
    pub(crate) fn tool_calls(&self) -> Vec<&Value> {
        self.frames
            .iter()
            .filter_map(|f| f.get("toolCall"))
            .collect()
    }

    /// Step snapshots that carry this action field (e.g. `listDirectory`).
    pub(crate) fn steps_with(&self, action: &str) -> Vec<Value> {
        self.steps()
            .into_values()
            .filter(|s| s.get(action).is_some())
            .collect()
    }

    /// Frame kinds in order, for failure messages.
    pub(crate) fn summary(&self) -> String {
        self.frames
            .iter()
            .map(|f| {
                let mut s = f.to_string();
                s.truncate(300);
                s
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
