//! A driver's log as the API server's pod log options shape it: followed while the driver runs
//! and ended when it exits, a tail of exactly N lines, a byte limit, `previous` refused by the
//! API server when there is no previous instance, a slow reader that slows only its own stream,
//! shutdown that does not wait for followers, and a hundred followers at once with the
//! submitter's memory measured.

use crate::operate_support;
use crate::service_support;
use crate::submit_support;

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::StatusCode;
use http_body_util::BodyExt;
use operate_support::{LINES, LINES_IMAGE, Operated, TICKER_IMAGE, driver_of};
use submission::api::DriverPhase;
use submission::driver::observe_driver;
use submit_support::TESTER;

/// Reads `body` until `text` has arrived; what arrived.
async fn read_until(
    body: &mut (impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Unpin),
    text: &str,
) -> String {
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if seen.contains(text) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "{text:?} never came; got {seen:?}");
    seen
}

fn stream_of(
    response: http::Response<axum::body::Body>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    response
        .into_body()
        .into_data_stream()
        .map(|chunk| chunk.map_err(std::io::Error::other))
}

#[tokio::test]
async fn a_followed_log_shows_lines_while_the_driver_runs_and_ends_when_it_exits() {
    let s = Operated::start().await;
    let answer = s.submit_image("follow-1", TICKER_IMAGE, &[]).await;
    let (namespace, pod) = driver_of(&answer);
    // Opened before the driver runs: the service waits for it to start.
    let response = s
        .open("/api/v1/spark-submit/follow-1/log?follow=true", TESTER)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = stream_of(response);
    read_until(&mut body, "tick 3\n").await;
    let running = s
        .caches
        .pod(&namespace, &pod)
        .is_some_and(|pod| observe_driver(&pod).phase == DriverPhase::Running);
    assert!(running, "lines arrived only once the driver had ended");
    let killed = s
        .delete(
            "/api/v1/spark-submit/follow-1?grace_period_seconds=0",
            TESTER,
        )
        .await;
    assert_eq!(killed.status, StatusCode::ACCEPTED);
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = body.next().await {
            chunk.expect("the stream ends cleanly, not broken off");
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the followed stream did not end with its driver"
    );
}

#[tokio::test]
async fn a_tail_is_exactly_the_last_lines_and_a_limit_the_first_bytes() {
    let s = Operated::start().await;
    let answer = s.submit_image("tail-1", LINES_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Succeeded).await;
    let tail = s
        .get("/api/v1/spark-submit/tail-1/log?tail_lines=5", TESTER)
        .await;
    assert_eq!(tail.status, StatusCode::OK, "{}", tail.body);
    let expected: String = (LINES - 4..=LINES)
        .map(|i| format!("driver line {i}\n"))
        .collect();
    assert_eq!(tail.body.as_str().unwrap(), expected);
    let none = s
        .get("/api/v1/spark-submit/tail-1/log?tail_lines=0", TESTER)
        .await;
    assert_eq!(none.body.as_str().unwrap(), "");
    let limited = s
        .get("/api/v1/spark-submit/tail-1/log?limit_bytes=14", TESTER)
        .await;
    assert_eq!(limited.body.as_str().unwrap(), "driver line 1\n");
    let stamped = s
        .get(
            "/api/v1/spark-submit/tail-1/log?tail_lines=1&timestamps=true",
            TESTER,
        )
        .await;
    let line = stamped.body.as_str().unwrap();
    let (stamp, text) = line.split_once(' ').unwrap();
    assert!(
        stamp.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "{line}"
    );
    assert_eq!(text, format!("driver line {LINES}\n"));
}

#[tokio::test]
async fn previous_without_a_restart_is_the_api_servers_400() {
    let s = Operated::start().await;
    let answer = s.submit_image("previous-1", LINES_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Succeeded).await;
    let refused = s
        .get("/api/v1/spark-submit/previous-1/log?previous=true", TESTER)
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(refused.body["error_code"], "BAD_REQUEST");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("previous terminated container"),
        "{}",
        refused.body
    );
}

/// Resident memory of process `pid`, KiB: (now, peak).
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// How many followers the memory test holds open at once.
const FOLLOWERS: usize = 100;

