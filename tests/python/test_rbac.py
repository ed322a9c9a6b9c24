"""The real `kubernetes` client with a service-account token against kubesim over HTTPS: RBAC
allows what a Role grants and refuses the rest with the API server's own 403 text.

The in-cluster test drives the client's own in-cluster loader (what `load_incluster_config()`
runs) with the token and CA written to files and the `KUBERNETES_SERVICE_*` variables set, as a
pod sees them; only the file locations differ from a pod's
`/var/run/secrets/kubernetes.io/serviceaccount`.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config


def grant_pod_reading(kube_https, namespace: str, sa: str) -> None:
    kube_https.core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    kube_https.rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    )
    kube_https.rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"{sa}-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        },
    )


def token_for(kube_https, namespace: str, sa: str) -> str:
    """A token from the TokenRequest API, as the kubelet gets one for a pod's volume."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    issued = kube_https.core.create_namespaced_service_account_token(sa, namespace, request)
    return issued.status.token


def assert_forbidden_secrets(core: client.CoreV1Api, namespace: str, sa: str) -> None:
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_secret(namespace)
    assert refused.value.status == 403
    status = json.loads(refused.value.body)
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        f'secrets is forbidden: User "system:serviceaccount:{namespace}:{sa}" '
        f'cannot list resource "secrets" in API group "" in the namespace "{namespace}"'
    )


def test_a_token_lists_pods_and_is_refused_secrets(kubesim_https, kube_https, https_namespace):
    ns = https_namespace
    grant_pod_reading(kube_https, ns, "runner")
    token = token_for(kube_https, ns, "runner")

    configuration = client.Configuration()
    configuration.host = kubesim_https.url
    configuration.ssl_ca_cert = str(kubesim_https.ca_file)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    core = client.CoreV1Api(client.ApiClient(configuration))

    assert core.list_namespaced_pod(ns).items == []
    assert_forbidden_secrets(core, ns, "runner")
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_pod("default")
    assert refused.value.status == 403

    journal = kubesim_https.sim("GET", "authz").json()
    mine = {(r["verb"], r["resource"], r["namespace"], r["allowed"]) for r in journal if r["user"] == f"system:serviceaccount:{ns}:runner"}
    assert ("list", "pods", ns, True) in mine
    assert ("list", "secrets", ns, False) in mine


def test_the_in_cluster_loader_works_with_a_pods_token_ca_and_service_variables(
    kubesim_https, kube_https, https_namespace, tmp_path
):
    ns = https_namespace
    grant_pod_reading(kube_https, ns, "agent")
    token_file = tmp_path / "token"
    token_file.write_text(token_for(kube_https, ns, "agent"))
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(kubesim_https.ca_file.read_bytes())
    host, port = kubesim_https.url.removeprefix("https://").rsplit(":", 1)

    configuration = client.Configuration()
    incluster_config.InClusterConfigLoader(
        token_filename=str(token_file),
        cert_filename=str(ca_file),
        environ={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port},
    ).load_and_set(configuration)
    core = client.CoreV1Api(client.ApiClient(configuration))

    assert core.list_namespaced_pod(ns).items == []
    assert_forbidden_secrets(core, ns, "agent")
