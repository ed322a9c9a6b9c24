"""The real PyPI `kubernetes` client against kubesim, configured only from kubesim's kubeconfig.

Every assertion states what a real Kubernetes API server does; a failure here is a kubesim
fidelity bug, not something to work around in the test.
"""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from simutil import is_gone, wait_for

NEVER_START = {"kubesim.io/never-start": "true"}


def api_error(excinfo: pytest.ExceptionInfo) -> tuple[int, dict]:
    """The HTTP status and decoded `Status` body of an ApiException."""
    e = excinfo.value
    try:
        body = json.loads(e.body) if e.body else {}
    except (TypeError, ValueError):
        body = {"unparsed": e.body}
    return e.status, body


def cm(name: str, data: dict | None = None, labels: dict | None = None, **meta) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **({"labels": labels} if labels else {}), **meta},
        "data": data or {},
    }


def pod(name: str, annotations: dict | None = None, labels: dict | None = None, restart_policy: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": spec,
    }


def names(object_list) -> set[str]:
    return {item.metadata.name for item in object_list.items}


# Real clusters publish kube-root-ca.crt into every namespace; it must not disturb the counts.
ROOT_CA = "kube-root-ca.crt"


def cm_names(kube, ns: str, **kwargs) -> set[str]:
    return names(kube.core.list_namespaced_config_map(ns, **kwargs)) - {ROOT_CA}


# --- ConfigMaps and Pods -------------------------------------------------------------------------


def test_configmap_create_and_read(kube, namespace):
    created = kube.core.create_namespaced_config_map(namespace, cm("settings", {"k": "v"}, {"app": "demo"}))
    assert created.metadata.name == "settings"
    assert created.metadata.namespace == namespace
    assert created.metadata.uid
    assert created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    read = kube.core.read_namespaced_config_map("settings", namespace)
    assert read.data == {"k": "v"}
    assert read.metadata.labels == {"app": "demo"}
    assert read.metadata.uid == created.metadata.uid
    assert read.metadata.resource_version == created.metadata.resource_version


def test_pod_create_and_read(kube, namespace):
    created = kube.core.create_namespaced_pod(namespace, pod("web", NEVER_START, {"app": "web"}))
    assert created.metadata.uid
    assert created.status.phase == "Pending"
    # Defaults a real API server fills in.
    assert created.spec.restart_policy == "Always"
    assert created.spec.termination_grace_period_seconds == 30
    assert created.spec.containers[0].image_pull_policy == "IfNotPresent"
    read = kube.core.read_namespaced_pod("web", namespace)
    assert read.spec.containers[0].name == "main"
    assert read.spec.containers[0].image == "busybox:1.36"
    assert read.metadata.labels == {"app": "web"}
    assert read.metadata.uid == created.metadata.uid


def test_label_selectors(kube, namespace):
    for name, labels in [("ab", {"a": "b"}), ("ax", {"a": "x"}), ("ay", {"a": "y"}), ("az", {"a": "z"}), ("none", {"c": "d"})]:
        kube.core.create_namespaced_config_map(namespace, cm(name, labels=labels))
    assert cm_names(kube, namespace, label_selector="a=b") == {"ab"}
    assert cm_names(kube, namespace, label_selector="a in (x,y)") == {"ax", "ay"}
    assert cm_names(kube, namespace, label_selector="!a") == {"none"}
    assert cm_names(kube, namespace, label_selector="a,a!=b") == {"ax", "ay", "az"}
    assert cm_names(kube, namespace, label_selector="a notin (x,y)") == {"ab", "az", "none"}
    assert cm_names(kube, namespace, label_selector="a=b,c=d") == set()


def test_list_pages_with_limit_and_continue(kube, namespace):
    for i in range(5):
        kube.core.create_namespaced_config_map(namespace, cm(f"page-{i}", labels={"paged": "yes"}))
    collected: list[str] = []
    token = None
    pages = 0
    while True:
        page = kube.core.list_namespaced_config_map(namespace, label_selector="paged=yes", limit=2, _continue=token)
        pages += 1
        assert len(page.items) <= 2
        collected += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert pages < 10, "continue tokens never end"
    assert pages == 3
    assert sorted(collected) == [f"page-{i}" for i in range(5)]