#[tokio::test]
async fn a_hundred_followed_logs_at_once_cost_the_submitter_little_memory() {
    use kubesim::{Cluster, ClusterConfig};
    use submission::api::{KillQuery, LogQuery, SubmitRequest, Target};
    use submit_support::ServeProcess;
    use submitter::caches::WatchCaches;
    use submitter_client::{ClientConfig, SubmitterClient};

    let cluster = Cluster::start(ClusterConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let serve = ServeProcess::start(&[
        "--insecure-dev".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "--record-namespace".as_ref(),
        "default".as_ref(),
        "--max-log-streams-per-identity".as_ref(),
        "200".as_ref(),
    ])
    .await;
    let pid = serve.child.id().unwrap();
    let mut config = ClientConfig::new(format!("http://{}", serve.addr));
    config.request_timeout = Duration::from_secs(30);
    config.max_retries = 20;
    config.initial_backoff = Duration::from_millis(100);
    let client = SubmitterClient::new(config).unwrap();
    client
        .wait_for_connection(Duration::from_secs(30))
        .await
        .unwrap();
    let caches = WatchCaches::start(&cluster.client().unwrap());
    caches.ready().await.unwrap();

    // Drivers that run until killed, each writing a line a second (kubesim's scripted
    // containers: no process per driver on the test machine).
    let ids: Vec<String> = (0..FOLLOWERS).map(|i| format!("follower-{i:03}")).collect();
    let mut drivers = Vec::new();
    for id in &ids {
        let request: SubmitRequest = serde_json::from_value(serde_json::json!({
            "submission_id": id,
            "spark_submit_args": submit_support::args(&[
                "--conf", "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1"]),
        }))
        .unwrap();
        let answer = client.submit(&request).await.unwrap();
        drivers.push((answer.namespace, answer.driver_pod_name));
    }
    let all_running = caches
        .wait_until(tokio::time::Instant::now() + Duration::from_secs(60), |c| {
            drivers.iter().all(|(namespace, pod)| {
                c.pod(namespace, pod)
                    .is_some_and(|pod| observe_driver(&pod).phase == DriverPhase::Running)
            })
        })
        .await;
    assert!(all_running, "the drivers never all ran");
    let (before, _) = memory_kib(pid);

    let follow = LogQuery {
        follow: Some(true),
        ..LogQuery::default()
    };
    let mut streams = Vec::new();
    for id in &ids {
        let target = Target::Submission(id.clone());
        streams.push(client.logs(&target, &follow).await.unwrap());
    }
    // Every follower sees its driver's progress while it runs.
    let mut seen = Vec::new();
    for stream in &mut streams {
        let mut text = String::new();
        while !text.contains("running for 2s") {
            let chunk = tokio::time::timeout(Duration::from_secs(60), stream.next())
                .await
                .expect("a follower waited a minute for a line")
                .expect("a follower ended before its driver")
                .unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        seen.push(text);
    }
    let (during, peak) = memory_kib(pid);
    let metrics = reqwest_metrics(serve.addr).await;
    assert!(
        metrics.contains(&format!("submitter_log_streams_open {FOLLOWERS}")),
        "{metrics}"
    );

    // Killed, every driver's stream ends, cleanly.
    let now = KillQuery {
        grace_period_seconds: Some(0),
    };
    for id in &ids {
        client
            .kill(&Target::Submission(id.clone()), &now)
            .await
            .unwrap();
    }
    for mut stream in streams {
        let ended = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(chunk) = stream.next().await {
                chunk.unwrap();
            }
        })
        .await;
        assert!(ended.is_ok(), "a follower outlived its killed driver");
    }
    let growth = during.saturating_sub(before);
    println!(
        "submitter VmRSS: {before} KiB with {FOLLOWERS} running drivers, {during} KiB with \
         {FOLLOWERS} followed logs open (+{growth} KiB, {} KiB per stream), peak {peak} KiB",
        growth / FOLLOWERS as u64
    );
    // A generous ceiling: what a stream holds is its connections' buffers, not its log.
    assert!(
        growth < 64 * 1024,
        "{FOLLOWERS} followers cost {growth} KiB"
    );
}

