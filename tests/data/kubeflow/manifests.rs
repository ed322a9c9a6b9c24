//! What each of kubeflow/spark-operator's example files applies, written as data: one builder
//! per upstream file name, a SparkPi application shared by most of them plus each example's
//! differences. The field values are the upstream files' (at the commit the README names), so
//! running these proves the examples' features work as published; the files themselves are not
//! part of this repository (see README.md).

use serde_json::{Value, json};

/// The upstream file names this module describes (the SparkConnect example is tested elsewhere).
pub const FILES: [&str; 14] = [
    "spark-pi.yaml",
    "spark-pi-configmap.yaml",
    "spark-pi-custom-resource.yaml",
    "spark-pi-dynamic-allocation.yaml",
    "spark-pi-emptydir.yaml",
    "spark-pi-kube-scheduler.yaml",
    "spark-pi-pod-template.yaml",
    "spark-pi-prometheus-servlet.yaml",
    "spark-pi-prometheus.yaml",
    "spark-pi-python.yaml",
    "spark-pi-scheduled.yaml",
    "spark-pi-ttl.yaml",
    "spark-pi-volcano.yaml",
    "spark-pi-yunikorn.yaml",
];

/// The documents the upstream file `file` applies, in its order; `None` for a name not listed
/// in [`FILES`].
pub fn documents(file: &str) -> Option<Vec<Value>> {
    let one = |doc| Some(vec![doc]);
    match file {
        "spark-pi.yaml" => one(spark_pi(
            "spark-pi",
            versioned(json!({"arguments": ["5000"]})),
        )),
        "spark-pi-configmap.yaml" => one(spark_pi(
            "spark-pi-configmap",
            json!({"spec": {
                "restartPolicy": {"type": "Never"},
                "volumes": [{"name": "config-vol", "configMap": {"name": "test-configmap"}}],
                "driver": {"volumeMounts": [config_mount()]},
                "executor": {"volumeMounts": [config_mount()]},
            }}),
        )),
        "spark-pi-custom-resource.yaml" => one(spark_pi(
            "spark-pi-custom-resource",
            json!({"spec": {
                "restartPolicy": {"type": "Never"},
                "driver": {"cores": null, "coreRequest": "0.5", "coreLimit": "800m"},
                "executor": {"cores": null, "coreRequest": "1200m", "coreLimit": "1500m"},
            }}),
        )),
        "spark-pi-dynamic-allocation.yaml" => one(spark_pi(
            "spark-pi-dynamic-allocation",
            json!({"spec": {"dynamicAllocation": {
                "enabled": true,
                "initialExecutors": 2,
                "maxExecutors": 5,
                "minExecutors": 1,
            }}}),
        )),
        "spark-pi-emptydir.yaml" => {
            let mount = json!([{"mountPath": "/datadir", "name": "spark-local-dir-1"}]);
            let mut spec = json!({
                "arguments": ["5000"],
                "volumes": [{
                    "name": "spark-local-dir-1",
                    "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"},
                }],
            });
            spec["driver"]["volumeMounts"] = mount.clone();
            spec["executor"]["volumeMounts"] = mount;
            one(spark_pi("spark-pi", versioned(spec)))
        }
        "spark-pi-kube-scheduler.yaml" => one(spark_pi(
            "spark-pi-kube-scheduler",
            json!({"spec": {"executor": {"instances": 2}, "batchScheduler": "kube-scheduler"}}),
        )),
        "spark-pi-pod-template.yaml" => Some(pod_template()),
        "spark-pi-prometheus-servlet.yaml" => {
            let mut app = python_pi();
            // Upstream names no namespace here: the context's (`default`) applies.
            merge(
                &mut app,
                json!({"metadata": {"namespace": null}, "spec": {"sparkConf": {
                    "spark.kubernetes.driver.annotation.prometheus.io/scrape": "true",
                    "spark.kubernetes.driver.annotation.prometheus.io/path": "/metrics/executors/prometheus/",
                    "spark.kubernetes.driver.annotation.prometheus.io/port": "4040",
                    "spark.kubernetes.driver.service.annotation.prometheus.io/scrape": "true",
                    "spark.kubernetes.driver.service.annotation.prometheus.io/path": "/metrics/driver/prometheus/",
                    "spark.kubernetes.driver.service.annotation.prometheus.io/port": "4040",
                    "spark.ui.prometheus.enabled": "true",
                    "spark.executor.processTreeMetrics.enabled": "true",
                    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
                    "spark.metrics.conf.driver.sink.prometheusServlet.path": "/metrics/driver/prometheus/",
                    "spark.metrics.conf.executor.sink.prometheusServlet.path": "/metrics/executors/prometheus/",
                }}}),
            );
            one(app)
        }
        "spark-pi-prometheus.yaml" => one(spark_pi(
            "spark-pi",
            versioned(json!({
                // The image as published, placeholder and all.
                "image": "{IMAGE_REGISTRY}/{IMAGE_REPOSITORY}/docker.io/apache/spark:4.0.4-gcs-prometheus",
                "imagePullPolicy": "Always",
                "arguments": ["100000"],
                "restartPolicy": {"type": "Never"},
                "monitoring": {
                    "exposeDriverMetrics": true,
                    "exposeExecutorMetrics": true,
                    "prometheus": {
                        "jmxExporterJar": "/prometheus/jmx_prometheus_javaagent-0.11.0.jar",
                        "port": 8090,
                    },
                },
            })),
        )),
        "spark-pi-python.yaml" => one(python_pi()),
        "spark-pi-scheduled.yaml" => {
            let mut template = spark_pi(
                "unused",
                json!({"spec": {"restartPolicy": {"type": "Never"}}}),
            );
            one(json!({
                "apiVersion": "sparkoperator.k8s.io/v1beta2",
                "kind": "ScheduledSparkApplication",
                "metadata": {"name": "spark-pi-scheduled", "namespace": "default"},
                "spec": {
                    "schedule": "@every 3m",
                    "concurrencyPolicy": "Allow",
                    "template": template["spec"].take(),
                },
            }))
        }
        "spark-pi-ttl.yaml" => one(spark_pi(
            "spark-pi-ttl",
            json!({"spec": {"timeToLiveSeconds": 30}}),
        )),
        "spark-pi-volcano.yaml" => one(spark_pi(
            "spark-pi-volcano",
            json!({"spec": {"executor": {"instances": 2}, "batchScheduler": "volcano"}}),
        )),
        "spark-pi-yunikorn.yaml" => one(spark_pi(
            "spark-pi-yunikorn",
            json!({"spec": {
                "executor": {"instances": 2},
                "batchScheduler": "yunikorn",
                "batchSchedulerOptions": {"queue": "root.default"},
            }}),
        )),
        _ => None,
    }
}

