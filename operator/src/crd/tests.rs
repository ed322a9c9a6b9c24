use serde_json::json;

use super::*;

/// A SparkApplication as the widely used operator stores it, status included.
const KUBEFLOW_APP: &str = r#"
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: spark-pi
  namespace: default
spec:
  type: Scala
  mode: cluster
  image: spark:4.0.0
  imagePullPolicy: IfNotPresent
  mainClass: org.apache.spark.examples.SparkPi
  mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
  arguments: ["5000"]
  sparkVersion: 4.0.0
  restartPolicy:
    type: OnFailure
    onFailureRetries: 3
    onFailureRetryInterval: 10
    onSubmissionFailureRetries: 5
    onSubmissionFailureRetryInterval: 20
  timeToLiveSeconds: 600
  driver:
    cores: 1
    coreLimit: 1200m
    memory: 512m
    labels: {version: 4.0.0}
    serviceAccount: spark-operator-spark
    template:
      spec:
        containers: [{name: spark-kubernetes-driver}]
  executor:
    instances: 1
    cores: 1
    memory: 512m
  dynamicAllocation:
    enabled: true
    maxExecutors: 5
status:
  applicationState: {state: ""}
  driverInfo: {}
  lastSubmissionAttemptTime: null
  terminationTime: null
  submissionAttempts: 0
"#;

#[test]
fn object_of_the_widely_used_operator_reads_and_new_is_its_empty_state() {
    let app: SparkApplication = yaml_serde::from_str(KUBEFLOW_APP).unwrap();
    assert_eq!(app.spec.app_type, SparkApplicationType::Scala);
    assert_eq!(app.spec.mode, Some(DeployMode::Cluster));
    let policy = app.spec.restart_policy.as_ref().unwrap();
    assert_eq!(policy.policy_type, Some(RestartPolicyType::OnFailure));
    assert_eq!(policy.on_submission_failure_retry_interval, Some(20));
    assert_eq!(app.spec.driver.pod.core_limit.as_deref(), Some("1200m"));
    assert_eq!(app.spec.executor.instances, Some(1));
    assert!(app.spec.driver.pod.template.is_some());
    let status = app.status.unwrap();
    assert_eq!(status.app_state.state, ApplicationStateType::New);
    assert_eq!(status.last_submission_attempt_time, None);
}

#[test]
fn suspend_states_are_kubeflows_and_states_we_do_not_have_read_as_unknown() {
    for (state, expected) in [
        ("SUSPENDED", ApplicationStateType::Suspended),
        ("SUSPENDING", ApplicationStateType::Suspending),
        ("RESUMING", ApplicationStateType::Resuming),
        ("SOMETHING_NEW", ApplicationStateType::Unknown),
    ] {
        let parsed: ApplicationState = serde_json::from_value(json!({"state": state})).unwrap();
        assert_eq!(parsed.state, expected, "{state}");
        if expected != ApplicationStateType::Unknown {
            assert_eq!(expected.as_str(), state);
        }
    }
}

#[test]
fn status_uses_the_json_names_of_v1beta2() {
    let status: SparkApplicationStatus = serde_json::from_value(json!({
        "sparkApplicationId": "spark-1",
        "submissionID": "id-1",
        "lastSubmissionAttemptTime": "2026-01-02T03:04:05Z",
        "terminationTime": "2026-01-02T04:04:05Z",
        "driverInfo": {"podName": "pi-driver", "webUIServiceName": "pi-ui-svc", "webUIPort": 4040},
        "applicationState": {"state": "FAILED", "errorMessage": "driver container failed"},
        "executorState": {"pi-exec-1": "COMPLETED"},
        "executionAttempts": 2,
        "submissionAttempts": 3
    }))
    .unwrap();
    assert_eq!(status.app_state.state, ApplicationStateType::Failed);
    assert_eq!(status.driver_info.pod_name, "pi-driver");
    assert_eq!(status.executor_state["pi-exec-1"], ExecutorState::Completed);
    let back = serde_json::to_value(&status).unwrap();
    assert_eq!(back["submissionID"], "id-1");
    assert_eq!(back["driverInfo"]["webUIServiceName"], "pi-ui-svc");
    assert_eq!(back["lastSubmissionAttemptTime"], "2026-01-02T03:04:05Z");
    assert_eq!(
        back["applicationState"]["errorMessage"],
        "driver container failed"
    );
    // Ours stay out of objects that do not use them.
    for ours in [
        "submissionPending",
        "specHash",
        "failureReason",
        "conditions",
    ] {
        assert!(back.get(ours).is_none(), "{ours}");
    }
}

#[test]
fn every_state_round_trips_by_its_name() {
    use ApplicationStateType::*;
    for state in [
        New,
        Submitted,
        Running,
        Completed,
        Failed,
        SubmissionFailed,
        PendingRerun,
        Invalidating,
        Succeeding,
        Failing,
        Unknown,
    ] {
        let text = serde_json::to_value(state).unwrap();
        assert_eq!(text, state.as_str());
        assert_eq!(
            serde_json::from_value::<ApplicationStateType>(text).unwrap(),
            state
        );
    }
}

#[test]
fn failed_pods_are_classified_by_reason() {
    let cases = [
        (Some("Evicted"), None, FailureReason::Evicted),
        (Some("NodeLost"), None, FailureReason::NodeLost),
        (Some("Terminated"), None, FailureReason::NodeLost),
        (Some("OutOfcpu"), None, FailureReason::AdmissionRejected),
        (None, Some("Error"), FailureReason::ApplicationError),
        (None, Some("OOMKilled"), FailureReason::ApplicationError),
        (
            None,
            Some("ContainerStatusUnknown"),
            FailureReason::NodeLost,
        ),
        (None, None, FailureReason::ApplicationError),
    ];
    for (pod, container, expected) in cases {
        assert_eq!(
            FailureReason::of_failed_pod(pod, container),
            expected,
            "{pod:?} {container:?}"
        );
    }
    assert!(FailureReason::Evicted.is_infrastructure());
    assert!(FailureReason::DriverStartTimeout.is_infrastructure());
    assert!(!FailureReason::ApplicationError.is_infrastructure());
    assert!(!FailureReason::DriverReadyTimeout.is_infrastructure());
    assert!(!FailureReason::SubmissionRejected.is_infrastructure());
    assert!(FailureReason::is_image_pull_waiting_reason(
        "ImagePullBackOff"
    ));
}

#[test]
fn crd_renders() {
    let yaml = crd_yaml().unwrap();
    assert!(yaml.contains("name: sparkapplications.sparkoperator.k8s.io"));
}
