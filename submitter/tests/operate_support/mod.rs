//! Shared by the tests of the routes that operate a submission by its id (log, kill, list): a
//! kubesim whose images run real shell scripts, the service as `submitter serve` runs it (synced
//! watch caches), requests as one identity or another, and waits on the caches' events.
#![allow(dead_code)] // each test crate uses a different part

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::Request;
use kubesim::kubelet::ImageCommand;
use kubesim::{Cluster, ClusterConfig};
use serde_json::{Value, json};
use submission::api::DriverPhase;
use submission::driver::observe_driver;
use submitter::caches::WatchCaches;
use submitter::policy::{Access, Policy};
use submitter::service::{ServiceConfig, app};
use submitter::state::AppState;

use crate::submit_support::{
    Answer, POLICY, TESTER, args, send, submit_request, verified_identity,
};

/// Prints `driver line 1` to `driver line 50`, then exits 0.
pub const LINES_IMAGE: &str = "local/lines:1";
/// How many lines [`LINES_IMAGE`] prints.
pub const LINES: usize = 50;
/// Prints `tick N` every 50 ms until it is stopped.
pub const TICKER_IMAGE: &str = "local/ticker:1";
/// Prints [`FLOOD_LINES`] lines of [`FLOOD_LINE_BYTES`] bytes as fast as it can, then waits.
pub const FLOOD_IMAGE: &str = "local/flood:1";
pub const FLOOD_LINES: usize = 200_000;
/// `flood line NNNNNN ` and padding to 100 bytes with its newline.
pub const FLOOD_LINE_BYTES: usize = 100;
/// Prints `sidecar line`, then waits.
pub const SIDECAR_IMAGE: &str = "local/sidecar:1";

fn shell(script: &str) -> ImageCommand {
    // The container's arguments (Spark's `driver --properties-file …`) follow the script as
    // its positional parameters, which it ignores.
    ImageCommand {
        command: vec!["sh".into(), "-c".into(), script.into()],
        env: BTreeMap::new(),
    }
}

/// The service on a kubesim with the shell images, its caches synced.
pub struct Operated {
    pub cluster: Cluster,
    pub state: AppState,
    pub app: Router,
    pub caches: WatchCaches,
}

impl Operated {
    pub async fn start() -> Operated {
        Operated::start_with(|state| state).await
    }

    /// With the state changed by `adjust` (limits, waits) before the app is built.
    pub async fn start_with(adjust: impl FnOnce(AppState) -> AppState) -> Operated {
        let images = BTreeMap::from([
            (
                LINES_IMAGE.to_owned(),
                shell(&format!(
                    "i=1; while [ $i -le {LINES} ]; do echo \"driver line $i\"; i=$((i+1)); done"
                )),
            ),
            (
                TICKER_IMAGE.to_owned(),
                shell("i=1; while true; do echo \"tick $i\"; i=$((i+1)); sleep 0.05; done"),
            ),
            (
                FLOOD_IMAGE.to_owned(),
                shell(&format!(
                    "pad=$(printf '%0{}d' 0); i=100001; end=$((100000 + {FLOOD_LINES})); \
                     while [ $i -le $end ]; do echo \"flood line $i $pad\"; i=$((i+1)); done; \
                     exec sleep 3600",
                    FLOOD_LINE_BYTES - "flood line 100001 \n".len()
                )),
            ),
            (
                SIDECAR_IMAGE.to_owned(),
                shell("echo 'sidecar line'; exec sleep 3600"),
            ),
        ]);
        let cluster = Cluster::start(ClusterConfig {
            images,
            ..ClusterConfig::default()
        })
        .await
        .unwrap();
        let client = cluster.client().unwrap();
        let policy = Arc::new(Policy::parse(POLICY).unwrap());
        let caches = WatchCaches::start(&client);
        let state = adjust(
            AppState::new(client, Access::Policy(policy))
                .with_caches(caches.clone())
                .with_record_namespace("default"),
        );
        let app = app(state.clone(), &ServiceConfig::default());
        tokio::time::timeout(Duration::from_secs(10), caches.ready())
            .await
            .expect("caches sync within 10 s")
            .unwrap();
        Operated {
            cluster,
            state,
            app,
            caches,
        }
    }

    pub async fn submit(&self, body: &Value) -> Answer {
        send(&self.app, submit_request(body, "", TESTER)).await
    }

    /// Submits `id` running `image` (plus `extra` arguments); the answer must be 201.
    pub async fn submit_image(&self, id: &str, image: &str, extra: &[&str]) -> Value {
        let body = request(id, image, extra);
        let answer = self.submit(&body).await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        answer.body
    }

    pub async fn get(&self, path: &str, identity: &str) -> Answer {
        send(&self.app, as_identity(Request::get(path), identity)).await
    }

    pub async fn delete(&self, path: &str, identity: &str) -> Answer {
        send(&self.app, as_identity(Request::delete(path), identity)).await
    }

    /// The response to a GET, its body not read yet (a stream).
    pub async fn open(&self, path: &str, identity: &str) -> http::Response<Body> {
        use tower::ServiceExt;
        self.app
            .clone()
            .oneshot(as_identity(Request::get(path), identity))
            .await
            .unwrap()
    }

    /// Waits (bounded, on the caches' events) until `done` holds of the pod `namespace/pod`
    /// (`None` when the cache has no such pod).
    pub async fn wait_for_pod(
        &self,
        namespace: &str,
        pod: &str,
        what: &str,
        done: impl Fn(Option<&k8s_openapi::api::core::v1::Pod>) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let came = self
            .caches
            .wait_until(deadline, |caches| {
                done(caches.pod(namespace, pod).as_deref())
            })
            .await;
        assert!(came, "{namespace}/{pod} never {what}");
    }

    /// Waits until the driver of `answer` (a submit answer) is in `phase`.
    pub async fn wait_for_phase(&self, answer: &Value, phase: DriverPhase) {
        let (namespace, pod) = driver_of(answer);
        self.wait_for_pod(&namespace, &pod, &format!("reached {phase:?}"), |pod| {
            pod.is_some_and(|pod| observe_driver(pod).phase == phase)
        })
        .await;
    }

    /// Waits until the pod of `answer` is gone from the cache.
    pub async fn wait_gone(&self, answer: &Value) {
        let (namespace, pod) = driver_of(answer);
        self.wait_for_pod(&namespace, &pod, "went away", |pod| pod.is_none())
            .await;
    }
}

/// (namespace, pod) of a submit answer.
pub fn driver_of(answer: &Value) -> (String, String) {
    (
        answer["namespace"].as_str().unwrap().to_owned(),
        answer["driver_pod_name"].as_str().unwrap().to_owned(),
    )
}

/// A submission of `id` running `image` in `default`.
pub fn request(id: &str, image: &str, extra: &[&str]) -> Value {
    let image = format!("spark.kubernetes.container.image={image}");
    let mut all = vec!["--conf", image.as_str()];
    all.extend_from_slice(extra);
    json!({"submission_id": id, "spark_submit_args": args(&all)})
}

fn as_identity(builder: http::request::Builder, identity: &str) -> Request<Body> {
    let mut request = builder.body(Body::empty()).unwrap();
    request.extensions_mut().insert(verified_identity(identity));
    request
}