def test_field_selectors(kube, namespace):
    kube.core.create_namespaced_config_map(namespace, cm("x"))
    kube.core.create_namespaced_config_map(namespace, cm("y"))
    assert names(kube.core.list_namespaced_config_map(namespace, field_selector="metadata.name=x")) == {"x"}
    assert cm_names(kube, namespace, field_selector="metadata.name!=x") == {"y"}

    kube.core.create_namespaced_pod(namespace, pod("waiting", NEVER_START))
    assert kube.core.read_namespaced_pod("waiting", namespace).status.phase == "Pending"
    assert names(kube.core.list_namespaced_pod(namespace, field_selector="status.phase=Pending")) == {"waiting"}
    assert names(kube.core.list_namespaced_pod(namespace, field_selector="status.phase=Running")) == set()
    assert names(kube.core.list_namespaced_pod(namespace, field_selector="status.phase!=Pending")) == set()
    assert names(
        kube.core.list_namespaced_pod(namespace, field_selector="metadata.name=waiting,status.phase=Pending")
    ) == {"waiting"}


def test_pod_phase_field_selector_after_scripted_exit(kube, namespace):
    """Scripted containers (kubesim.io/run-seconds, kubesim.io/exit-code) end the pod's life."""
    kube.core.create_namespaced_pod(
        namespace, pod("ok", {"kubesim.io/run-seconds": "0.2", "kubesim.io/exit-code": "0"}, restart_policy="Never")
    )
    kube.core.create_namespaced_pod(
        namespace, pod("bad", {"kubesim.io/run-seconds": "0.2", "kubesim.io/exit-code": "3"}, restart_policy="Never")
    )
    wait_for(lambda: kube.core.read_namespaced_pod("ok", namespace).status.phase == "Succeeded", "pod ok Succeeded", 15)
    wait_for(lambda: kube.core.read_namespaced_pod("bad", namespace).status.phase == "Failed", "pod bad Failed", 15)
    assert names(kube.core.list_namespaced_pod(namespace, field_selector="status.phase=Succeeded")) == {"ok"}
    assert names(kube.core.list_namespaced_pod(namespace, field_selector="status.phase=Failed")) == {"bad"}
    bad = kube.core.read_namespaced_pod("bad", namespace)
    assert bad.status.container_statuses[0].state.terminated.exit_code == 3


# --- Watch, patch, delete ------------------------------------------------------------------------


def watch_configmap_lifecycle(kube, namespace: str, name: str) -> list[tuple[str, dict | None, str]]:
    """Watches ConfigMaps while another thread creates, patches and deletes `name`.

    Returns (event type, data, resourceVersion) for each event about `name`, up to DELETED.
    """
    start_rv = kube.core.list_namespaced_config_map(namespace).metadata.resource_version
    errors: list[BaseException] = []

    def mutate() -> None:
        try:
            # No wait for the watch to connect: it starts from start_rv, so changes made before
            # it connects are replayed from the server's history.
            kube.core.create_namespaced_config_map(namespace, cm(name, {"n": "1"}))
            kube.core.patch_namespaced_config_map(name, namespace, {"data": {"n": "2"}})
            kube.core.delete_namespaced_config_map(name, namespace)
        except BaseException as e:  # reported by the test thread
            errors.append(e)

    seen: list[tuple[str, dict | None, str]] = []
    w = watch.Watch()
    mutator = threading.Thread(target=mutate, daemon=True)
    mutator.start()
    for event in w.stream(
        kube.core.list_namespaced_config_map,
        namespace,
        resource_version=start_rv,
        timeout_seconds=10,
        _request_timeout=20,
    ):
        assert event["type"] != "ERROR", f"watch error event: {event['raw_object']}"
        obj = event["object"]
        if obj.metadata.name != name:
            continue
        seen.append((event["type"], obj.data, obj.metadata.resource_version))
        if event["type"] == "DELETED":
            w.stop()
            break
    mutator.join(timeout=10)
    assert not errors, f"changes during the watch failed: {errors}"
    return seen


def test_watch_sees_added_modified_deleted(kube, namespace):
    seen = watch_configmap_lifecycle(kube, namespace, "w")
    assert [t for t, _, _ in seen] == ["ADDED", "MODIFIED", "DELETED"], seen
    assert seen[0][1] == {"n": "1"}
    assert seen[1][1] == {"n": "2"}


def test_watch_deleted_event_carries_the_deletion_resource_version(kube, namespace):
    """The DELETED object has the revision of the delete, so resuming from it does not replay it."""
    seen = watch_configmap_lifecycle(kube, namespace, "w")
    assert [t for t, _, _ in seen] == ["ADDED", "MODIFIED", "DELETED"], seen
    rvs = [int(rv) for _, _, rv in seen]
    assert rvs[0] < rvs[1] < rvs[2], f"resourceVersions of ADDED, MODIFIED, DELETED: {rvs}"


