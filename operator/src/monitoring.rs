//! `spec.monitoring` as the widely used operator sets it up (`monitoring_config.go` and its
//! webhook's `addPrometheusConfig`): the Prometheus JMX exporter as a `-javaagent` of the driver
//! and/or executors, Spark's metrics configuration, the `<app>-prom-conf` ConfigMap holding
//! `metrics.properties` and the exporter's `prometheus.yaml`, mounted at `/etc/metrics/conf`, the
//! exporter's container port, and the `prometheus.io/*` scrape annotations.
//!
//! Pure: [`apply`] rewrites the spec the argument vector and pod templates are built from (as
//! kubeflow rewrites the application before submitting it), [`config_map`] is the ConfigMap the
//! reconciler creates, owned by the application. Spark's own PrometheusServlet
//! (`spark.ui.prometheus.enabled`) needs none of this and keeps working through `sparkConf`.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use crate::crd::{NamePath, Port, SparkApplication, SparkApplicationSpec};
use crate::labels::{self, CREATED_BY_LABEL};

/// Where the ConfigMap is mounted, and its keys.
pub const MOUNT_PATH: &str = "/etc/metrics/conf";
pub const METRICS_PROPERTIES_KEY: &str = "metrics.properties";
pub const PROMETHEUS_CONFIG_KEY: &str = "prometheus.yaml";
/// The exporter's port and port name unless `monitoring.prometheus` sets them.
pub const DEFAULT_PORT: i32 = 8090;
pub const DEFAULT_PORT_NAME: &str = "jmx-exporter";

/// Spark's metrics configuration when the spec gives none: every metric to JMX, where the
/// exporter reads it, plus the JVM source of both roles.
pub const DEFAULT_METRICS_PROPERTIES: &str = "\
*.sink.jmx.class=org.apache.spark.metrics.sink.JmxSink
driver.source.jvm.class=org.apache.spark.metrics.source.JvmSource
executor.source.jvm.class=org.apache.spark.metrics.source.JvmSource
";

/// The exporter's rules when the spec gives none (ours): Spark's JMX metrics, named
/// `<namespace>.<app>.<driver|executor id>.<metric>` by `spark.metrics.namespace`, as
/// `spark_<metric>` with the application and role as labels; everything else as the exporter
/// names it.
pub const DEFAULT_PROMETHEUS_CONFIGURATION: &str = r#"lowercaseOutputName: true
attrNameSnakeCase: true
rules:
  - pattern: metrics<name=([^.]+)\.([^.]+)\.(driver|\d+)\.(\S+)><>Value
    name: spark_$4
    type: GAUGE
    labels:
      app_namespace: "$1"
      app_name: "$2"
      role: "$3"
  - pattern: metrics<name=([^.]+)\.([^.]+)\.(driver|\d+)\.(\S+)><>Count
    name: spark_$4_count
    type: COUNTER
    labels:
      app_namespace: "$1"
      app_name: "$2"
      role: "$3"
  - pattern: ".*"
"#;

/// The ConfigMap's name: `<app>-prom-conf`.
pub fn config_map_name(app_name: &str) -> String {
    format!("{app_name}-prom-conf")
}

fn has(value: &Option<String>) -> bool {
    value.as_deref().is_some_and(|v| !v.is_empty())
}

/// Whether the ConfigMap is needed: the spec asks for monitoring and does not name both files
/// inside the image.
pub fn needs_config_map(spec: &SparkApplicationSpec) -> bool {
    let Some(monitoring) = &spec.monitoring else {
        return false;
    };
    let config_file = monitoring
        .prometheus
        .as_ref()
        .is_some_and(|p| has(&p.config_file));
    !(has(&monitoring.metrics_properties_file) && config_file)
}

