//! One submission id, one driver, whatever the race: first submissions of one id into two
//! namespaces through two replicas, raced hundreds of times, make one driver and one 201 each
//! time, and the losers create nothing; an id whose driver was killed or succeeded stays bound
//! to it until its record expires; an id whose driver is gone without a record is freed by the
//! sweeper.

use crate::submit_support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use http::StatusCode;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kubesim::{Cluster, ClusterConfig};
use serde_json::{Value, json};
use submission::meta::labels;
use submission::naming::SubmissionId;
use submit_support::{Answer, POLICY, TESTER, args, send, submit_request};
use submitter::caches::WatchCaches;
use submitter::policy::{Access, Policy};
use submitter::record;
use submitter::service::{ServiceConfig, app};
use submitter::state::AppState;

/// The submitter's own namespace, where claims live.
const HOME: &str = "submitter-home";
/// The two namespaces the racing submissions go to.
const NAMESPACES: [&str; 2] = ["default", "team-b"];
/// Races run; each makes one driver.
const RACES: usize = 200;

/// Two replicas of the service (their own state and caches) on one kubesim.
struct Replicas {
    cluster: Cluster,
    states: Vec<AppState>,
    apps: Vec<Router>,
}

impl Replicas {
    async fn start() -> Replicas {
        let cluster = Cluster::start(ClusterConfig::default()).await.unwrap();
        let client = cluster.client().unwrap();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for name in [HOME, NAMESPACES[1]] {
            let namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
            namespaces
                .create(&PostParams::default(), &namespace)
                .await
                .unwrap();
        }
        let policy = Arc::new(Policy::parse(POLICY).unwrap());
        let mut states = Vec::new();
        let mut apps = Vec::new();
        for _ in 0..2 {
            let caches = WatchCaches::start(&client);
            caches.ready().await.unwrap();
            let state = AppState::new(client.clone(), Access::Policy(policy.clone()))
                .with_caches(caches)
                .with_record_namespace(HOME);
            apps.push(app(state.clone(), &ServiceConfig::default()));
            states.push(state);
        }
        Replicas {
            cluster,
            states,
            apps,
        }
    }

    fn client(&self) -> kube::Client {
        self.cluster.client().unwrap()
    }

    async fn submit(&self, replica: usize, body: &Value) -> Answer {
        send(&self.apps[replica], submit_request(body, "", TESTER)).await
    }

    /// Every object of `id` in `namespace` of `kind` (by the submission label), claims aside.
    async fn objects<K>(&self, namespace: &str, id: &str) -> Vec<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let hash = id.parse::<SubmissionId>().unwrap().label_value();
        Api::<K>::namespaced(self.client(), namespace)
            .list(&ListParams::default().labels(&format!("{}={hash}", labels::SUBMISSION_ID_HASH)))
            .await
            .unwrap()
            .items
    }

    /// The sweeper of `replica`, with no grace period, passing often.
    fn sweeper(&self, replica: usize) -> tokio::task::JoinHandle<()> {
        let state = &self.states[replica];
        tokio::spawn(submitter::sweep::run(
            self.client(),
            state.caches.clone().expect("replicas have caches"),
            state.in_flight.clone(),
            state.metrics.clone(),
            submitter::sweep::SweepConfig {
                grace: Duration::ZERO,
                interval: Duration::from_millis(50),
                ..Default::default()
            },
        ))
    }

    /// Waits (bounded, on the caches' events of `replica`) until the claim `name` is gone.
    async fn claim_gone(&self, replica: usize, name: &str) -> bool {
        let caches = self.states[replica]
            .caches
            .as_ref()
            .expect("replicas have caches");
        caches
            .wait_until(tokio::time::Instant::now() + Duration::from_secs(30), |c| {
                c.config_map(HOME, name).is_none()
            })
            .await
    }

    /// Holds every `verb` request on `resource` at kubesim for `millis` (until the latency
    /// rules are cleared), its request counters started afresh.
    fn hold(&self, verb: &str, resource: &str, millis: u64) {
        let control = &self.cluster.control;
        control.reset_counts();
        control.add_latency(kubesim::control::LatencyRule {
            verb: Some(verb.into()),
            resource: Some(resource.into()),
            millis,
        });
    }

    /// Waits until a `verb` request on `resource` has reached kubesim since [`Self::hold`].
    async fn arrived(&self, verb: &str, resource: &str) {
        self.cluster
            .control
            .counted(|counts| {
                counts
                    .iter()
                    .any(|c| c.verb == verb && c.resource == resource && c.count > 0)
            })
            .await;
    }

    /// The driver pods of `id`, in every namespace.
    async fn drivers(&self, id: &str) -> Vec<Pod> {
        let mut pods = Vec::new();
        for namespace in NAMESPACES {
            pods.extend(self.objects::<Pod>(namespace, id).await);
        }
        pods
    }
}