/// The container security context every example's driver and executor run with.
fn restricted() -> Value {
    json!({
        "capabilities": {"drop": ["ALL"]},
        "runAsGroup": 185,
        "runAsUser": 185,
        "runAsNonRoot": true,
        "allowPrivilegeEscalation": false,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// Spark's SparkPi from the image's examples jar, one driver and one executor of one core and
/// 512m each, in `default`; `edits` (a document-shaped JSON merge patch: objects merge, `null`
/// removes a field, anything else replaces) makes the example's differences.
fn spark_pi(name: &str, edits: Value) -> Value {
    let mut app = json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "image": "docker.io/apache/spark:4.0.4",
            "imagePullPolicy": "IfNotPresent",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "sparkVersion": "4.0.4",
            "driver": {
                "cores": 1,
                "memory": "512m",
                "serviceAccount": "spark-operator-spark",
                "securityContext": restricted(),
            },
            "executor": {
                "instances": 1,
                "cores": 1,
                "memory": "512m",
                "securityContext": restricted(),
            },
        },
    });
    merge(&mut app, edits);
    app
}

/// `spark-pi-python`: Spark's pi.py, otherwise as [`spark_pi`].
fn python_pi() -> Value {
    spark_pi(
        "spark-pi-python",
        json!({"spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mainClass": null,
            "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
        }}),
    )
}

/// The `spec` edits `spec` plus the `version: 4.0.0` label on driver and executor (the
/// `spark-pi` examples carry it).
fn versioned(mut spec: Value) -> Value {
    for role in ["driver", "executor"] {
        spec[role]["labels"] = json!({"version": "4.0.0"});
    }
    json!({"spec": spec})
}

