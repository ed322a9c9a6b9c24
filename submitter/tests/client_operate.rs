//! Operating a submission with only its id over a real socket, as a user would: the crate's
//! client (`logs` as a stream, `kill`, `list`) and the `submitter logs | kill | list` commands,
//! through mTLS and the service's whole layer stack, against kubesim.

use crate::operate_support;
use crate::service_support;
use crate::submit_support;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use futures::StreamExt;
use operate_support::{LINES, LINES_IMAGE, Operated, TICKER_IMAGE};
use service_support::{Ca, Dir, Server, start, tls};
use submission::api::{
    DriverPhase, ErrorCode, KillQuery, ListQuery, LogQuery, SubmitRequest, Target,
};
use submit_support::TESTER;
use submitter::tls::ClientAuth;
use submitter_client::{ClientConfig, SubmitterClient};

/// The service over mTLS, and the files of a client certificate of [`TESTER`].
struct Remote {
    s: Operated,
    server: Server,
    _dir: Dir,
    files: (PathBuf, PathBuf, PathBuf),
}

impl Remote {
    async fn start() -> Remote {
        let s = Operated::start().await;
        let ca = Ca::new("test ca");
        let dir = Dir::new();
        let (transport, _) = tls(
            dir.server_files(&ca, &ca.server("submitter")),
            ClientAuth::Required,
        );
        let server = start(s.app.clone(), transport).await;
        let identity = ca.client(TESTER, "spiffe://cluster.local/ns/ci/sa/tester", "tester");
        let files = dir.client_files("tester", &ca, &identity);
        Remote {
            s,
            server,
            _dir: dir,
            files,
        }
    }

    fn url(&self) -> String {
        format!("https://localhost:{}", self.server.addr.port())
    }

    fn client(&self) -> SubmitterClient {
        let mut config = ClientConfig::new(self.url());
        config.ca = Some(self.files.0.clone());
        config.cert = Some(self.files.1.clone());
        config.key = Some(self.files.2.clone());
        config.max_retries = 1;
        config.request_timeout = Duration::from_secs(10);
        SubmitterClient::new(config).unwrap()
    }

    /// `submitter ARGS` as the client, its output once it exits.
    async fn cli(&self, args: &[&str]) -> Output {
        let (ca, cert, key) = &self.files;
        tokio::process::Command::new(env!("CARGO_BIN_EXE_submitter"))
            .args(args)
            .args(["--url", &self.url()])
            .arg("--ca")
            .arg(ca)
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .env("RUST_LOG", "warn")
            .output()
            .await
            .unwrap()
    }
}

fn lines() -> String {
    (1..=LINES).map(|i| format!("driver line {i}\n")).collect()
}

#[tokio::test]
async fn the_client_reads_a_log_as_a_stream_kills_and_lists() {
    let r = Remote::start().await;
    let client = r.client();
    let request: SubmitRequest =
        serde_json::from_value(operate_support::request("remote-log", LINES_IMAGE, &[])).unwrap();
    let submitted = client.submit(&request).await.unwrap();
    r.s.wait_for_phase(
        &serde_json::to_value(&submitted).unwrap(),
        DriverPhase::Succeeded,
    )
    .await;
    let target = Target::Submission("remote-log".into());
    let mut stream = client.logs(&target, &LogQuery::default()).await.unwrap();
    let mut text = Vec::new();
    while let Some(chunk) = stream.next().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(String::from_utf8(text).unwrap(), lines());

    let page = client.list(&ListQuery::default()).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].submission_id.as_deref(), Some("remote-log"));
    assert_eq!(page.continue_token, None);

    let running: SubmitRequest =
        serde_json::from_value(operate_support::request("remote-kill", TICKER_IMAGE, &[])).unwrap();
    let submitted = client.submit(&running).await.unwrap();
    let answer = serde_json::to_value(&submitted).unwrap();
    r.s.wait_for_phase(&answer, DriverPhase::Running).await;
    let by_driver = Target::Driver {
        namespace: submitted.namespace.clone(),
        pod: submitted.driver_pod_name.clone(),
    };
    let grace = KillQuery {
        grace_period_seconds: Some(0),
    };
    let killed = client.kill(&by_driver, &grace).await.unwrap();
    assert_eq!(killed.phase, DriverPhase::Failed);
    assert_eq!(killed.reason.as_deref(), Some("Killed"));
    r.s.wait_gone(&answer).await;
    let error = match client.logs(&by_driver, &LogQuery::default()).await {
        Ok(_) => panic!("the log of a killed driver whose pod is gone was served"),
        Err(error) => error,
    };
    assert_eq!(error.code(), Some(ErrorCode::DriverGone));
    assert!(!error.retryable());
}

#[tokio::test]
async fn the_commands_print_a_log_a_list_and_a_kill_for_a_pipe() {
    let r = Remote::start().await;
    let done = r.s.submit_image("cli-log", LINES_IMAGE, &[]).await;
    r.s.wait_for_phase(&done, DriverPhase::Succeeded).await;
    let running = r.s.submit_image("cli-kill", TICKER_IMAGE, &[]).await;
    r.s.wait_for_phase(&running, DriverPhase::Running).await;

    let log = r.cli(&["logs", "cli-log"]).await;
    assert!(log.status.success(), "{log:?}");
    assert_eq!(String::from_utf8(log.stdout).unwrap(), lines());

    let driver = format!(
        "{}:{}",
        done["namespace"].as_str().unwrap(),
        done["driver_pod_name"].as_str().unwrap()
    );
    let by_driver = r.cli(&["logs", &driver]).await;
    assert!(by_driver.status.success(), "{by_driver:?}");
    assert_eq!(String::from_utf8(by_driver.stdout).unwrap(), lines());

    // In a pipe: one submission a line, tab-separated, in the list's order.
    let list = r.cli(&["list"]).await;
    assert!(list.status.success(), "{list:?}");
    let rows: Vec<Vec<String>> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .map(|line| line.split('\t').map(str::to_owned).collect())
        .collect();
    let summary: Vec<(&str, &str)> = rows
        .iter()
        .map(|row| (row[0].as_str(), row[2].as_str()))
        .collect();
    assert_eq!(summary, [("cli-kill", "Running"), ("cli-log", "Succeeded")]);

    let kill = r.cli(&["kill", "--grace-period", "0", "cli-kill"]).await;
    assert!(kill.status.success(), "{kill:?}");
    assert_eq!(
        String::from_utf8(kill.stdout).unwrap().trim(),
        format!(
            "{}:{}",
            running["namespace"].as_str().unwrap(),
            running["driver_pod_name"].as_str().unwrap()
        )
    );
    let refused = r.cli(&["logs", "never-was"]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("NOT_FOUND"),
        "{refused:?}"
    );
}
