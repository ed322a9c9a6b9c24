"""Pod logs through the real `kubernetes` client: a followed log streams while the container runs
and ends when it exits; tails and the API server's refusals read as from a cluster."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from simutil import wait_for


def scripted_pod(name: str, run_seconds: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"kubesim.io/run-seconds": run_seconds}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]},
    }


def main_running(kube, namespace: str, name: str) -> bool:
    statuses = kube.core.read_namespaced_pod(name, namespace).status.container_statuses or []
    return any(s.name == "main" and s.state.running is not None for s in statuses)


def test_a_followed_log_streams_while_running_and_ends_at_exit(kubesim, kube, namespace):
    kube.core.create_namespaced_pod(namespace, scripted_pod("follow", "-1"))
    wait_for(lambda: main_running(kube, namespace, "follow"), "container main running", 15)
    resp = kube.core.read_namespaced_pod_log(
        "follow", namespace, follow=True, _preload_content=False, _request_timeout=30
    )
    lines = iter(resp)
    assert next(lines).decode().rstrip("\n") == "kubesim: container main started"
    assert next(lines).decode().rstrip("\n") == "kubesim: container main running for 1s"
    # Still running (it runs until killed): the stream stays open until the kill ends it.
    killed = kubesim.sim("POST", f"pods/{namespace}/follow/kill", json={"exitCode": 137})
    assert killed.status_code < 300, killed.text
    rest = [line.decode().rstrip("\n") for line in lines]
    resp.release_conn()
    assert rest[-1] == "kubesim: container main exited with code 137", rest


def test_tail_lines_reads_exactly_the_last_lines(kube, namespace):
    kube.core.create_namespaced_pod(namespace, scripted_pod("tail", "2.5"))
    wait_for(
        lambda: kube.core.read_namespaced_pod("tail", namespace).status.phase == "Succeeded",
        "pod tail Succeeded",
        15,
    )
    whole = kube.core.read_namespaced_pod_log("tail", namespace)
    assert whole.splitlines() == [
        "kubesim: container main started",
        "kubesim: container main running for 1s",
        "kubesim: container main running for 2s",
        "kubesim: container main exited with code 0",
    ]
    assert kube.core.read_namespaced_pod_log("tail", namespace, tail_lines=2) == "\n".join(whole.splitlines()[-2:]) + "\n"


def test_previous_without_a_terminated_instance_is_the_api_servers_400(kube, namespace):
    kube.core.create_namespaced_pod(namespace, scripted_pod("prev", "-1"))
    wait_for(lambda: main_running(kube, namespace, "prev"), "container main running", 15)
    with pytest.raises(ApiException) as refused:
        kube.core.read_namespaced_pod_log("prev", namespace, previous=True)
    assert refused.value.status == 400
    status = json.loads(refused.value.body)
    assert status["reason"] == "BadRequest"
    assert status["message"] == 'previous terminated container "main" in pod "prev" not found'
