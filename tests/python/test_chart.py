"""The Helm chart, statically: `helm lint --strict`, `helm template`, and every rendered manifest
validated against the Kubernetes schemas, for the default values and each certificate mode; then
what a platform team relies on in the rendered objects (RBAC, security context, probes, leader
election, policy, certificates). The install into kubesim is another test (it needs kubesim's
HTTPS, RBAC and Deployments).
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import helm_python
import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import chartutil as cu
from chartutil import MODES, NAMESPACE, find, one, render

helm_python.disable_logging()

FULL = "spark-spark-submitter"
SUBMITTER = f"{FULL}-submitter"
OPERATOR = f"{FULL}-operator"
WARNING = 2  # helm lint severities: 1 info, 2 warning, 3 error


def merged(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = merged(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


@pytest.mark.parametrize("mode", MODES)
def test_lint_strict_passes_in_every_mode(mode):
    report = helm_python.lint(str(cu.CHART), MODES[mode], strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert report["errors"] == [] and problems == [], report


def test_lint_strict_reports_values_the_schema_refuses():
    # The lint above can fail: a misspelt key is an error, not silently ignored.
    report = helm_python.lint(str(cu.CHART), {"submitter": {"replica": 3}}, strict=True)
    assert any("replica" in e for e in report["errors"]), report


def test_lint_of_helm_sdkpy_finds_no_warning():
    # helm-sdkpy (the library that installs the chart into kubesim) lints with default values
    # and without --strict; warnings are counted here as strict would. In its own process: two
    # Go runtimes (this one and helm-python-sdk's) should not share one.
    program = (
        "import asyncio, json, sys, helm_sdkpy\n"
        "config = helm_sdkpy.Configuration(namespace=sys.argv[2])\n"
        "print(json.dumps(asyncio.run(helm_sdkpy.Lint(config).run(sys.argv[1]))))\n")
    run = subprocess.run([sys.executable, "-c", program, str(cu.CHART), NAMESPACE],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["Errors"] is None and all(m["Severity"] < WARNING for m in report["Messages"]), report


@pytest.mark.parametrize("mode", MODES)
def test_every_rendered_manifest_validates_against_the_kubernetes_schemas(mode):
    objects = render(MODES[mode])
    assert objects
    for obj in objects:
        try:
            cu.validate(obj)
        except Exception as error:  # noqa: BLE001 - name the object that failed
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']} ({mode}): {str(error).splitlines()[0]}")


def test_crds_are_the_operators_own_and_validate():
    crds = sorted(cu.crds(), key=lambda c: c["metadata"]["name"])
    assert [c["metadata"]["name"] for c in crds] == [
        "scheduledsparkapplications.sparkoperator.k8s.io",
        "sparkapplications.sparkoperator.k8s.io",
        "sparkconnects.sparkoperator.k8s.io",
    ]
    for crd, file in zip(crds, ["scheduledsparkapplications.yaml", "sparkapplications.yaml", "sparkconnects.yaml"]):
        committed = yaml.load((cu.REPO / "operator" / "crd" / file).read_text(), Loader=cu.LOADER)
        assert crd == committed
        cu.validate(crd)


def test_crd_is_not_a_template_so_an_existing_kubeflow_crd_is_left_alone():
    # Helm installs crds/ only when the CRD is absent and never upgrades or deletes it; a
    # templated CRD would be overwritten, or refused as owned by another release.
    for mode in MODES:
        assert not find(render(MODES[mode]), "CustomResourceDefinition"), mode


def pods_of(objects):
    for obj in objects:
        if obj["kind"] == "Deployment":
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]
        elif obj["kind"] == "Pod":
            yield obj["metadata"]["name"], obj["spec"]


@pytest.mark.parametrize("mode", MODES)
def test_every_container_runs_restricted(mode):
    pods = list(pods_of(render(MODES[mode])))
    assert {name for name, _ in pods} >= {SUBMITTER, OPERATOR}
    for name, spec in pods:
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in spec["containers"] + spec.get("initContainers", []):
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0, name
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert container["resources"]["requests"] and container["resources"]["limits"]["memory"], name


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_probes_need_no_client_certificate():
    objects = render()
    submitter = one(objects, "Deployment", SUBMITTER)["spec"]["template"]["spec"]["containers"][0]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        # An httpGet probe presents no certificate: these paths answer without one.
        assert submitter[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    operator = one(objects, "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"][0]
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert env_of(operator)["OPERATOR_PROBE_LISTEN"] == "0.0.0.0:8081"


def test_operator_elects_a_leader_in_the_release_namespace_as_its_pod():
    operator = one(render({"operator": {"replicas": 2}}), "Deployment", OPERATOR)
    env = env_of(operator["spec"]["template"]["spec"]["containers"][0])
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["OPERATOR_LEASE_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["OPERATOR_LEADER_ELECT"] == "true"
    assert env["OPERATOR_LEASE_NAME"] == f"{OPERATOR}-leader"
    # Standbys are unready by design, so a surge replica would wait forever for the lease.
    assert operator["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": "100%"}


def test_the_chart_makes_the_leader_lease_so_uninstall_removes_it():
    lease = one(render(), "Lease", f"{OPERATOR}-leader")
    # No holder: the first replica takes it over; Helm deletes it with the release.
    assert lease["metadata"]["namespace"] == NAMESPACE and lease["spec"] == {}
    assert not find(render({"operator": {"leaderElection": {"enabled": False}}}), "Lease")


def test_only_the_submitter_has_a_disruption_budget():
    objects = render({"operator": {"replicas": 3}})
    budgets = find(objects, "PodDisruptionBudget")
    assert [b["metadata"]["name"] for b in budgets] == [SUBMITTER]
    assert budgets[0]["spec"]["maxUnavailable"] == 1
    submitter = one(objects, "Deployment", SUBMITTER)["spec"]
    assert submitter["replicas"] == 2
    anti = submitter["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_hard_anti_affinity_requires_one_replica_per_node():
    spec = one(render({"submitter": {"podAntiAffinity": "hard"}}), "Deployment", SUBMITTER)["spec"]["template"]["spec"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in spec["affinity"]["podAntiAffinity"]


def policy_of(objects):
    cm = one(objects, "ConfigMap", f"{SUBMITTER}-policy")
    return yaml.safe_load(cm["data"]["policy.yaml"])


def test_policy_allows_the_operator_into_the_job_namespaces_as_the_driver_account():
    policy = policy_of(render({
        "jobNamespaces": ["team-a", "team-b"],
        "submitter": {"policy": {"clients": [{"identity": "ci.example.com", "namespaces": ["team-a"], "serviceAccounts": ["ci"]}]}},
    }))
    assert policy == {"clients": [
        {"identity": f"{OPERATOR}.{NAMESPACE}.svc", "namespaces": ["team-a", "team-b"], "serviceAccounts": ["spark-operator-spark"]},
        {"identity": "ci.example.com", "namespaces": ["team-a"], "serviceAccounts": ["ci"]},
    ]}


def test_policy_file_is_accepted_by_the_submitter(tmp_path: Path):
    # The rendered policy must load in the real binary: `serve` reads it before anything else
    # and fails fast on a bad one; a good one gets as far as the missing kubeconfig.
    policy = tmp_path / "policy.yaml"
    objects = render({"jobNamespaces": [], "kubeflowClient": {"enabled": True}})
    policy.write_text(one(objects, "ConfigMap", f"{SUBMITTER}-policy")["data"]["policy.yaml"])
    assert policy_of(objects)["clients"][0]["namespaces"] == ["*"]
    run = subprocess.run(
        [cu.submitter_bin(), "serve", "--insecure-dev", "--policy", str(policy),
         "--kubeconfig", str(tmp_path / "absent"), "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=30)
    assert run.returncode != 0
    assert "load_policy" not in run.stdout + run.stderr and "read_kubeconfig" in run.stdout + run.stderr, run.stdout + run.stderr


def test_changed_policy_rolls_the_submitter():
    def checksum(values):
        meta = one(render(values), "Deployment", SUBMITTER)["spec"]["template"]["metadata"]
        return meta["annotations"]["checksum/policy"]
    assert checksum({}) != checksum({"jobNamespaces": ["other"]})


def rules_by_namespace(objects, subject: str):
    """(namespace or '*') -> set of (group, resource, verb[, name]) the service account is granted."""
    roles = {(r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"]): r for r in objects if r["kind"] in ("Role", "ClusterRole")}
    grants: dict[str, set] = {}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == subject for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else "*"
        role = roles[(ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames", [None]):
                            grants.setdefault(namespace, set()).add((group, resource, verb) + ((name,) if name else ()))
    return grants


def triples(spec: str) -> set:
    """'group/resource: verb verb; ...' -> {(group, resource, verb)}."""
    out = set()
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        target, verbs = (x.strip() for x in part.split(":"))
        # "group/resource[/subresource]", or a core "resource" (its first segment has no dot).
        group, _, resource = target.partition("/") if "." in target.split("/")[0] else ("", "", target)
        for verb in verbs.split():
            out.add((group, resource, verb))
    return out


SUBMITTER_WRITES = triples(
    "pods: get create delete; pods/log: get; configmaps: get create patch delete; services: get create patch delete; "
    "persistentvolumeclaims: get create patch delete; networking.k8s.io/networkpolicies: get create patch delete; "
    "sparkoperator.k8s.io/sparkapplications/finalizers: update")
SUBMITTER_WATCH = triples("pods: list watch; configmaps: list watch")
SUBMITTER_RECORDS = triples("configmaps: get create update delete")
OPERATOR_RULES = triples(
    "sparkoperator.k8s.io/sparkapplications: get list watch create delete; sparkoperator.k8s.io/sparkapplications/status: update; "
    "sparkoperator.k8s.io/scheduledsparkapplications: get list watch; "
    "sparkoperator.k8s.io/scheduledsparkapplications/status: update; "
    "sparkoperator.k8s.io/sparkconnects: list watch; sparkoperator.k8s.io/sparkconnects/status: update; "
    "pods: get list watch create delete; events.k8s.io/events: create patch; events: list watch; resourcequotas: list watch; "
    "services: get create; "
    "networking.k8s.io/ingresses: create; configmaps: get create update patch") | {
    ("policy", "poddisruptionbudgets", "create"),
    ("scheduling.volcano.sh", "podgroups", "create"), ("scheduling.x-k8s.io", "podgroups", "create")}


def test_submitter_rbac_is_exactly_what_its_code_uses():
    grants = rules_by_namespace(render({"jobNamespaces": ["team-a", "team-b"]}), SUBMITTER)
    assert grants == {"*": SUBMITTER_WATCH, "team-a": SUBMITTER_WRITES, "team-b": SUBMITTER_WRITES,
                      NAMESPACE: SUBMITTER_RECORDS}


def test_operator_rbac_is_exactly_what_its_code_uses():
    grants = rules_by_namespace(render({"jobNamespaces": ["team-a"]}), OPERATOR)
    lease = f"{OPERATOR}-leader"
    assert grants == {
        "team-a": OPERATOR_RULES,
        NAMESPACE: {("coordination.k8s.io", "leases", "get", lease), ("coordination.k8s.io", "leases", "update", lease)},
    }


def test_operator_gets_crd_rights_only_when_it_installs_the_crd_and_configmaps_only_for_the_kubernetes_store():
    grants = rules_by_namespace(render({"jobNamespaces": [], "operator": {
        "installCRD": True, "recovery": {"store": "redis", "redis": {"url": "redis://redis:6379"}}}}), OPERATOR)
    crds = ("sparkapplications.sparkoperator.k8s.io", "scheduledsparkapplications.sparkoperator.k8s.io",
            "sparkconnects.sparkoperator.k8s.io")
    # configmaps: only the monitoring ConfigMap's create without the Kubernetes store.
    assert grants["*"] == {r for r in OPERATOR_RULES if r[1] != "configmaps"} | {("", "configmaps", "create")} | {
        ("apiextensions.k8s.io", "customresourcedefinitions", "create")} | {
        ("apiextensions.k8s.io", "customresourcedefinitions", verb, crd)
        for verb in ("get", "list", "watch", "patch") for crd in crds}
    assert not any(r[1] == "customresourcedefinitions" for r in rules_by_namespace(render(), OPERATOR).get("*", set()))


def test_cluster_wide_mode_binds_cluster_roles_and_makes_no_driver_accounts():
    objects = render({"jobNamespaces": []})
    assert set(rules_by_namespace(objects, SUBMITTER)) == {"*", NAMESPACE}
    assert not find(objects, "Role", "spark-operator-spark")
    env = env_of(one(objects, "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"][0])
    assert "OPERATOR_NAMESPACES" not in env
    assert "no driver service account" in cu.notes({"jobNamespaces": []})


def test_driver_account_exists_in_each_job_namespace_with_what_drivers_and_the_agent_use():
    objects = render({"jobNamespaces": ["team-a", "team-b"]})
    for ns in ("team-a", "team-b"):
        assert [a["metadata"]["namespace"] for a in find(objects, "ServiceAccount", "spark-operator-spark") if a["metadata"]["namespace"] == ns] == [ns]
    grants = rules_by_namespace(objects, "spark-operator-spark")
    assert set(grants) == {"team-a", "team-b"}
    assert ("", "pods", "create") in grants["team-a"] and ("", "pods", "deletecollection") in grants["team-a"]
    # The driver deletes its own Service by label when it ends; it never creates one.
    assert {r for r in grants["team-a"] if r[1] == "services"} == {("", "services", "deletecollection")}
    # The recovery agent's compare-and-swap of its progress ConfigMap.
    assert ("", "configmaps", "update") in grants["team-a"]
    no_store = rules_by_namespace(render({"operator": {"recovery": {"store": "none"}}}), "spark-operator-spark")
    assert ("", "configmaps", "update") not in no_store["default"]
    env = env_of(one(objects, "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"][0])
    assert env["OPERATOR_NAMESPACES"] == "team-a,team-b"


def secret_data(objects, name):
    secret = one(objects, "Secret", name)
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def test_self_signed_certificates_chain_to_one_ca_and_name_the_service_and_identities():
    objects = render({"kubeflowClient": {"enabled": True, "namespace": "kubeflow"}})
    ca = x509.load_pem_x509_certificate(secret_data(objects, f"{FULL}-ca")["tls.crt"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.not_valid_after_utc - ca.not_valid_before_utc >= timedelta(days=3649)

    server = secret_data(objects, f"{SUBMITTER}-tls")
    cert = x509.load_pem_x509_certificate(server["tls.crt"])
    cert.verify_directly_issued_by(ca)
    assert server["ca.crt"] == secret_data(objects, f"{FULL}-ca")["tls.crt"]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert set(names) == {SUBMITTER, f"{SUBMITTER}.{NAMESPACE}", f"{SUBMITTER}.{NAMESPACE}.svc", f"{SUBMITTER}.{NAMESPACE}.svc.cluster.local"}
    assert ExtendedKeyUsageOID.SERVER_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value

    for secret, identity, namespace in (
        (f"{OPERATOR}-client-tls", f"{OPERATOR}.{NAMESPACE}.svc", NAMESPACE),
        (f"{FULL}-kubeflow-client-tls", "kubeflow-spark-operator.kubeflow.svc", "kubeflow"),
    ):
        assert one(objects, "Secret", secret)["metadata"]["namespace"] == namespace
        data = secret_data(objects, secret)
        client = x509.load_pem_x509_certificate(data["tls.crt"])
        client.verify_directly_issued_by(ca)
        assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == identity
        assert identity in client.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        assert ExtendedKeyUsageOID.CLIENT_AUTH in client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        # The identity the certificate carries is one the policy knows.
        assert identity in [c["identity"] for c in policy_of(objects)["clients"]]
        # The renewal mark an upgrade compares with the clock.
        assert int(one(objects, "Secret", secret)["metadata"]["annotations"]["spark-submitter.io/renew-after"]) > 0


def test_self_signed_keys_load_in_the_submitter(tmp_path: Path):
    # The rendered PEMs are what rustls loads: `serve` gets past the TLS files to the kubeconfig.
    data = secret_data(render(), f"{SUBMITTER}-tls")
    for name, content in data.items():
        (tmp_path / name).write_bytes(content)
    (tmp_path / "policy.yaml").write_text("clients: []\n")
    run = subprocess.run(
        [cu.submitter_bin(), "serve", "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
         "--client-ca", str(tmp_path / "ca.crt"), "--policy", str(tmp_path / "policy.yaml"),
         "--kubeconfig", str(tmp_path / "absent"), "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=30)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "load_tls" not in out and "read_kubeconfig" in out, out


def test_cert_manager_mode_issues_from_the_charts_ca_or_the_given_issuer():
    objects = render(MODES["certManager"])
    assert not find(objects, "Secret")
    issuers = {i["metadata"]["name"]: i["spec"] for i in find(objects, "Issuer")}
    assert issuers == {f"{FULL}-self-signed": {"selfSigned": {}}, f"{FULL}-ca": {"ca": {"secretName": f"{FULL}-ca"}}}
    certs = {c["metadata"]["name"]: c["spec"] for c in find(objects, "Certificate")}
    assert certs[f"{FULL}-ca"]["isCA"] is True
    assert certs[SUBMITTER]["secretName"] == f"{SUBMITTER}-tls" and "server auth" in certs[SUBMITTER]["usages"]
    assert certs[f"{OPERATOR}-client"]["commonName"] == f"{OPERATOR}.{NAMESPACE}.svc"
    assert "client auth" in certs[f"{OPERATOR}-client"]["usages"]
    for name, spec in certs.items():
        if name != f"{FULL}-ca":
            assert spec["issuerRef"] == {"name": f"{FULL}-ca", "kind": "Issuer", "group": "cert-manager.io"}, name

    given = render(MODES["certManager+clusterIssuer"])
    assert not find(given, "Issuer")
    assert {c["spec"]["issuerRef"]["name"] for c in find(given, "Certificate")} == {"corp-ca"}
    assert one(given, "Certificate", f"{FULL}-kubeflow-client")["metadata"]["namespace"] == "kubeflow"


def test_cert_manager_refuses_a_namespaced_issuer_for_kubeflow_in_another_namespace():
    with pytest.raises(helm_python.HelmRenderError, match="ClusterIssuer"):
        render({"tls": {"mode": "certManager"}, "kubeflowClient": {"enabled": True, "namespace": "kubeflow"}})


def test_existing_secrets_are_mounted_and_required():
    objects = render(MODES["existingSecrets"])
    assert not find(objects, "Secret") and not find(objects, "Certificate")
    spec = one(objects, "Deployment", SUBMITTER)["spec"]["template"]["spec"]
    volumes = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert volumes == {"tls": "submitter-tls", "client-ca": "clients-ca"}
    assert env_of(spec["containers"][0])["SUBMITTER_CLIENT_CA"] == "/etc/submitter/client-ca/bundle.pem"
    operator = one(objects, "Deployment", OPERATOR)["spec"]["template"]["spec"]
    assert operator["volumes"][0]["secret"]["secretName"] == "operator-tls"
    with pytest.raises(helm_python.HelmRenderError, match="tls.existingSecrets.server is required"):
        render({"tls": {"mode": "existingSecrets", "existingSecrets": {"operatorClient": "x"}}})


@pytest.mark.parametrize("mode", MODES)
def test_certificates_are_mounted_as_whole_secrets_so_rotation_reaches_the_binaries(mode):
    for name, spec in pods_of(render(MODES[mode])):
        for container in spec["containers"]:
            for mount in container.get("volumeMounts", []):
                assert "subPath" not in mount, (name, mount)


def test_network_policies_admit_the_clients_and_reach_only_the_api_server_and_dns():
    objects = render(merged(MODES["selfSigned+kubeflow"], {
        "submitter": {"networkPolicy": {"allowedClients": [{"namespaceSelector": {"matchLabels": {"team": "ci"}}}]}},
        "networkPolicy": {"apiServer": {"cidrs": ["192.0.2.10/32"], "ports": [6443]}},
    }))
    submitter = one(objects, "NetworkPolicy", SUBMITTER)["spec"]
    assert submitter["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = submitter["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8443}]
    components = [p.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component") for p in ingress["from"]]
    assert components[:2] == ["operator", "test"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kubeflow"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "spark-operator"}}} in ingress["from"]
    assert {"namespaceSelector": {"matchLabels": {"team": "ci"}}} in ingress["from"]
    api, dns = submitter["egress"]
    assert api == {"ports": [{"protocol": "TCP", "port": 6443}], "to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}]}
    assert {p["port"] for p in dns["ports"]} == {53}

    operator = one(objects, "NetworkPolicy", OPERATOR)["spec"]
    assert operator["ingress"] == []
    to_submitter = operator["egress"][-1]
    assert to_submitter["ports"] == [{"protocol": "TCP", "port": 8443}]
    assert to_submitter["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "submitter"
    assert not find(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")


def test_service_monitors_scrape_metrics_without_client_certificates():
    objects = render(MODES["certManager"])
    submitter = one(objects, "ServiceMonitor", SUBMITTER)["spec"]["endpoints"][0]
    assert submitter["scheme"] == "https" and submitter["tlsConfig"]["serverName"] == f"{SUBMITTER}.{NAMESPACE}.svc"
    env = env_of(one(objects, "Deployment", SUBMITTER)["spec"]["template"]["spec"]["containers"][0])
    assert env["SUBMITTER_ANONYMOUS_METRICS"] == "true"
    assert one(objects, "ServiceMonitor", OPERATOR)["spec"]["endpoints"][0]["port"] == "metrics"
    assert one(objects, "Service", f"{OPERATOR}-metrics")["spec"]["ports"][0]["targetPort"] == "probes"
    assert "SUBMITTER_ANONYMOUS_METRICS" not in env_of(one(render(), "Deployment", SUBMITTER)["spec"]["template"]["spec"]["containers"][0])


def test_operator_talks_to_the_submitter_by_its_certificate_name_and_runs_agents_from_its_own_image():
    objects = render({"image": {"registry": "registry.example/spark/"}, "operator": {"image": {"digest": "sha256:" + "a" * 64}}})
    container = one(objects, "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"][0]
    env = env_of(container)
    assert env["OPERATOR_SUBMITTER_URL"] == f"https://{SUBMITTER}.{NAMESPACE}.svc:8443"
    assert container["image"] == "registry.example/spark/spark-operator@sha256:" + "a" * 64
    assert env["OPERATOR_AGENT_IMAGE"] == container["image"]
    assert env["OPERATOR_INSTALL_CRD"] == "false"
    redis = env_of(one(render(MODES["clusterWide+redis+HA"]), "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"][0])
    assert redis["OPERATOR_RECOVERY_STORE"] == {"secretKeyRef": {"name": "redis", "key": "url"}}


def test_a_redis_cluster_url_reaches_the_operator_unchanged_and_an_unknown_scheme_fails_the_schema():
    url = "redis+cluster://redis-0.redis:6379,redis-1.redis:6379/?wait_replicas=1"
    recovery = {"store": "redis", "redis": {"url": url}}
    container = one(render({"operator": {"recovery": recovery}}), "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"][0]
    assert env_of(container)["OPERATOR_RECOVERY_STORE"] == url
    report = helm_python.lint(str(cu.CHART), {"operator": {"recovery": recovery}}, strict=True)
    assert report["errors"] == [], report
    for bad in ("redis-cluster://redis-0.redis:6379", "http://redis:6379"):
        values = {"operator": {"recovery": {"store": "redis", "redis": {"url": bad}}}}
        report = helm_python.lint(str(cu.CHART), values, strict=True)
        assert any("url" in e for e in report["errors"]), (bad, report)


def test_helm_test_submits_a_dry_run_over_mtls_into_a_job_namespace():
    pod = one(render({"jobNamespaces": ["team-a"]}), "Pod", f"{FULL}-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    args = pod["spec"]["containers"][0]["args"]
    assert args[:2] == ["submit", "--dry-run"]
    assert f"--url=https://{SUBMITTER}.{NAMESPACE}.svc:8443" in args
    assert "--conf=spark.kubernetes.namespace=team-a" in args
    assert "--conf=spark.kubernetes.authenticate.driver.serviceAccountName=spark-operator-spark" in args
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == f"{OPERATOR}-client-tls"
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_notes_tell_how_to_check_the_install_and_wire_kubeflow():
    text = cu.notes({"kubeflowClient": {"enabled": True}})
    assert f"helm test {cu.RELEASE}" in text
    assert "--submitter-service-url=https://" in text and "/api/v1/spark-submit" in text


def test_values_reference_in_docs_is_generated_from_the_schema():
    script = cu.REPO / "scripts" / "chart-values-doc.py"
    run = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_default_value_is_described_by_the_schema():
    schema = json.loads((cu.CHART / "values.schema.json").read_text())
    values = yaml.safe_load((cu.CHART / "values.yaml").read_text())

    def walk(value, node, path):
        assert node.get("description"), f"{path} has no description in values.schema.json"
        if isinstance(value, dict) and "properties" in node:
            for key, child in value.items():
                assert key in node["properties"], f"{path}.{key} is not in values.schema.json"
                walk(child, node["properties"][key], f"{path}.{key}")

    for key, value in values.items():
        walk(value, schema["properties"][key], key)


@pytest.mark.parametrize("values, message", [
    ({"tls": {"selfSigned": {"certDays": 30, "renewBeforeDays": 30}}}, "renewBeforeDays must be less than"),
    ({"operator": {"recovery": {"store": "redis"}}}, "needs operator.recovery.redis.url"),
    ({"tls": {"mode": "existingSecrets", "existingSecrets": {"server": "s"}}}, "operatorClient is required"),
])
def test_render_refuses_inconsistent_values_with_a_clear_message(values, message):
    with pytest.raises(helm_python.HelmRenderError, match=message):
        render(values)
