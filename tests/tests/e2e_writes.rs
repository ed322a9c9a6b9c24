//! The operator's writes per application (docs/operator.md, "Writes per application"): a burst
//! of applications whose drivers exit at once, run to completion by the operator and a real
//! submitter over mTLS on kubesim, costs at most six writes each (the UI Service, SUBMITTED,
//! COMPLETED and their events), counted by the user the operator acts as in kubesim's
//! authorization journal.

use crate::e2e_support;

use std::collections::BTreeMap;

use e2e_support::{Env, wait_until};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use operator::crd::ApplicationStateType as State;
use operator::state_machine::reasons;
use serde_json::json;

const APPS: usize = 50;

/// The aim of issue 27: at most this many operator writes per application.
const MAX_WRITES_PER_APP: f64 = 6.0;

/// The user the operator impersonates (in `system:masters`), so its requests are told from the
/// submitter's and the test's.
const OPERATOR_USER: &str = "e2e-writes-operator";

const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The operator's writes so far, by verb and resource.
fn operator_writes(env: &Env) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for row in env.cluster.control.authz() {
        if row.user == OPERATOR_USER && WRITES.contains(&row.verb.as_str()) {
            *out.entry((row.verb, row.resource)).or_default() += row.count;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_short_applications_costs_at_most_six_operator_writes_each() {
    let env = Env::start().await;
    let kubeconfig = env.cluster.kubeconfig();
    let anonymous = "  user: {}\n";
    assert!(kubeconfig.contains(anonymous), "{kubeconfig}");
    let kubeconfig = kubeconfig.replace(
        anonymous,
        &format!("  user: {{as: {OPERATOR_USER}, as-groups: [system:masters]}}\n"),
    );
    let client = kubesim::Cluster::client_from_kubeconfig(&kubeconfig)
        .await
        .unwrap();
    let _operator = env.operator_as(client, env.run_config()).await;
    // Its start (the CRD installed, the watches) is not per application.
    env.cluster.control.reset_authz();

    for i in 0..APPS {
        env.create_app(
            &format!("burst-{i:02}"),
            json!({"driver": {"annotations": {"kubesim.io/run-seconds": "0"}}}),
        )
        .await;
    }
    // The last writes of an application are its terminal status, then its events.
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    wait_until("every application completed, with its events", || {
        let (apps, events) = (env.apps(), events.clone());
        async move {
            let apps = apps.list(&ListParams::default()).await.ok()?.items;
            let completed = apps
                .iter()
                .filter(|app| {
                    app.status
                        .as_ref()
                        .is_some_and(|s| s.app_state.state == State::Completed)
                })
                .count();
            let recorded = events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some(reasons::COMPLETED))
                .count();
            (completed == APPS && recorded == APPS).then_some(())
        }
    })
    .await;

    let writes = operator_writes(&env);
    let total: u64 = writes.values().sum();
    let per_app = total as f64 / APPS as f64;
    assert!(
        per_app <= MAX_WRITES_PER_APP,
        "{per_app:.2} operator writes per application (aim: at most {MAX_WRITES_PER_APP}): {writes:?}"
    );
    // Every application still got its submission event and its UI Service: the count is low
    // because intermediate states were merged, not because something was left out.
    let count = |verb: &str, resource: &str| {
        writes
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(count("create", "services"), APPS as u64, "{writes:?}");
    assert!(
        count("update", "sparkapplications/status") >= 2 * APPS as u64,
        "{writes:?}"
    );
    let submitted = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reasons::SUBMITTED))
        .count();
    assert_eq!(submitted, APPS);
}
