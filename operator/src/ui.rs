//! The Spark UI as the widely used operator exposes it (`web_ui.go`, `driveringress.go`): a
//! `<app>-ui-svc` Service by default (shaped by `sparkUIOptions`), an Ingress for it when the
//! operator has an ingress URL format, and a Service (plus an Ingress when it has a URL format)
//! for each of `driverIngressOptions`. Every object is owned by the application, so garbage
//! collection removes it with the application.
//!
//! They are made after the driver (an ingress URL may name the Spark application id, which comes
//! with the submitter's answer). What the spec asks for ([`Planned::required`]) the run needs;
//! what the operator adds on its own (the UI Service and its Ingress) it can run without.
//!
//! The driver's PodDisruptionBudget (`driverPodDisruptionBudget: true`, [`driver_pdb`], as
//! kubeflow's `driver_pdb.go`) is built here too; it is made before the driver, with what else
//! the driver depends on (`crate::dependencies`).
//!
//! Pure: [`plan`] builds the objects; the reconciler creates them and reads back the UI
//! Service's cluster IP for `status.driverInfo.webUIAddress`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressTLS};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::crd::SparkApplication;
use crate::labels::{self, CREATED_BY_LABEL};
use crate::names::driver_pod_name;

/// Spark's UI port, and the conf that moves it.
pub const DEFAULT_UI_PORT: i32 = 4040;
pub const UI_PORT_CONF: &str = "spark.ui.port";
/// The UI Service's port name unless `sparkUIOptions.servicePortName` sets one.
pub const DEFAULT_UI_PORT_NAME: &str = "spark-driver-ui-port";

/// What `operator run` was told about the UI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSettings {
    /// Create `<app>-ui-svc` (kubeflow's `--enable-ui-service`, on by default).
    pub ui_service: bool,
    /// `--ingress-url-format`, e.g. `{{$appName}}.spark.example.com` or
    /// `example.com/{{$appNamespace}}/{{$appName}}`: an Ingress for the UI Service.
    pub ingress_url_format: Option<String>,
    /// `--ingress-class-name` of every Ingress.
    pub ingress_class_name: Option<String>,
}

impl Default for UiSettings {
    fn default() -> UiSettings {
        UiSettings {
            ui_service: true,
            ingress_url_format: None,
            ingress_class_name: None,
        }
    }
}

/// An object to create, and whether the run needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned<T> {
    pub object: T,
    /// The spec asks for it (`driverIngressOptions`: clients reach the driver through it), so
    /// the run cannot go on without it. Otherwise the operator adds it (the UI Service and its
    /// Ingress), and the run goes on without it, with a warning condition.
    pub required: bool,
}

/// The objects to create, and what the status says of them.
#[derive(Debug, Clone, PartialEq)]
pub struct UiPlan {
    pub services: Vec<Planned<Service>>,
    pub ingresses: Vec<Planned<Ingress>>,
    /// The UI Service's name and port, when one is made.
    pub ui_service: Option<(String, i32)>,
    /// The UI Ingress's name and URL, when one is made.
    pub ui_ingress: Option<(String, String)>,
}

impl UiPlan {
    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.ingresses.is_empty()
    }
}

/// The spec's UI settings cannot be honoured.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum UiError {
    #[error("driverIngressOptions[{index}] has no servicePort")]
    MissingServicePort { index: usize },
    #[error("the ingress URL {url:?} has no host")]
    IngressUrl { url: String },
}

impl UiError {
    /// A stable name for events and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            UiError::MissingServicePort { .. } => "missing_service_port",
            UiError::IngressUrl { .. } => "ingress_url",
        }
    }
}

/// Whether `app` gets any UI object under `settings`.
pub fn wanted(app: &SparkApplication, settings: &UiSettings) -> bool {
    settings.ui_service || !app.spec.driver_ingress_options.is_empty()
}

