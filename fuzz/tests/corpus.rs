//! Replays the committed corpora (`fuzz/corpus/<target>/`) and the inputs that once broke a
//! property (`fuzz/regressions/<target>/`, written by scripts/fuzz.sh) through each target's
//! property, as an ordinary test: a crash found by fuzzing stays a regression test.

use std::path::Path;

use fuzz::{TARGETS, inputs};

#[test]
fn every_corpus_and_regression_input_keeps_its_property() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (target, property) in TARGETS {
        let corpus = inputs(&root.join("corpus").join(target));
        assert!(!corpus.is_empty(), "{target} has no committed corpus");
        for path in corpus
            .iter()
            .chain(&inputs(&root.join("regressions").join(target)))
        {
            let data = std::fs::read(path).unwrap();
            let outcome = std::panic::catch_unwind(|| property(&data));
            assert!(
                outcome.is_ok(),
                "{target}: {} breaks its property",
                path.display()
            );
        }
    }
}

#[test]
fn the_seed_inputs_reach_the_checks_they_are_for() {
    // A seed that no longer parses would leave the target fuzzing only refusals.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let pi = std::fs::read_to_string(root.join("argv/pi")).unwrap();
    let args: Vec<String> = pi.split('\n').map(str::to_owned).collect();
    assert!(submission::builder::build_from_argv(&args, None, None, "s", 0, "root").is_ok());
    let policy = std::fs::read_to_string(root.join("policy/basic.yaml")).unwrap();
    assert!(submitter::policy::Policy::parse(&policy).is_ok());
    let body = std::fs::read(root.join("submit_body/templates.json")).unwrap();
    let request: submission::api::SubmitRequest = serde_json::from_slice(&body).unwrap();
    let built = submission::builder::build_from_argv(
        &request.spark_submit_args,
        request.driver_pod_template.as_ref(),
        request.executor_pod_template.as_ref(),
        &request.submission_id,
        0,
        "root",
    );
    assert!(built.is_ok(), "{:?}", built.err());
    let template = std::fs::read_to_string(root.join("template_merge/sidecar.json")).unwrap();
    let source: submission::render::TemplateSource = Ok(template);
    let rendered = submission::render::render(&args, Some(&source), None, "s", 0, "root");
    assert!(rendered.is_ok(), "{rendered:?}");
    let spec = std::fs::read(root.join("operator_spec/pi.json")).unwrap();
    let mut app =
        operator::crd::SparkApplication::new("pi", serde_json::from_slice(&spec).unwrap());
    app.metadata.namespace = Some("spark".into());
    app.metadata.uid = Some("00000000-0000-4000-8000-000000000001".into());
    app.status = Some(operator::crd::SparkApplicationStatus {
        submission_id: "s-1".into(),
        ..Default::default()
    });
    assert!(operator::argv::build_args(&app, "k8s://https://10.0.0.1:443").is_ok());
}