/// Rewrites `spec` for `spec.monitoring` of the application `name` in `namespace`; nothing
/// without it.
pub fn apply(spec: &mut SparkApplicationSpec, name: &str, namespace: &str) {
    let Some(monitoring) = spec.monitoring.clone() else {
        return;
    };
    let prometheus = monitoring.prometheus.as_ref();
    let port = prometheus.and_then(|p| p.port).unwrap_or(DEFAULT_PORT);
    let java_option =
        prometheus.map(
            |p| match p.config_file.as_deref().filter(|f| !f.is_empty()) {
                Some(file) => format!("-javaagent:{}={port}:{file}", p.jmx_exporter_jar),
                None => format!(
                    "-javaagent:{}={port}:{MOUNT_PATH}/{PROMETHEUS_CONFIG_KEY}",
                    p.jmx_exporter_jar
                ),
            },
        );
    spec.spark_conf.insert(
        "spark.metrics.namespace".to_owned(),
        format!("{namespace}.{name}"),
    );
    let metrics_conf = match monitoring.metrics_properties_file.as_deref() {
        Some(file) if !file.is_empty() => file.to_owned(),
        _ => format!("{MOUNT_PATH}/{METRICS_PROPERTIES_KEY}"),
    };
    spec.spark_conf
        .insert("spark.metrics.conf".to_owned(), metrics_conf);
    // The webhook mounts the ConfigMap and opens the port only with the exporter configured.
    let mount = prometheus.is_some() && needs_config_map(spec);
    let port_entry = Port {
        name: prometheus
            .and_then(|p| p.port_name.clone())
            .unwrap_or_else(|| DEFAULT_PORT_NAME.to_owned()),
        protocol: "TCP".to_owned(),
        container_port: port,
    };
    let roles = [
        (
            monitoring.expose_driver_metrics,
            &mut spec.driver.pod,
            &mut spec.driver.java_options,
            &mut spec.driver.ports,
        ),
        (
            monitoring.expose_executor_metrics,
            &mut spec.executor.pod,
            &mut spec.executor.java_options,
            &mut spec.executor.ports,
        ),
    ];
    for (exposed, pod, java_options, ports) in roles {
        if !exposed {
            continue;
        }
        pod.annotations
            .insert("prometheus.io/scrape".to_owned(), "true".to_owned());
        pod.annotations
            .insert("prometheus.io/port".to_owned(), port.to_string());
        pod.annotations
            .insert("prometheus.io/path".to_owned(), "/metrics".to_owned());
        if let Some(option) = &java_option {
            *java_options = Some(match java_options.take() {
                Some(existing) if !existing.is_empty() => format!("{existing} {option}"),
                _ => option.clone(),
            });
        }
        if mount {
            pod.config_maps.push(NamePath {
                name: config_map_name(name),
                path: MOUNT_PATH.to_owned(),
            });
            ports.push(port_entry.clone());
        }
    }
}