fn config_mount() -> Value {
    json!({"name": "config-vol", "mountPath": "/opt/spark/config"})
}

/// `spark-pi-pod-template.yaml`: two ConfigMaps and two Secrets, then an application whose
/// driver and executor are shaped by pod templates that read them.
fn pod_template() -> Vec<Value> {
    let config_map = |name: &str, key: &str, value: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {key: value},
        })
    };
    let secret = |name: &str, key: &str, value: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"},
            "stringData": {key: value},
        })
    };
    let env = json!([
        {"name": "KEY0", "value": "VALUE0"},
        {"name": "KEY1", "valueFrom": {"configMapKeyRef": {"name": "test-configmap", "key": "KEY1"}}},
        {"name": "KEY2", "valueFrom": {"secretKeyRef": {"name": "test-secret", "key": "KEY2"}}},
    ]);
    let env_from = json!([
        {"configMapRef": {"name": "test-configmap-2"}},
        {"secretRef": {"name": "test-secret-2"}},
    ]);
    let version = json!({"spark.apache.org/version": "4.0.0"});
    let metadata = json!({"labels": version, "annotations": version});
    let affinity = json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 1,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"spark-app-name": "spark-pi-pod-template"}},
            "topologyKey": "kubernetes.io/hostname",
        },
    }]}});
    let tolerations = json!([{"operator": "Exists", "effect": "NoSchedule"}]);
    let node_selector = json!({"kubernetes.io/os": "linux"});
    let driver = json!({
        "template": {
            "metadata": metadata,
            "spec": {
                "securityContext": restricted(),
                "containers": [{
                    "name": "spark-kubernetes-driver",
                    "env": env,
                    "envFrom": env_from,
                    "ports": [{"name": "custom-port", "containerPort": 12345, "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "512Mi"},
                        "limits": {"cpu": 1, "memory": "1Gi"},
                    },
                }],
                "nodeSelector": node_selector,
                "affinity": affinity,
                "tolerations": tolerations,
                "serviceAccountName": "spark-operator-spark",
            },
        },
        "cores": 1,
        "coreLimit": "1",
        "memory": "512m",
        "memoryOverhead": "512m",
    });
    let executor = json!({
        "instances": 1,
        "template": {
            "metadata": metadata,
            "spec": {
                "securityContext": restricted(),
                "containers": [{
                    "name": "spark-kubernetes-executor",
                    "env": env,
                    "envFrom": env_from,
                    "volumeMounts": [{"name": "spark-local-dir-1", "mountPath": "/mnt/disk1"}],
                    "resources": {
                        "requests": {"cpu": 1, "memory": "1Gi"},
                        "limits": {"cpu": "1500m", "memory": "1512Mi"},
                    },
                }],
                "volumes": [{"name": "spark-local-dir-1", "emptyDir": {"sizeLimit": "100Mi"}}],
                "nodeSelector": node_selector,
                "affinity": affinity,
                "tolerations": tolerations,
            },
        },
        "cores": 1,
        "coreLimit": "1500m",
        "memory": "1g",
        "memoryOverhead": "512m",
    });
    let mut app = spark_pi(
        "spark-pi-pod-template",
        json!({"spec": {"arguments": ["10000"]}}),
    );
    // The templates carry what the other examples set on the roles directly.
    app["spec"]["driver"] = driver;
    app["spec"]["executor"] = executor;
    vec![
        config_map("test-configmap", "KEY1", "VALUE1"),
        secret("test-secret", "KEY2", "VALUE2"),
        config_map("test-configmap-2", "KEY3", "VALUE3"),
        secret("test-secret-2", "KEY4", "VALUE4"),
        app,
    ]
}

/// JSON merge patch (RFC 7386) of `patch` into `target`.
fn merge(target: &mut Value, patch: Value) {
    let Value::Object(fields) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(into) = target else {
        return;
    };
    for (key, value) in fields {
        if value.is_null() {
            into.remove(&key);
        } else {
            merge(into.entry(key).or_insert(Value::Null), value);
        }
    }
}
