//! `GET /readyz`, what an orchestrator routes by: 503 while an agent that is to be confined
//! cannot be (the machine refused the sandbox, so its command and write tools are withheld),
//! unless the operator opted out (`ready_without_sandbox`); 200 otherwise. Like `/healthz` it
//! answers any host and needs no token, and it tells no probe detail.

mod support;

use harness_client::sandbox::SIMULATE_UNAVAILABLE_ENV;
use serde_json::Value;
use support::served::{Served, Start};

/// The simulated probe failure, which must stay in the log (it may name paths).
const PROBE_DETAIL: &str = "no user namespaces in this container";

/// `GET /readyz` as a load balancer sends it: by a name the server was not told about, with
/// no token.
async fn readyz(served: &Served) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("http://{}/readyz", served.addr))
        .header("host", "10.1.2.3:8027")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn a_server_whose_agents_are_confined_is_ready() {
    let served = Served::start(Start::default()).await;
    let caps = served.capabilities().await;
    assert_eq!(caps["custom"]["sandbox"]["confined"], true, "{caps}");
    let (status, body) = readyz(&served).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, serde_json::json!({"status": "ready"}));
}

#[tokio::test]
async fn a_server_that_cannot_confine_its_agents_is_not_ready_and_says_why_without_details() {
    let served = Served::start(Start {
        env: &[(SIMULATE_UNAVAILABLE_ENV, PROBE_DETAIL)],
        ..Start::default()
    })
    .await;
    let (status, body) = readyz(&served).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unavailable", "{body}");
    let reason = body["reason"].as_str().unwrap();
    assert!(
        reason.contains("1 of 1 agents withhold their command and write tools"),
        "{body}"
    );
    assert!(
        body["fix"]
            .as_str()
            .unwrap()
            .contains("ready_without_sandbox"),
        "{body}"
    );
    assert!(
        !body.to_string().contains(PROBE_DETAIL),
        "the probe's own words go to the log only: {body}"
    );
    let log = served.log();
    assert!(
        log.contains("NOT READY") && log.contains(PROBE_DETAIL),
        "{log}"
    );
    // Alive all the same: a liveness probe must not restart it for this.
    let health = reqwest::get(format!("http://{}/healthz", served.addr))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn an_operator_who_opted_out_gets_a_ready_server_that_says_the_sandbox_is_unavailable() {
    let served = Served::start(Start {
        args: &["--ready-without-sandbox"],
        env: &[(SIMULATE_UNAVAILABLE_ENV, PROBE_DETAIL)],
        ..Start::default()
    })
    .await;
    let (status, body) = readyz(&served).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready", "{body}");
    assert_eq!(body["sandbox"], "unavailable", "{body}");
    assert_eq!(body["readyWithoutSandbox"], true, "{body}");
    // The opt-out changes readiness only: the tools are withheld all the same.
    let caps = served.capabilities().await;
    assert_eq!(
        caps["custom"]["sandbox"]["withheldTools"],
        serde_json::json!(["run_command", "write_to_file"]),
        "{caps}"
    );
}

#[tokio::test]
async fn an_agent_the_operator_left_unconfined_is_ready() {
    let served = Served::start(Start {
        args: &["--sandbox", "off"],
        anonymous: true,
        ..Start::default()
    })
    .await;
    let (status, body) = readyz(&served).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready", "{body}");
}