/// `<name>-<suffix>`, kept within 63 characters (a DNS label) by cutting the name and adding a
/// hash of the whole, as kubeflow's `generateName` does (its hash is MD5, ours SHA-256).
pub fn object_name(name: &str, suffix: &str) -> String {
    let preferred = format!("{name}-{suffix}");
    if preferred.len() <= 63 {
        return preferred;
    }
    let keep = 63 - suffix.len() - 10;
    let hash = submission::naming::hex(&Sha256::digest(preferred.as_bytes())[..4]);
    let cut: String = name.chars().take(keep).collect();
    format!("{cut}-{hash}-{suffix}")
}

/// The UI port Spark listens on: `spark.ui.port`, else 4040.
fn target_port(app: &SparkApplication) -> i32 {
    app.spec
        .spark_conf
        .get(UI_PORT_CONF)
        .and_then(|p| p.parse().ok())
        .unwrap_or(DEFAULT_UI_PORT)
}

/// The ingress URL for `app` from a format: `{{$appName}}`, `{{$appNamespace}}` and
/// `{{$appId}}` replaced, `http://` assumed. Returns (URL, host, path).
pub fn ingress_url(
    format: &str,
    app: &SparkApplication,
) -> Result<(String, String, String), UiError> {
    let app_id = app
        .status
        .as_ref()
        .map(|s| s.spark_application_id.as_str())
        .unwrap_or("");
    let mut url = format.to_owned();
    for (var, value) in [
        ("appName", app.metadata.name.as_deref().unwrap_or("")),
        (
            "appNamespace",
            app.metadata.namespace.as_deref().unwrap_or(""),
        ),
        ("appId", app_id),
    ] {
        url = replace_var(&url, var, value);
    }
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme.to_owned(), rest.to_owned()),
        None => ("http".to_owned(), url.clone()),
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (rest[..i].to_owned(), rest[i..].to_owned()),
        None => (rest, String::new()),
    };
    if host.is_empty() {
        return Err(UiError::IngressUrl { url });
    }
    Ok((format!("{scheme}://{host}{path}"), host, path))
}

/// Replaces `{{ $var }}` (spaces allowed inside the braces, as kubeflow's pattern does).
fn replace_var(text: &str, var: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let inner = rest[start + 2..start + len].trim();
        out.push_str(&rest[..start]);
        if inner == format!("${var}") {
            out.push_str(value);
        } else {
            out.push_str(&rest[start..start + len + 2]);
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

fn owner(app: &SparkApplication) -> Value {
    json!([{
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "name": app.metadata.name,
        "uid": app.metadata.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

struct ServiceShape<'a> {
    name: String,
    port_name: String,
    port: i32,
    target_port: i32,
    service_type: Option<&'a str>,
    annotations: &'a BTreeMap<String, String>,
    labels: &'a BTreeMap<String, String>,
}

fn service(app: &SparkApplication, shape: ServiceShape<'_>) -> Service {
    let name = app.metadata.name.as_deref().unwrap_or("");
    // kubeflow: the spec's labels replace the default ones; its own label is always added.
    let mut service_labels: BTreeMap<String, String> = if shape.labels.is_empty() {
        BTreeMap::from([(labels::APP_NAME.to_owned(), name.to_owned())])
    } else {
        shape.labels.clone()
    };
    service_labels.insert(CREATED_BY_LABEL.to_owned(), "true".to_owned());
    let mut metadata = json!({
        "name": shape.name,
        "namespace": app.metadata.namespace,
        "labels": service_labels,
        "ownerReferences": owner(app),
    });
    if !shape.annotations.is_empty() {
        metadata["annotations"] = json!(shape.annotations);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": shape.service_type.unwrap_or("ClusterIP"),
            "selector": {labels::APP_NAME: name, "spark-role": "driver"},
            "ports": [{"name": shape.port_name, "port": shape.port,
                       "targetPort": shape.target_port, "protocol": "TCP"}],
        },
    }))
    .expect("a Service built from plain fields always decodes")
}

fn ingress(
    app: &SparkApplication,
    name: String,
    (service_name, service_port): (&str, i32),
    (host, path): (&str, &str),
    annotations: &BTreeMap<String, String>,
    tls: &[IngressTLS],
    class: Option<&str>,
) -> Ingress {
    let mut annotations = annotations.clone();
    let rule_path = if path.is_empty() || path == "/" {
        path.to_owned()
    } else {
        // As kubeflow: the path prefix is cut by nginx's rewrite.
        annotations.insert(
            "nginx.ingress.kubernetes.io/rewrite-target".to_owned(),
            "/$2".to_owned(),
        );
        format!("{path}(/|$)(.*)")
    };
    let app_name = app.metadata.name.as_deref().unwrap_or("");
    let mut metadata = json!({
        "name": name,
        "namespace": app.metadata.namespace,
        "labels": {labels::APP_NAME: app_name, CREATED_BY_LABEL: "true"},
        "ownerReferences": owner(app),
    });
    if !annotations.is_empty() {
        metadata["annotations"] = json!(annotations);
    }
    let mut http_path = json!({
        "pathType": "ImplementationSpecific",
        "backend": {"service": {"name": service_name, "port": {"number": service_port}}},
    });
    if !rule_path.is_empty() {
        http_path["path"] = json!(rule_path);
    }
    let mut spec = json!({"rules": [{"host": host, "http": {"paths": [http_path]}}]});
    if !tls.is_empty() {
        spec["tls"] = json!(tls);
    }
    if let Some(class) = class {
        spec["ingressClassName"] = json!(class);
    }
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": spec,
    }))
    .expect("an Ingress built from plain fields always decodes")
}