def test_strategic_merge_patch(kube, namespace):
    kube.core.create_namespaced_config_map(namespace, cm("p", {"keep": "1", "change": "old", "drop": "x"}, {"l1": "a"}))
    before = kube.core.read_namespaced_config_map("p", namespace)
    patched = kube.core.patch_namespaced_config_map(
        "p", namespace, {"metadata": {"labels": {"l2": "b"}}, "data": {"change": "new", "drop": None, "add": "2"}}
    )
    assert patched.data == {"keep": "1", "change": "new", "add": "2"}
    assert patched.metadata.labels == {"l1": "a", "l2": "b"}
    assert int(patched.metadata.resource_version) > int(before.metadata.resource_version)
    assert kube.core.read_namespaced_config_map("p", namespace).data == patched.data


def test_delete_then_get_is_404(kube, namespace):
    kube.core.create_namespaced_config_map(namespace, cm("gone"))
    kube.core.delete_namespaced_config_map("gone", namespace)
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_namespaced_config_map("gone", namespace)
    status, body = api_error(excinfo)
    assert status == 404
    assert body.get("reason") == "NotFound"
    assert cm_names(kube, namespace) == set()
    with pytest.raises(ApiException) as excinfo:
        kube.core.delete_namespaced_config_map("gone", namespace)
    assert excinfo.value.status == 404


def test_configmap_delete_answers_a_success_status(kube, namespace):
    """A ConfigMap is removed at once; the API server answers with a Status, not the object."""
    created = kube.core.create_namespaced_config_map(namespace, cm("gone"))
    deleted = kube.core.delete_namespaced_config_map("gone", namespace)
    if not isinstance(deleted, dict):  # the client types this response as a plain object
        deleted = kube.core.api_client.sanitize_for_serialization(deleted)
    assert deleted.get("kind") == "Status", deleted
    assert deleted.get("status") == "Success", deleted
    assert deleted.get("details", {}).get("name") == "gone", deleted
    assert deleted.get("details", {}).get("uid") == created.metadata.uid, deleted


def test_owner_deletion_garbage_collects_dependent(kube, namespace):
    owner = kube.core.create_namespaced_config_map(namespace, cm("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    kube.core.create_namespaced_config_map(namespace, cm("dependent", ownerReferences=[ref]))
    kube.core.create_namespaced_config_map(namespace, cm("bystander"))
    dep = kube.core.read_namespaced_config_map("dependent", namespace)
    assert dep.metadata.owner_references[0].uid == owner.metadata.uid
    kube.core.delete_namespaced_config_map("owner", namespace)
    wait_for(
        lambda: is_gone(lambda: kube.core.read_namespaced_config_map("dependent", namespace)),
        "the dependent ConfigMap to be garbage-collected",
        timeout=10,
    )
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_namespaced_config_map("dependent", namespace)
    assert excinfo.value.status == 404
    assert cm_names(kube, namespace) == {"bystander"}


# --- Errors --------------------------------------------------------------------------------------


def test_stale_update_is_409_and_changes_nothing(kube, namespace):
    kube.core.create_namespaced_config_map(namespace, cm("s", {"v": "1"}))
    stale = kube.core.read_namespaced_config_map("s", namespace)
    current = kube.core.patch_namespaced_config_map("s", namespace, {"data": {"v": "2"}})
    stale.data = {"v": "3"}
    with pytest.raises(ApiException) as excinfo:
        kube.core.replace_namespaced_config_map("s", namespace, stale)
    status, body = api_error(excinfo)
    assert status == 409
    assert body.get("reason") == "Conflict"
    after = kube.core.read_namespaced_config_map("s", namespace)
    assert after.data == {"v": "2"}
    assert after.metadata.resource_version == current.metadata.resource_version


def test_duplicate_create_is_409_already_exists(kube, namespace):
    first = kube.core.create_namespaced_config_map(namespace, cm("dup", {"v": "1"}))
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_config_map(namespace, cm("dup", {"v": "2"}))
    status, body = api_error(excinfo)
    assert status == 409
    assert body.get("reason") == "AlreadyExists"
    assert body.get("details", {}).get("name") == "dup"
    after = kube.core.read_namespaced_config_map("dup", namespace)
    assert after.data == {"v": "1"}
    assert after.metadata.resource_version == first.metadata.resource_version


def test_invalid_name_is_422_and_creates_nothing(kube, namespace):
    before = cm_names(kube, namespace)
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_config_map(namespace, cm("Bad_Name"))
    status, body = api_error(excinfo)
    assert status == 422
    assert body.get("reason") == "Invalid"
    assert body.get("details", {}).get("kind") == "ConfigMap"
    assert cm_names(kube, namespace) == before
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_namespaced_config_map("Bad_Name", namespace)
    assert excinfo.value.status == 404


def test_create_in_missing_namespace_is_404(kube):
    missing = "no-such-namespace-e2e"
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_config_map(missing, cm("orphan"))
    status, body = api_error(excinfo)
    assert status == 404
    assert body.get("reason") == "NotFound"
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_namespace(missing)
    assert excinfo.value.status == 404


# --- Custom resources ----------------------------------------------------------------------------

GROUP = "e2e.kubesim.io"
PLURAL = "widgets"
CRD_NAME = f"{PLURAL}.{GROUP}"


def widget_crd() -> dict:
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": open_object, "status": open_object},
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def widget_crd_installed(kube):
    kube.apiext.create_custom_resource_definition(widget_crd())

    def established() -> bool:
        crd = kube.apiext.read_custom_resource_definition(CRD_NAME)
        conditions = (crd.status.conditions or []) if crd.status else []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, f"CRD {CRD_NAME} to be Established", timeout=10)
    yield CRD_NAME
    try:
        kube.apiext.delete_custom_resource_definition(CRD_NAME)
    except ApiException as e:
        if e.status != 404:
            raise
    # CRD removal is asynchronous (its instances are cleaned up first); the next test recreates it.
    wait_for(
        lambda: is_gone(lambda: kube.apiext.read_custom_resource_definition(CRD_NAME)),
        f"CRD {CRD_NAME} to be removed",
        timeout=10,
    )


def test_custom_resource_generation_and_status(kube, namespace, widget_crd_installed):
    co = kube.custom
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 1},
    }
    created = co.create_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, body)
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["uid"]
    got = co.get_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, "w1")
    assert got["spec"] == {"size": 1}
    assert got["kind"] == "Widget"

    spec_patched = co.patch_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, "w1", {"spec": {"size": 2}})
    assert spec_patched["spec"] == {"size": 2}
    assert spec_patched["metadata"]["generation"] == 2

    status_patched = co.patch_namespaced_custom_object_status(
        GROUP, "v1", namespace, PLURAL, "w1", {"status": {"phase": "Ready"}}
    )
    assert status_patched["status"] == {"phase": "Ready"}
    assert status_patched["metadata"]["generation"] == 2
    assert int(status_patched["metadata"]["resourceVersion"]) > int(spec_patched["metadata"]["resourceVersion"])

    # With the status subresource, the main endpoint ignores status changes (and vice versa).
    ignored = co.patch_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, "w1", {"status": {"phase": "Hacked"}})
    assert ignored["status"] == {"phase": "Ready"}
    assert ignored["metadata"]["generation"] == 2
    final = co.get_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, "w1")
    assert final["spec"] == {"size": 2}
    assert final["status"] == {"phase": "Ready"}
    assert final["metadata"]["generation"] == 2

    listed = co.list_namespaced_custom_object(GROUP, "v1", namespace, PLURAL)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]


