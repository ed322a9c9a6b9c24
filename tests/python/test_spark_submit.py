"""Real `spark-submit` (pyspark's, Java 17) in Kubernetes cluster mode against kubesim.

What real Spark 4.x does is recorded in shared/spark-submit-facts.md: the driver pod by POST, then
Service, NetworkPolicy and the spark-conf ConfigMap by server-side apply, each owned by the pod.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib import metadata

import pytest

from simutil import is_gone, wait_for

pytestmark = pytest.mark.spark

SPARK_SUBMIT_TIMEOUT_S = 180
EXAMPLES_JAR = "local:///opt/spark/examples/jars/spark-examples.jar"
DRIVER_NAME = re.compile(r"spark-pi-[0-9a-f]{16}-driver")
CONF_MAP_NAME = re.compile(r"spark-drv-[0-9a-f]{16}-conf-map")


def spark_version() -> str:
    # The driver's spark-version label is the submitting client's version (4.3.0 today).
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return "4.3.0"


def spark_submit(kubesim, namespace: str, *extra_conf: str) -> subprocess.CompletedProcess:
    binary = shutil.which("spark-submit")
    if binary is None:
        pytest.fail(
            "spark-submit is not on PATH: install pyspark (`pip install pyspark`) and Java 17 "
            "to run the spark tests",
            pytrace=False,
        )
    argv = [
        binary,
        "--master", f"k8s://{kubesim.url}",
        "--deploy-mode", "cluster",
        "--name", "spark-pi",
        "--class", "org.apache.spark.examples.SparkPi",
        "--conf", "spark.kubernetes.container.image=apache/spark:4.0.1",
        "--conf", "spark.kubernetes.submission.waitAppCompletion=false",
        "--conf", f"spark.kubernetes.namespace={namespace}",
    ]
    for conf in extra_conf:
        argv += ["--conf", conf]
    argv += [EXAMPLES_JAR, "10"]
    env = {**os.environ, "KUBECONFIG": str(kubesim.kubeconfig), "SPARK_LOCAL_IP": "127.0.0.1"}
    try:
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=SPARK_SUBMIT_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"spark-submit did not finish within {SPARK_SUBMIT_TIMEOUT_S}s; stderr:\n{e.stderr}")


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-6000:]}"


def everything_in(kube, namespace: str) -> dict[str, list[str]]:
    """Names of the object kinds spark-submit creates, in one namespace."""
    return {
        "pods": [p.metadata.name for p in kube.core.list_namespaced_pod(namespace).items],
        "services": [s.metadata.name for s in kube.core.list_namespaced_service(namespace).items],
        # kube-root-ca.crt is published into every namespace by real clusters.
        "configmaps": [
            c.metadata.name
            for c in kube.core.list_namespaced_config_map(namespace).items
            if c.metadata.name != "kube-root-ca.crt"
        ],
        "networkpolicies": [n.metadata.name for n in kube.networking.list_namespaced_network_policy(namespace).items],
        "persistentvolumeclaims": [
            p.metadata.name for p in kube.core.list_namespaced_persistent_volume_claim(namespace).items
        ],
    }


def owned_by(obj, pod) -> bool:
    refs = obj.metadata.owner_references or []
    return any(
        r.kind == "Pod" and r.api_version == "v1" and r.controller and r.name == pod.metadata.name and r.uid == pod.metadata.uid
        for r in refs
    )


def test_cluster_mode_submission_creates_driver_objects_and_gc_removes_them(kubesim, kube, namespace):
    proc = spark_submit(kubesim, namespace)
    assert proc.returncode == 0, describe(proc)
    assert "Deployed Spark application spark-pi" in proc.stdout + proc.stderr, describe(proc)

    drivers = kube.core.list_namespaced_pod(namespace, label_selector="spark-role=driver").items
    assert len(drivers) == 1, [p.metadata.name for p in drivers]
    driver = drivers[0]
    name = driver.metadata.name
    assert DRIVER_NAME.fullmatch(name), name
    assert f"submission ID {namespace}:{name}" in proc.stdout + proc.stderr, describe(proc)
    labels = driver.metadata.labels
    assert re.fullmatch(r"spark-[0-9a-f]{32}", labels.get("spark-app-selector", "")), labels
    assert labels.get("spark-app-name") == "spark-pi", labels
    assert labels.get("spark-version") == spark_version(), labels
    assert labels.get("spark-role") == "driver", labels
    assert driver.spec.containers[0].name == "spark-kubernetes-driver"
    assert driver.spec.containers[0].image == "apache/spark:4.0.1"
    assert driver.spec.restart_policy == "Never"
    assert not driver.metadata.owner_references
    prefix = name.removesuffix("-driver")
    app_id = labels["spark-app-selector"]

    conf_maps = [
        c for c in kube.core.list_namespaced_config_map(namespace).items if CONF_MAP_NAME.fullmatch(c.metadata.name)
    ]
    assert len(conf_maps) == 1, [c.metadata.name for c in kube.core.list_namespaced_config_map(namespace).items]
    conf_map = conf_maps[0]
    assert conf_map.immutable is True
    assert conf_map.data["spark.kubernetes.namespace"] == namespace
    properties = conf_map.data["spark.properties"]
    assert f"spark.app.id={app_id}" in properties
    assert f"spark.kubernetes.driver.pod.name={name}" in properties
    assert f"spark.driver.host={prefix}-driver-svc.{namespace}.svc" in properties
    # The driver mounts exactly this ConfigMap.
    mounted = [v.config_map.name for v in driver.spec.volumes if v.config_map is not None]
    assert conf_map.metadata.name in mounted, mounted

    service = kube.core.read_namespaced_service(f"{prefix}-driver-svc", namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.type == "ClusterIP"  # defaulted by the API server
    assert {p.protocol for p in service.spec.ports} == {"TCP"}  # defaulted: Spark sends none
    assert service.spec.selector.get("spark-app-selector") == app_id
    assert sorted(p.port for p in service.spec.ports) == [4040, 7078, 7079, 15002]

    policy = kube.networking.read_namespaced_network_policy(f"{prefix}-policy", namespace)
    assert policy.spec.pod_selector.match_labels == {"spark-role": "executor", "spark-app-selector": app_id}

    for obj in (service, conf_map, policy):
        assert owned_by(obj, driver), (obj.metadata.name, obj.metadata.owner_references, driver.metadata.uid)

    kube.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(lambda: is_gone(lambda: kube.core.read_namespaced_pod(name, namespace)), "the driver pod to go", 15)
    wait_for(
        lambda: all(
            is_gone(read)
            for read in (
                lambda: kube.core.read_namespaced_service(service.metadata.name, namespace),
                lambda: kube.core.read_namespaced_config_map(conf_map.metadata.name, namespace),
                lambda: kube.networking.read_namespaced_network_policy(policy.metadata.name, namespace),
            )
        ),
        "the driver's Service, ConfigMap and NetworkPolicy to be garbage-collected",
        timeout=15,
    )
    assert everything_in(kube, namespace) == {
        "pods": [], "services": [], "configmaps": [], "networkpolicies": [], "persistentvolumeclaims": []
    }


def test_failed_configmap_apply_rolls_back_the_driver(kubesim, kube, namespace):
    """A 422 on the spark-conf ConfigMap apply: Spark deletes the pod; GC removes the rest."""
    resp = kubesim.sim(
        "POST",
        "faults",
        json={"verb": "patch", "resource": "configmaps", "namespace": namespace, "count": 1, "code": 422},
    )
    try:
        assert resp.status_code in (200, 201), resp.text
        assert kubesim.sim("DELETE", "requests").status_code == 200
        proc = spark_submit(kubesim, namespace)
        counts = kubesim.sim("GET", "requests").json()
    finally:
        kubesim.sim("DELETE", "faults")
    assert proc.returncode != 0, describe(proc)
    assert "Deployed Spark application" not in proc.stdout + proc.stderr, describe(proc)
    assert "Failure executing: PATCH" in proc.stderr, describe(proc)

    def count(verb: str, resource: str) -> int:
        return sum(
            r["count"] for r in counts if r["verb"] == verb and r["resource"] == resource and r["namespace"] == namespace
        )

    # Spark's own rollback: one POST of the pod, then a DELETE of it after the failed apply.
    assert count("create", "pods") == 1, counts
    assert count("delete", "pods") == 1, counts
    empty = {"pods": [], "services": [], "configmaps": [], "networkpolicies": [], "persistentvolumeclaims": []}

    def cleaned_up():
        state = everything_in(kube, namespace)
        assert state == empty, state
        return True

    wait_for(cleaned_up, "the rolled-back driver and its dependents to be gone", timeout=15)


def test_missing_pod_template_fails_and_creates_nothing(kubesim, kube, namespace):
    proc = spark_submit(kubesim, namespace, "spark.kubernetes.driver.podTemplateFile=/nonexistent.yaml")
    assert proc.returncode != 0, describe(proc)
    assert "Could not load pod from template file" in proc.stderr, describe(proc)
    assert everything_in(kube, namespace) == {
        "pods": [], "services": [], "configmaps": [], "networkpolicies": [], "persistentvolumeclaims": []
    }