/// The driver's PodDisruptionBudget when the spec asks for one: named like the driver pod,
/// `minAvailable: 1` over the application's driver, owned by the application.
pub fn driver_pdb(app: &SparkApplication) -> Option<PodDisruptionBudget> {
    if app.spec.driver_pod_disruption_budget != Some(true) {
        return None;
    }
    let name = app.metadata.name.as_deref().unwrap_or("");
    let pdb = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": driver_pod_name(name, &app.spec),
            "namespace": app.metadata.namespace,
            "labels": {labels::LAUNCHED_BY_SPARK_OPERATOR: "true", labels::APP_NAME: name},
            "ownerReferences": owner(app),
        },
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": {labels::APP_NAME: name, "spark-role": "driver"}},
        },
    });
    Some(
        serde_json::from_value(pdb)
            .expect("a PodDisruptionBudget built from plain fields always decodes"),
    )
}

/// The UI objects of `app` under `settings`.
pub fn plan(app: &SparkApplication, settings: &UiSettings) -> Result<UiPlan, UiError> {
    let name = app.metadata.name.as_deref().unwrap_or("");
    let spec = &app.spec;
    let mut out = UiPlan {
        services: Vec::new(),
        ingresses: Vec::new(),
        ui_service: None,
        ui_ingress: None,
    };
    let empty = BTreeMap::new();
    if settings.ui_service {
        let options = spec.spark_ui_options.as_ref();
        let target = target_port(app);
        // Without sparkUIOptions the Service port is Spark's own; with them, 4040 unless set.
        let port = match options {
            None => target,
            Some(o) => o.service_port.unwrap_or(DEFAULT_UI_PORT),
        };
        let service_name = object_name(name, "ui-svc");
        out.services.push(Planned {
            required: false,
            object: service(
                app,
                ServiceShape {
                    name: service_name.clone(),
                    port_name: options
                        .and_then(|o| o.service_port_name.clone())
                        .unwrap_or_else(|| DEFAULT_UI_PORT_NAME.to_owned()),
                    port,
                    target_port: target,
                    service_type: options.and_then(|o| o.service_type.as_deref()),
                    annotations: options.map_or(&empty, |o| &o.service_annotations),
                    labels: options.map_or(&empty, |o| &o.service_labels),
                },
            ),
        });
        out.ui_service = Some((service_name.clone(), port));
        if let Some(format) = settings
            .ingress_url_format
            .as_deref()
            .filter(|f| !f.is_empty())
        {
            let (url, host, path) = ingress_url(format, app)?;
            let ingress_name = object_name(name, "ui-ingress");
            out.ingresses.push(Planned {
                required: false,
                object: ingress(
                    app,
                    ingress_name.clone(),
                    (&service_name, port),
                    (&host, &path),
                    options.map_or(&empty, |o| &o.ingress_annotations),
                    options.map_or(&[][..], |o| &o.ingress_tls),
                    settings.ingress_class_name.as_deref(),
                ),
            });
            out.ui_ingress = Some((ingress_name, url));
        }
    }
    for (index, options) in spec.driver_ingress_options.iter().enumerate() {
        let port = options
            .service_port
            .ok_or(UiError::MissingServicePort { index })?;
        let service_name = format!("{name}-driver-{port}");
        out.services.push(Planned {
            required: true,
            object: service(
                app,
                ServiceShape {
                    name: service_name.clone(),
                    port_name: options
                        .service_port_name
                        .clone()
                        .unwrap_or_else(|| format!("driver-ing-{port}")),
                    port,
                    target_port: port,
                    service_type: options.service_type.as_deref(),
                    annotations: &options.service_annotations,
                    labels: &options.service_labels,
                },
            ),
        });
        if !options.ingress_url_format.is_empty() {
            let (_, host, path) = ingress_url(&options.ingress_url_format, app)?;
            out.ingresses.push(Planned {
                required: true,
                object: ingress(
                    app,
                    format!("{name}-ing-{port}"),
                    (&service_name, port),
                    (&host, &path),
                    &options.ingress_annotations,
                    &options.ingress_tls,
                    settings.ingress_class_name.as_deref(),
                ),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(spec: Value) -> SparkApplication {
        let mut base = json!({"type": "Scala", "sparkVersion": "4.0.4",
            "mainApplicationFile": "local:///a.jar", "driver": {}, "executor": {}});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), spec.as_object()) {
            base.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": "etl", "uid": "app-uid"},
            "spec": base,
            "status": {"sparkApplicationId": "spark-123"},
        }))
        .unwrap()
    }

    fn value<T: serde::Serialize>(object: &T) -> Value {
        serde_json::to_value(object).unwrap()
    }

    #[test]
    fn every_application_gets_kubeflows_ui_service_by_default() {
        let plan = plan(&app(json!({})), &UiSettings::default()).unwrap();
        assert_eq!(plan.ui_service, Some(("pi-ui-svc".to_owned(), 4040)));
        assert!(plan.ingresses.is_empty());
        let service = value(&plan.services[0].object);
        assert_eq!(service["metadata"]["name"], "pi-ui-svc");
        assert_eq!(service["metadata"]["ownerReferences"][0]["uid"], "app-uid");
        assert_eq!(service["metadata"]["labels"][CREATED_BY_LABEL], "true");
        assert_eq!(
            service["spec"],
            json!({"type": "ClusterIP",
                   "selector": {labels::APP_NAME: "pi", "spark-role": "driver"},
                   "ports": [{"name": "spark-driver-ui-port", "port": 4040,
                              "targetPort": 4040, "protocol": "TCP"}]})
        );
        let off = UiSettings {
            ui_service: false,
            ..UiSettings::default()
        };
        assert!(super::plan(&app(json!({})), &off).unwrap().is_empty());
    }

    #[test]
    fn spark_ui_options_shape_the_service_and_the_url_format_makes_an_ingress() {
        let a = app(json!({
            "sparkConf": {UI_PORT_CONF: "4041"},
            "sparkUIOptions": {"servicePort": 80, "servicePortName": "http",
                "serviceType": "NodePort", "serviceLabels": {"team": "data"},
                "serviceAnnotations": {"a": "b"}, "ingressAnnotations": {"i": "j"}}}));
        let settings = UiSettings {
            ingress_url_format: Some("ui.example.com/{{$appNamespace}}/{{ $appName }}".into()),
            ingress_class_name: Some("nginx".into()),
            ..UiSettings::default()
        };
        let plan = plan(&a, &settings).unwrap();
        let service = value(&plan.services[0].object);
        assert_eq!(
            service["spec"]["ports"][0],
            json!({"name": "http", "port": 80, "targetPort": 4041, "protocol": "TCP"})
        );
        assert_eq!(service["spec"]["type"], "NodePort");
        assert_eq!(
            service["metadata"]["labels"],
            json!({"team": "data", CREATED_BY_LABEL: "true"})
        );
        assert_eq!(service["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(
            plan.ui_ingress,
            Some((
                "pi-ui-ingress".to_owned(),
                "http://ui.example.com/etl/pi".to_owned()
            ))
        );
        assert!(
            !plan.services[0].required && !plan.ingresses[0].required,
            "the operator adds them: the run can go on without them"
        );
        let ingress = value(&plan.ingresses[0].object);
        assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
        let rule = &ingress["spec"]["rules"][0];
        assert_eq!(rule["host"], "ui.example.com");
        assert_eq!(rule["http"]["paths"][0]["path"], "/etl/pi(/|$)(.*)");
        assert_eq!(
            rule["http"]["paths"][0]["backend"]["service"],
            json!({"name": "pi-ui-svc", "port": {"number": 80}})
        );
        assert_eq!(
            ingress["metadata"]["annotations"],
            json!({"i": "j", "nginx.ingress.kubernetes.io/rewrite-target": "/$2"})
        );
    }

    #[test]
    fn driver_ingress_options_make_a_service_and_ingress_per_port() {
        let a = app(json!({"driverIngressOptions": [
            {"servicePort": 7077, "servicePortName": null,
             "ingressURLFormat": "{{$appName}}-{{$appId}}.example.com"},
            {"servicePort": 8080, "servicePortName": "metrics"}]}));
        let off = UiSettings {
            ui_service: false,
            ..UiSettings::default()
        };
        let plan = plan(&a, &off).unwrap();
        let names: Vec<_> = plan
            .services
            .iter()
            .map(|s| s.object.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["pi-driver-7077", "pi-driver-8080"]);
        assert!(
            plan.services.iter().all(|s| s.required) && plan.ingresses[0].required,
            "the spec asks for them: the run needs them"
        );
        assert_eq!(
            value(&plan.services[0].object)["spec"]["ports"][0]["name"],
            "driver-ing-7077"
        );
        assert_eq!(
            value(&plan.services[1].object)["spec"]["ports"][0]["name"],
            "metrics"
        );
        assert_eq!(plan.ingresses.len(), 1);
        let ingress = value(&plan.ingresses[0].object);
        assert_eq!(ingress["metadata"]["name"], "pi-ing-7077");
        assert_eq!(
            ingress["spec"]["rules"][0]["host"],
            "pi-spark-123.example.com"
        );
        assert!(
            ingress["spec"]["rules"][0]["http"]["paths"][0]
                .get("path")
                .is_none()
        );
        let missing =
            app(json!({"driverIngressOptions": [{"servicePort": null, "servicePortName": null}]}));
        assert_eq!(
            super::plan(&missing, &off).unwrap_err(),
            UiError::MissingServicePort { index: 0 }
        );
    }

    #[test]
    fn a_driver_pdb_is_made_only_when_the_spec_asks() {
        assert!(driver_pdb(&app(json!({}))).is_none());
        let pdb = value(&driver_pdb(&app(json!({"driverPodDisruptionBudget": true}))).unwrap());
        assert_eq!(pdb["metadata"]["name"], "pi-driver");
        assert_eq!(pdb["metadata"]["ownerReferences"][0]["uid"], "app-uid");
        assert_eq!(
            pdb["spec"],
            json!({"minAvailable": 1,
                   "selector": {"matchLabels": {labels::APP_NAME: "pi", "spark-role": "driver"}}})
        );
    }

    #[test]
    fn long_names_are_cut_to_a_dns_label_with_a_hash() {
        let long = "a".repeat(70);
        let name = object_name(&long, "ui-svc");
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("-ui-svc"));
        assert_ne!(name, object_name(&"a".repeat(71), "ui-svc"));
        assert_eq!(object_name("pi", "ui-svc"), "pi-ui-svc");
    }
}
