"""The real Helm (client-go, from the `helm-sdkpy` wheel) against kubesim over HTTPS.

Helm talks to the API server as client-go does: discovery of apps/v1 and rbac, protobuf for the
Secret that stores the release, strategic-merge patches on upgrade, watches while it waits for
the Deployment to roll out, cascading deletes on uninstall. A failure here is a kubesim fidelity
bug, not something to work around in the test.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import helm_sdkpy as helm

from simutil import is_gone, wait_for

CHART = Path(__file__).parent / "charts" / "tiny"
RELEASE = "demo"


def run(coro):
    return asyncio.run(coro)


def secret_value(kube_https, namespace: str, name: str, key: str) -> str:
    secret = kube_https.core.read_namespaced_secret(name, namespace)
    return base64.b64decode(secret.data[key]).decode()


def ready_pods(kube_https, namespace: str) -> list:
    pods = kube_https.core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/instance={RELEASE}")
    return [
        p
        for p in pods.items
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
    ]


def release_secrets(kube_https, namespace: str) -> list[str]:
    secrets = kube_https.core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={RELEASE}")
    return sorted(s.metadata.name for s in secrets.items)


def replica_report(kube_https, namespace: str, pod: str) -> list[str]:
    """What the probe program in `pod` has reported so far, once it got through its checks (its
    `secrets:` line) and its mounted Secret (`secret:`)."""

    def done():
        log = kube_https.core.read_namespaced_pod_log(pod, namespace)
        lines = log.splitlines()
        reported = any(line.startswith("secrets:") for line in lines)
        assert reported and any(line.startswith("secret:") for line in lines), f"its log so far: {log!r}"
        return lines

    return wait_for(done, f"the report of {pod}", timeout=45)


def line(lines: list[str], prefix: str) -> str:
    """The last line with `prefix`."""
    found = [entry for entry in lines if entry.startswith(prefix)]
    assert found, f"no line starting {prefix!r} in {lines}"
    return found[-1]


def test_helm_installs_upgrades_and_uninstalls_a_chart(kubesim_https, kube_https, https_namespace):
    ns = https_namespace
    configuration = helm.Configuration(namespace=ns, kubeconfig=kubesim_https.kubeconfig.read_text())
    assert kubesim_https.sim("DELETE", "journal").status_code == 200

    # Install, waiting for the Deployment to be ready, as `helm install --wait` does.
    release = run(helm.Install(configuration).run(RELEASE, str(CHART), wait=True, timeout=60))
    assert release["info"]["status"] == "deployed", release["info"]
    deployment = kube_https.apps.read_namespaced_deployment(f"{RELEASE}-web", ns)
    assert deployment.status.ready_replicas == 2
    assert deployment.status.updated_replicas == 2
    pods = ready_pods(kube_https, ns)
    assert len(pods) == 2
    assert {p.spec.service_account_name for p in pods} == {f"{RELEASE}-runner"}
    kube_https.core.read_namespaced_service_account(f"{RELEASE}-runner", ns)
    role = kube_https.rbac.read_namespaced_role(f"{RELEASE}-pod-reader", ns)
    assert role.rules[0].resources == ["pods"]
    binding = kube_https.rbac.read_namespaced_role_binding(f"{RELEASE}-runner-reads-pods", ns)
    assert binding.subjects[0].name == f"{RELEASE}-runner"
    service = kube_https.core.read_namespaced_service(f"{RELEASE}-web", ns)
    assert service.spec.cluster_ip
    assert secret_value(kube_https, ns, f"{RELEASE}-greeting", "greeting") == "hello"
    assert release_secrets(kube_https, ns) == [f"sh.helm.release.v1.{RELEASE}.v1"]

    # The two replicas are real processes, each in its own pod network, listening on 0.0.0.0:8080.
    # Each resolves the Service, reaches the other one through it, lists pods through in-cluster
    # config with its service account's token (the chart's Role) and is refused Secrets.
    names = sorted(p.metadata.name for p in pods)
    user = f"system:serviceaccount:{ns}:{RELEASE}-runner"
    for me in names:
        (other,) = [n for n in names if n != me]
        lines = replica_report(kube_https, ns, me)
        node = kube_https.core.read_namespaced_pod(me, ns).spec.node_name
        ip = service.spec.cluster_ip
        assert line(lines, "second listener:") == "second listener: Address already in use"
        assert line(lines, "token:") == f"token: {user} bound to pod {me} on {node}"
        assert line(lines, "resolved") == (
            f"resolved {RELEASE}-web -> {ip} (fqdn {ip}); peer through the Service: {other}"
        )
        assert line(lines, "pods:") == f"pods: {' '.join(names)}"
        assert line(lines, "secrets:") == (
            f'secrets: 403 secrets is forbidden: User "{user}" cannot list resource "secrets" '
            f'in API group "" in the namespace "{ns}"'
        )
        assert line(lines, "secret:") == "secret: hello"
    # client-go stored the release as protobuf, and kubesim understood it.
    journal = kubesim_https.sim("GET", "journal").json()
    release_writes = [
        e for e in journal if e["path"].startswith(f"/api/v1/namespaces/{ns}/secrets") and e["method"] == "POST"
    ]
    assert any(e["contentType"] == "application/vnd.kubernetes.protobuf" for e in release_writes), release_writes

    # Upgrade with a value change: the Secret changes and the pods roll to a new template.
    old_hashes = {p.metadata.labels["pod-template-hash"] for p in pods}
    release = run(
        helm.Upgrade(configuration).run(RELEASE, str(CHART), values={"greeting": "bonjour"}, wait=True, timeout=60)
    )
    assert release["info"]["status"] == "deployed", release["info"]
    assert secret_value(kube_https, ns, f"{RELEASE}-greeting", "greeting") == "bonjour"
    deployment = kube_https.apps.read_namespaced_deployment(f"{RELEASE}-web", ns)
    assert deployment.metadata.annotations["deployment.kubernetes.io/revision"] == "2"

    def rolled():
        pods = ready_pods(kube_https, ns)
        hashes = {p.metadata.labels["pod-template-hash"] for p in pods}
        return len(pods) == 2 and not (hashes & old_hashes)

    wait_for(rolled, "the pods to roll to the upgraded template", timeout=30)
    for pod in ready_pods(kube_https, ns):
        assert line(replica_report(kube_https, ns, pod.metadata.name), "secret:") == "secret: bonjour"
    assert release_secrets(kube_https, ns) == [
        f"sh.helm.release.v1.{RELEASE}.v1",
        f"sh.helm.release.v1.{RELEASE}.v2",
    ]

    # Uninstall: none of the release's objects is left, down to the pods its ReplicaSets made.
    run(helm.Uninstall(configuration).run(RELEASE, wait=True, timeout=60))
    reads = {
        "deployment": lambda: kube_https.apps.read_namespaced_deployment(f"{RELEASE}-web", ns),
        "service": lambda: kube_https.core.read_namespaced_service(f"{RELEASE}-web", ns),
        "secret": lambda: kube_https.core.read_namespaced_secret(f"{RELEASE}-greeting", ns),
        "serviceaccount": lambda: kube_https.core.read_namespaced_service_account(f"{RELEASE}-runner", ns),
        "role": lambda: kube_https.rbac.read_namespaced_role(f"{RELEASE}-pod-reader", ns),
        "rolebinding": lambda: kube_https.rbac.read_namespaced_role_binding(f"{RELEASE}-runner-reads-pods", ns),
    }
    for what, read in reads.items():
        assert is_gone(read), f"{what} left after uninstall"
    assert release_secrets(kube_https, ns) == []

    def collected():
        rs = kube_https.apps.list_namespaced_replica_set(ns).items
        pods = kube_https.core.list_namespaced_pod(ns).items
        return not rs and not pods

    wait_for(collected, "the ReplicaSets and pods to be garbage-collected", timeout=30)
    try:
        run(helm.Status(configuration).run(RELEASE))
    except helm.ReleaseNotFoundError:
        pass
    except helm.HelmError as e:
        raise AssertionError(f"status of an uninstalled release: {e}") from e
    else:
        raise AssertionError("the uninstalled release still has a status")


def test_helm_with_openapi_validation_gets_the_servers_field_warnings(
    kubesim_https, kube_https, https_namespace, capfd
):
    """With OpenAPI validation on, Helm reads /openapi/v3 and finds that the server validates
    fields itself (`fieldValidation` on PATCH), so it leaves validation to the server. A misspelt
    field then installs with a warning client-go prints, and the server drops the field, as a
    real API server does."""
    ns = https_namespace
    configuration = helm.Configuration(namespace=ns, kubeconfig=kubesim_https.kubeconfig.read_text())
    assert kubesim_https.sim("DELETE", "authz").status_code == 200
    release = run(
        helm.Install(configuration).run(
            RELEASE, str(CHART), values={"typo": True}, wait=True, timeout=60, disable_openapi_validation=False
        )
    )
    assert release["info"]["status"] == "deployed", release["info"]
    assert 'Warning: unknown field \\"spec.replica\\"' in capfd.readouterr().err
    paths = {r["resource"] for r in kubesim_https.sim("GET", "authz").json()}
    assert {"/openapi/v3", "/openapi/v3/apis/apps/v1"} <= paths, sorted(paths)
    assert "/openapi/v2" not in paths, "the v3 documents were enough"
    raw = kube_https.apps.read_namespaced_deployment(f"{RELEASE}-web", ns, _preload_content=False)
    stored = json.loads(raw.data)
    assert "replica" not in stored["spec"], stored["spec"]
    assert stored["spec"]["replicas"] == 2
    run(helm.Uninstall(configuration).run(RELEASE, wait=True, timeout=60))
    assert is_gone(lambda: kube_https.apps.read_namespaced_deployment(f"{RELEASE}-web", ns))