def test_custom_resource_create_drops_status(kube, namespace, widget_crd_installed):
    """With the status subresource enabled, a create cannot set status (it is dropped)."""
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w2"},
        "spec": {"size": 1},
        "status": {"phase": "Bogus"},
    }
    created = kube.custom.create_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, body)
    assert "status" not in created, created
    got = kube.custom.get_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, "w2")
    assert "status" not in got, got


# --- Control API ---------------------------------------------------------------------------------


def test_request_counts(kubesim, kube, namespace):
    assert kubesim.sim("DELETE", "requests").status_code == 200
    for _ in range(3):
        kube.core.list_namespaced_config_map(namespace)
    resp = kubesim.sim("GET", "requests")
    assert resp.status_code == 200
    rows = [
        r
        for r in resp.json()
        if r["verb"] == "list" and r["resource"] == "configmaps" and r["namespace"] == namespace and not r["watch"]
    ]
    assert len(rows) == 1, resp.json()
    assert rows[0]["count"] == 3
    assert rows[0]["group"] == ""


def test_fault_injection_fails_exactly_the_next_create(kubesim, kube, namespace):
    resp = kubesim.sim("POST", "faults", json={"verb": "create", "resource": "configmaps", "count": 1, "code": 500})
    try:
        assert resp.status_code in (200, 201), resp.text
        with pytest.raises(ApiException) as excinfo:
            kube.core.create_namespaced_config_map(namespace, cm("first"))
        assert excinfo.value.status == 500
        with pytest.raises(ApiException) as excinfo:
            kube.core.read_namespaced_config_map("first", namespace)
        assert excinfo.value.status == 404
        created = kube.core.create_namespaced_config_map(namespace, cm("first"))
        assert created.metadata.name == "first"
        kube.core.create_namespaced_config_map(namespace, cm("second"))
        assert cm_names(kube, namespace) == {"first", "second"}
    finally:
        kubesim.sim("DELETE", "faults")