/// The `/metrics` text of a `--insecure-dev` submitter at `addr`.
async fn reqwest_metrics(addr: std::net::SocketAddr) -> String {
    use hyper_util::rt::TokioIo;
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get("/metrics")
        .header("host", "submitter")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

/// The state of `submitter serve --insecure-dev` without a policy: over a plain socket, every
/// client is `*` and allowed everything.
fn insecure_dev(mut state: submitter::state::AppState) -> submitter::state::AppState {
    state.access = submitter::policy::Access::InsecureDev(None);
    state
}

/// A client of the service at `addr` (plain HTTP, `InsecureDev` transport).
fn plain_client(addr: std::net::SocketAddr) -> submitter_client::SubmitterClient {
    let mut config = submitter_client::ClientConfig::new(format!("http://{addr}"));
    config.request_timeout = Duration::from_secs(30);
    config.max_retries = 1;
    submitter_client::SubmitterClient::new(config).unwrap()
}

/// The `submitter_log_bytes_streamed_total` of `s`.
fn bytes_streamed(s: &Operated) -> usize {
    s.state
        .metrics
        .encode()
        .lines()
        .find_map(|line| line.strip_prefix("submitter_log_bytes_streamed_total "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_slow_reader_slows_only_its_own_stream_and_loses_nothing() {
    use operate_support::{FLOOD_IMAGE, FLOOD_LINE_BYTES, FLOOD_LINES};
    use submission::api::{LogQuery, Target};
    let s = Operated::start_with(insecure_dev).await;
    let server =
        service_support::start(s.app.clone(), submitter::tls::Transport::InsecureDev).await;
    let client = plain_client(server.addr);
    let answer = s.submit_image("flood-1", FLOOD_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Running).await;
    let follow = LogQuery {
        follow: Some(true),
        ..LogQuery::default()
    };
    let target = Target::Submission("flood-1".into());
    let total = FLOOD_LINES * FLOOD_LINE_BYTES;
    let last = format!("flood line {} ", 100_000 + FLOOD_LINES);
    // The slow reader: opened, then not read at all while the other reads everything.
    let mut slow = client.logs(&target, &follow).await.unwrap();
    let mut fast = client.logs(&target, &follow).await.unwrap();
    let mut read = 0;
    let mut tail = String::new();
    while !tail.contains(&last) {
        let chunk = tokio::time::timeout(Duration::from_secs(60), fast.next())
            .await
            .expect("the fast reader was held up")
            .expect("the fast reader's stream ended")
            .unwrap();
        read += chunk.len();
        tail = String::from_utf8_lossy(&chunk).into_owned();
    }
    assert_eq!(read, total, "the fast reader got the whole log");
    // What the service has passed on for the slow reader: only what its connection took, that
    // is the kernel's socket buffers (the send buffer can grow to `tcp_wmem`'s maximum) and the
    // HTTP server's write buffer; not the log.
    let held = bytes_streamed(&s) - read;
    let send_buffer_max: usize = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|text| text.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(4 << 20);
    assert!(
        held < send_buffer_max + (2 << 20),
        "{held} of {total} bytes went out to a reader that read none"
    );
    assert!(
        held < total / 2,
        "the flood is too small to tell: {held} of {total}"
    );
    // Read now, the slow stream has every line, in order.
    let mut text = Vec::new();
    while text.len() < total {
        let chunk = tokio::time::timeout(Duration::from_secs(60), slow.next())
            .await
            .expect("the slow reader's log stopped")
            .expect("the slow reader's stream ended early")
            .unwrap();
        text.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(text).unwrap();
    let numbers: Vec<usize> = text
        .lines()
        .map(|line| line.split(' ').nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), FLOOD_LINES);
    assert!(numbers.windows(2).all(|pair| pair[1] == pair[0] + 1));
    println!("held for a reader that read nothing: {held} of {total} bytes");
}

#[tokio::test]
async fn shutdown_ends_a_followed_log_cleanly_instead_of_waiting_for_it() {
    use submission::api::{LogQuery, Target};
    use submitter::tls::{ServeOptions, Transport, serve};
    let s = Operated::start_with(insecure_dev).await;
    let answer = s.submit_image("shutdown-1", TICKER_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Running).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = ServeOptions {
        // Longer than the test may take: only ending the follower lets the drain finish.
        drain_timeout: Duration::from_secs(3600),
        ..ServeOptions::default()
    };
    let shutdown = s.state.log_streams.clone().close_on(async {
        let _ = stopped.await;
    });
    let serving = tokio::spawn(serve(
        listener,
        Transport::InsecureDev,
        s.app.clone(),
        options,
        shutdown,
    ));
    let client = plain_client(addr);
    let follow = LogQuery {
        follow: Some(true),
        ..LogQuery::default()
    };
    let mut stream = client
        .logs(&Target::Submission("shutdown-1".into()), &follow)
        .await
        .unwrap();
    let mut text = String::new();
    while !text.contains("tick 2\n") {
        let chunk = stream.next().await.unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    stop.send(()).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(chunk) = stream.next().await {
            chunk.expect("the stream ends cleanly, not broken off");
        }
    })
    .await;
    assert!(ended.is_ok(), "the follower was not ended at shutdown");
    tokio::time::timeout(Duration::from_secs(60), serving)
        .await
        .expect("the service waited for its follower")
        .unwrap();
    // The driver itself runs on: shutting the service down stops no driver.
    let (namespace, pod) = driver_of(&answer);
    assert!(
        s.caches
            .pod(&namespace, &pod)
            .is_some_and(|pod| observe_driver(&pod).phase == DriverPhase::Running)
    );
}