/// The `<app>-prom-conf` ConfigMap of `app`, owned by it, when its monitoring needs one.
pub fn config_map(app: &SparkApplication) -> Option<ConfigMap> {
    let monitoring = app.spec.monitoring.as_ref()?;
    if !needs_config_map(&app.spec) {
        return None;
    }
    let name = app.metadata.name.as_deref().unwrap_or("");
    let mut data = serde_json::Map::new();
    if !has(&monitoring.metrics_properties_file) {
        let properties = monitoring
            .metrics_properties
            .as_deref()
            .unwrap_or(DEFAULT_METRICS_PROPERTIES);
        data.insert(METRICS_PROPERTIES_KEY.to_owned(), json!(properties));
    }
    if let Some(prometheus) = monitoring
        .prometheus
        .as_ref()
        .filter(|p| !has(&p.config_file))
    {
        let configuration = prometheus
            .configuration
            .as_deref()
            .unwrap_or(DEFAULT_PROMETHEUS_CONFIGURATION);
        data.insert(PROMETHEUS_CONFIG_KEY.to_owned(), json!(configuration));
    }
    let value = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(name),
            "namespace": app.metadata.namespace,
            "labels": {CREATED_BY_LABEL: "true", labels::APP_NAME: name},
            "ownerReferences": [{
                "apiVersion": "sparkoperator.k8s.io/v1beta2",
                "kind": "SparkApplication",
                "name": name,
                "uid": app.metadata.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "data": data,
    });
    Some(serde_json::from_value(value).expect("a ConfigMap built from plain fields always decodes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn app(monitoring: Value) -> SparkApplication {
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": "etl", "uid": "app-uid"},
            "spec": {"type": "Scala", "sparkVersion": "4.0.4",
                     "mainApplicationFile": "local:///a.jar",
                     "driver": {"javaOptions": "-Xss4m"}, "executor": {},
                     "monitoring": monitoring},
        }))
        .unwrap()
    }

    const JAR: &str = "/prometheus/jmx_prometheus_javaagent-0.11.0.jar";

    #[test]
    fn the_exporter_is_a_javaagent_with_its_port_config_map_and_scrape_annotations() {
        let a = app(
            json!({"exposeDriverMetrics": true, "exposeExecutorMetrics": false,
                           "prometheus": {"jmxExporterJar": JAR, "port": 8090}}),
        );
        let mut spec = a.spec.clone();
        apply(&mut spec, "pi", "etl");
        assert_eq!(
            spec.driver.java_options.as_deref(),
            Some(
                format!("-Xss4m -javaagent:{JAR}=8090:/etc/metrics/conf/prometheus.yaml").as_str()
            )
        );
        assert_eq!(spec.executor.java_options, None);
        assert_eq!(spec.spark_conf["spark.metrics.namespace"], "etl.pi");
        assert_eq!(
            spec.spark_conf["spark.metrics.conf"],
            "/etc/metrics/conf/metrics.properties"
        );
        assert_eq!(spec.driver.pod.annotations["prometheus.io/port"], "8090");
        assert_eq!(spec.driver.pod.config_maps[0].name, "pi-prom-conf");
        assert_eq!(spec.driver.ports[0].name, "jmx-exporter");
        assert!(spec.executor.pod.annotations.is_empty());
        let cm = config_map(&a).unwrap();
        let data = cm.data.unwrap();
        assert_eq!(data[METRICS_PROPERTIES_KEY], DEFAULT_METRICS_PROPERTIES);
        assert_eq!(
            data[PROMETHEUS_CONFIG_KEY],
            DEFAULT_PROMETHEUS_CONFIGURATION
        );
        assert_eq!(cm.metadata.owner_references.unwrap()[0].uid, "app-uid");
    }

    #[test]
    fn files_in_the_image_replace_the_config_map() {
        let a = app(
            json!({"exposeDriverMetrics": true, "exposeExecutorMetrics": true,
            "metricsPropertiesFile": "/etc/spark/metrics.properties",
            "prometheus": {"jmxExporterJar": JAR, "configFile": "/etc/jmx.yaml",
                           "portName": "metrics"}}),
        );
        let mut spec = a.spec.clone();
        apply(&mut spec, "pi", "etl");
        assert_eq!(
            spec.executor.java_options.as_deref(),
            Some(format!("-javaagent:{JAR}=8090:/etc/jmx.yaml").as_str())
        );
        assert_eq!(
            spec.spark_conf["spark.metrics.conf"],
            "/etc/spark/metrics.properties"
        );
        assert!(spec.driver.pod.config_maps.is_empty());
        assert!(config_map(&a).is_none());
        // Without the exporter: Spark's metrics configuration only, no agent and no port.
        let plain = app(
            json!({"exposeDriverMetrics": true, "exposeExecutorMetrics": false,
                               "metricsProperties": "*.sink.console.class=x"}),
        );
        let mut spec = plain.spec.clone();
        apply(&mut spec, "pi", "etl");
        assert_eq!(spec.driver.java_options.as_deref(), Some("-Xss4m"));
        assert!(spec.driver.ports.is_empty());
        let data = config_map(&plain).unwrap().data.unwrap();
        assert_eq!(data[METRICS_PROPERTIES_KEY], "*.sink.console.class=x");
        assert!(!data.contains_key(PROMETHEUS_CONFIG_KEY));
    }
}
