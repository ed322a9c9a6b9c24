//! `submitter render`: the driver objects as one `v1` List, built by the same code path as the
//! service, without contacting a cluster. Pure: the caller reads the clock and the files.

use serde_json::{Value, json};

use crate::builder::{self, BuildError, ErrorCode};
use crate::template::{self, TemplateError, TemplateRole};

/// Where a template comes from: its text, or why it could not be read.
pub type TemplateSource = Result<String, String>;

/// HTTP status of an error code, as the contract's table gives it.
pub fn status_of(code: ErrorCode) -> u16 {
    match code {
        ErrorCode::BadRequest | ErrorCode::InvalidSparkSubmitArgs => 400,
        ErrorCode::InvalidPodTemplate => 422,
    }
}

/// The contract's error body (`submission_id`, `status`, `error_code`, `message`, `timestamp`).
pub fn error_body(submission_id: &str, error: &BuildError, now_ms: i64) -> Value {
    let code = error.error_code();
    json!({
        "submission_id": submission_id,
        "status": status_of(code),
        "error_code": code.as_str(),
        "message": error.message(),
        "timestamp": builder::java::rfc3339(now_ms),
    })
}

fn template(
    source: Option<&TemplateSource>,
    role: TemplateRole,
) -> Result<Option<Value>, BuildError> {
    let wrap = |source: TemplateError| match role {
        TemplateRole::Driver => BuildError::DriverTemplate { source },
        TemplateRole::Executor => BuildError::ExecutorTemplate { source },
    };
    match source {
        None => Ok(None),
        Some(Ok(text)) => template::from_yaml(text, role).map(Some).map_err(wrap),
        Some(Err(reason)) => Err(wrap(TemplateError::Unparseable {
            role,
            reason: reason.clone(),
        })),
    }
}

/// Builds the objects for `args` as a `v1` `List`, or the error body. `now_ms` is both the
/// submit time and the error timestamp.
pub fn render(
    args: &[String],
    driver_template: Option<&TemplateSource>,
    executor_template: Option<&TemplateSource>,
    submission_id: &str,
    now_ms: i64,
    spark_user: &str,
) -> Result<Value, Value> {
    let built = template(driver_template, TemplateRole::Driver).and_then(|driver| {
        let executor = template(executor_template, TemplateRole::Executor)?;
        builder::build_from_argv(
            args,
            driver.as_ref(),
            executor.as_ref(),
            submission_id,
            now_ms,
            spark_user,
        )
    });
    built
        .map(|built| json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": built.objects}))
        .map_err(|e| error_body(submission_id, &e, now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            "--master",
            "k8s://https://kube:6443",
            "--deploy-mode",
            "cluster",
            "--class",
            "Main",
            "--conf",
            "spark.kubernetes.container.image=img",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v.push("local:///app.jar".into());
        v
    }

    #[test]
    fn renders_a_list_of_the_objects() {
        let list = render(&argv(&[]), None, None, "id-1", 0, "root").unwrap();
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"][0]["kind"], "Pod");
    }

    #[test]
    fn bad_input_gives_the_contract_error_body() {
        let body = render(
            &argv(&["--driver-memory", "abc"]),
            None,
            None,
            "id-1",
            0,
            "root",
        )
        .unwrap_err();
        assert_eq!(body["error_code"], "INVALID_SPARK_SUBMIT_ARGS");
        assert_eq!(body["status"], 400);
        assert_eq!(body["submission_id"], "id-1");
        assert_eq!(body["timestamp"], "1970-01-01T00:00:00Z");
        let bad = Ok("spec: [".to_owned());
        let body = render(&argv(&[]), Some(&bad), None, "id-1", 0, "root").unwrap_err();
        assert_eq!(body["error_code"], "INVALID_POD_TEMPLATE");
        assert_eq!(body["status"], 422);
    }
}