/// A submission of `id` into `namespace`, its driver running until stopped.
fn request(id: &str, namespace: &str) -> Value {
    let namespace = format!("spark.kubernetes.namespace={namespace}");
    json!({"submission_id": id, "spark_submit_args": args(&[
        "--conf", &namespace,
        "--conf", "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1",
    ])})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_first_submissions_of_one_id_make_one_driver_and_one_201() {
    let r = Replicas::start().await;
    for race in 0..RACES {
        let id = format!("race-{race}");
        // Every replica into every namespace, at once.
        let racers: Vec<(usize, &str)> = (0..2)
            .flat_map(|replica| NAMESPACES.map(|namespace| (replica, namespace)))
            .collect();
        let answers = futures::future::join_all(racers.iter().map(|(replica, namespace)| async {
            r.submit(*replica, &request(&id, namespace)).await
        }))
        .await;
        let created: Vec<&Answer> = answers
            .iter()
            .filter(|a| a.status == StatusCode::CREATED)
            .collect();
        assert_eq!(
            created.len(),
            1,
            "race {race}: {:?}",
            answers.iter().map(|a| &a.body).collect::<Vec<_>>()
        );
        let winner = &created[0].body;
        let winner_ref = format!(
            "{}:{}",
            winner["namespace"].as_str().unwrap(),
            winner["driver_pod_name"].as_str().unwrap()
        );
        for ((_, namespace), answer) in racers.iter().zip(&answers) {
            if answer.status == StatusCode::CREATED {
                continue;
            }
            if *namespace == winner["namespace"] {
                // The same submission: the same driver.
                assert_eq!(
                    answer.status,
                    StatusCode::OK,
                    "race {race}: {}",
                    answer.body
                );
                assert_eq!(answer.body["driver_pod_uid"], winner["driver_pod_uid"]);
            } else {
                assert_eq!(
                    answer.status,
                    StatusCode::CONFLICT,
                    "race {race}: {}",
                    answer.body
                );
                assert_eq!(answer.body["error_code"], "SUBMISSION_ID_CONFLICT");
                let message = answer.body["message"].as_str().unwrap();
                assert!(message.contains(&winner_ref), "race {race}: {message}");
            }
        }
        let drivers = r.drivers(&id).await;
        assert_eq!(drivers.len(), 1, "race {race}: {drivers:#?}");
        // The losing namespace has nothing of the id: the claim came before any object.
        let loser = NAMESPACES
            .into_iter()
            .find(|namespace| *namespace != winner["namespace"])
            .unwrap();
        assert!(
            r.objects::<ConfigMap>(loser, &id).await.is_empty(),
            "race {race}"
        );
        assert!(
            r.objects::<Service>(loser, &id).await.is_empty(),
            "race {race}"
        );
    }
}

#[tokio::test]
async fn a_killed_id_stays_bound_until_its_record_expires_then_it_is_free() {
    let r = Replicas::start().await;
    let first = r.submit(0, &request("bound-1", "default")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let pod = first.body["driver_pod_name"].as_str().unwrap().to_owned();
    let killed = send(
        &r.apps[0],
        submit_support::as_tester(
            http::Request::delete("/api/v1/spark-submit/bound-1?grace_period_seconds=0")
                .body(axum::body::Body::empty())
                .unwrap(),
        ),
    )
    .await;
    assert_eq!(killed.status, StatusCode::ACCEPTED, "{}", killed.body);
    // Both replicas, both namespaces: the killed driver keeps its id.
    for replica in 0..2 {
        let elsewhere = r.submit(replica, &request("bound-1", NAMESPACES[1])).await;
        assert_eq!(elsewhere.status, StatusCode::CONFLICT, "{}", elsewhere.body);
        assert!(
            elsewhere.body["message"]
                .as_str()
                .unwrap()
                .contains(&format!("default:{pod}"))
        );
        let again = r.submit(replica, &request("bound-1", "default")).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(again.body["driver_pod_uid"], first.body["driver_pod_uid"]);
    }
    assert!(
        r.drivers("bound-1")
            .await
            .iter()
            .all(|pod| pod.metadata.deletion_timestamp.is_some())
    );

    // Its window over (the record rewritten as a day older), the sweeper deletes the record
    // and the id can name a new driver.
    let claims: Api<ConfigMap> = Api::namespaced(r.client(), HOME);
    let name = record::claim_name("bound-1");
    let mut cm = claims.get(&name).await.unwrap();
    let old = record::read(&cm).unwrap();
    let day = k8s_openapi::jiff::SignedDuration::from_hours(24);
    let expired = record::Record {
        finished_at: old.finished_at - day,
        retain_until: old.retain_until - day - day,
        ..old
    };
    claims
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    cm = record::build(&expired, HOME).unwrap();
    claims.create(&PostParams::default(), &cm).await.unwrap();
    let sweeper = r.sweeper(1);
    let gone = r.claim_gone(1, &name).await;
    assert!(gone, "the expired record was not swept");
    let fresh = r.submit(0, &request("bound-1", NAMESPACES[1])).await;
    assert_eq!(fresh.status, StatusCode::CREATED, "{}", fresh.body);
    sweeper.abort();
}

#[tokio::test]
async fn an_id_whose_driver_is_gone_without_a_record_is_freed_by_the_sweeper() {
    let r = Replicas::start().await;
    let first = r.submit(0, &request("gone-1", "default")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let refused = r.submit(1, &request("gone-1", NAMESPACES[1])).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    // Deleted by hand (a failed driver cleaned up): no record says anything of it.
    let pods: Api<Pod> = Api::namespaced(r.client(), "default");
    pods.delete(
        first.body["driver_pod_name"].as_str().unwrap(),
        &DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    let sweeper = r.sweeper(0);
    let freed = r.claim_gone(1, &record::claim_name("gone-1")).await;
    assert!(
        freed,
        "the claim of a driver gone without a record was not swept"
    );
    let fresh = r.submit(1, &request("gone-1", NAMESPACES[1])).await;
    assert_eq!(fresh.status, StatusCode::CREATED, "{}", fresh.body);
    sweeper.abort();
}

#[tokio::test]
async fn a_succeeded_id_stays_bound_to_its_driver_through_its_record() {
    let r = Replicas::start().await;
    let recorder = tokio::spawn(submitter::status::run_recorder(
        r.client(),
        r.states[0].caches.clone().expect("replicas have caches"),
        submitter::status::RecordConfig {
            namespace: HOME.into(),
            retention: Duration::from_secs(3600),
        },
    ));
    // A driver that succeeds at once (kubesim's scripted container).
    let body = json!({"submission_id": "done-1", "spark_submit_args": args(&[
        "--conf", "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=0"])});
    let first = r.submit(0, &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let name = record::claim_name("done-1");
    let caches = r.states[1].caches.as_ref().expect("replicas have caches");
    let ended = caches
        .wait_until(tokio::time::Instant::now() + Duration::from_secs(30), |c| {
            c.config_map(HOME, &name)
                .and_then(|cm| record::read(&cm))
                .is_some_and(|record| record.outcome == record::Outcome::Succeeded)
        })
        .await;
    assert!(ended, "the claim did not become the success's record");
    // The claim became the record: one object for the id, not two.
    let objects = Api::<ConfigMap>::namespaced(r.client(), HOME)
        .list(&ListParams::default().labels(labels::RECORD))
        .await
        .unwrap();
    assert_eq!(objects.items.len(), 1, "{objects:#?}");
    let elsewhere = r.submit(1, &request("done-1", NAMESPACES[1])).await;
    assert_eq!(elsewhere.status, StatusCode::CONFLICT, "{}", elsewhere.body);
    recorder.abort();
}

/// The race a chaos soak found: a first attempt fails after its pod (an owner patch refused) and
/// rolls back, while a duplicate on the other replica completes that very pod and answers it.
/// The rollback must not take away a driver a duplicate has answered: the id keeps one driver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_keeps_a_driver_that_a_duplicate_on_another_replica_completed_and_answered() {
    let r = Replicas::start().await;
    let body = request("rolled-1", "default");
    let control = &r.cluster.control;
    control.add_fault(
        serde_json::from_value(json!({"verb": "patch", "resource": "configmaps",
            "namespace": "default", "code": 500}))
        .unwrap(),
    );
    // The first attempt's rollback delete of its pod is held at the API server, and the
    // duplicate arrives meanwhile.
    r.hold("delete", "pods", 3000);
    let first = r.submit(0, &body);
    let duplicate = async {
        r.arrived("delete", "pods").await;
        r.submit(1, &body).await
    };
    let (first, duplicate) = tokio::join!(first, duplicate);
    control.clear_latency();
    assert_eq!(
        first.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        first.body
    );
    let again = r.submit(0, &body).await;
    assert!(again.status.is_success(), "{}", again.body);
    if duplicate.status.is_success() {
        // Answered while the rollback was under way: that driver stays the id's.
        assert_eq!(
            again.body["driver_pod_uid"], duplicate.body["driver_pod_uid"],
            "the id was answered with two drivers: {} then {}",
            duplicate.body, again.body
        );
    }
    let drivers = r.drivers("rolled-1").await;
    assert_eq!(drivers.len(), 1, "{drivers:#?}");
    assert_eq!(
        drivers[0].metadata.uid.as_deref(),
        again.body["driver_pod_uid"].as_str()
    );
}

/// An owner patch answered 500 whose effect cannot be read back may have completed the driver,
/// and a duplicate may have answered it from its caches: the attempt answers a retryable error
/// and leaves the driver, and the retry answers that same driver.
#[tokio::test]
async fn an_attempt_that_cannot_read_whether_its_last_owner_patch_landed_leaves_the_driver() {
    let r = Replicas::start().await;
    let body = request("unread-1", "default");
    for rule in [
        json!({"verb": "patch", "resource": "configmaps", "namespace": "default",
            "code": 500, "when": "after"}),
        json!({"verb": "get", "resource": "configmaps", "namespace": "default", "code": 500}),
    ] {
        r.cluster
            .control
            .add_fault(serde_json::from_value(rule).unwrap());
    }
    let first = r.submit(0, &body).await;
    assert_eq!(
        first.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        first.body
    );
    let again = r.submit(1, &body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["duplicate_submission"], true, "{}", again.body);
    let drivers = r.drivers("unread-1").await;
    assert_eq!(drivers.len(), 1, "{drivers:#?}");
    assert_eq!(
        drivers[0].metadata.uid.as_deref(),
        again.body["driver_pod_uid"].as_str()
    );
}

/// A retry that found the id's claim, and whose pod's POST landed after a rolled-back attempt
/// gave the claim back, claims the id again for its pod. No driver stands without its claim:
/// the claim is what refuses a first submission of the id in another namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_made_after_its_claim_was_given_back_claims_the_id_again() {
    let r = Replicas::start().await;
    let body = request("regiven-1", "default");
    let first = r.submit(0, &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    // The driver goes and its claim stays, as an attempt rolling back leaves them for a moment.
    let pod_name = first.body["driver_pod_name"].as_str().unwrap().to_owned();
    Api::<Pod>::namespaced(r.client(), "default")
        .delete(&pod_name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let caches = r.states[1].caches.as_ref().expect("replicas have caches");
    let gone = caches
        .wait_until(tokio::time::Instant::now() + Duration::from_secs(30), |c| {
            c.pod("default", &pod_name).is_none()
        })
        .await;
    assert!(gone, "the caches never saw the driver go");
    r.hold("create", "pods", 1000);
    let retry = r.submit(1, &body);
    let give_back = async {
        // Once the retry's pod POST is held at the API server, the claim is given back.
        r.arrived("create", "pods").await;
        Api::<ConfigMap>::namespaced(r.client(), HOME)
            .delete(&record::claim_name("regiven-1"), &DeleteParams::default())
            .await
            .unwrap();
    };
    let (retry, ()) = tokio::join!(retry, give_back);
    r.cluster.control.clear_latency();
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    // The id is claimed again, for this driver: what racing first submissions meet.
    let claim = Api::<ConfigMap>::namespaced(r.client(), HOME)
        .get_opt(&record::claim_name("regiven-1"))
        .await
        .unwrap();
    assert!(claim.is_some(), "a driver stands without its claim");
    let elsewhere = r.submit(0, &request("regiven-1", NAMESPACES[1])).await;
    assert_eq!(elsewhere.status, StatusCode::CONFLICT, "{}", elsewhere.body);
    assert_eq!(r.drivers("regiven-1").await.len(), 1);
}
