"""The chart installed into kubesim with the real Helm (client-go, from `helm-sdkpy`), and used.

kubesim runs the chart's images as this build's release binaries: `spark-submitter` is
target/release/submitter and `spark-operator` target/release/operator (also the recovery agent's
image). They start from the Deployments the chart rendered, as in a cluster: each pod on its own
network, with the probes, the mounted certificate Secrets of the chart's self-signed CA (genCA at
install), the policy ConfigMap, in-cluster config (no kubeconfig), a read-only root file system
(kubesim applies `readOnlyRootFilesystem`; not `runAsUser`) and the service-account tokens the
chart's RBAC applies to.

Drivers: the first SparkApplication runs real Spark (kubesim's Spark image: the local pyspark
distribution and Java run `tests/programs/pi.py` in a driver pod and an executor pod the driver
creates through the API server as the chart's driver service account). The recovery-enabled
application runs the sandbox's staged driver (`sandbox staged-driver`, image
`spark-staged-driver`), a small program that commits a progress marker through the recovery agent
after each stage, so that a killed driver's rerun can be checked stage by stage.

The tests run in order on one installation (install, a Spark run, a recovery, a certificate
rotation, an upgrade, RBAC refusals, uninstall) and the last one turns kubesim's authorization
journal into the table of verbs used against verbs granted, written into docs/security.md.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import helm_sdkpy as helm
import pytest
import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

import conftest
from simutil import bin_dir, is_gone, wait_for

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "spark-submitter"
SECURITY_DOC = REPO / "docs" / "security.md"

# As docs/install.md installs it: release spark-submitter, drivers in their own namespace.
RELEASE = "spark-submitter"
NAMESPACE = "spark-system"
JOBS = "spark-jobs"
SUBMITTER = f"{RELEASE}-submitter"
OPERATOR = f"{RELEASE}-operator"
DRIVER_SA = "spark-operator-spark"
LEASE = f"{OPERATOR}-leader"
SERVER_SECRET = f"{SUBMITTER}-tls"
OPERATOR_SECRET = f"{OPERATOR}-client-tls"
CA_SECRET = f"{RELEASE}-ca"
IDENTITIES = {
    "submitter": f"system:serviceaccount:{NAMESPACE}:{SUBMITTER}",
    "operator": f"system:serviceaccount:{NAMESPACE}:{OPERATOR}",
    "driver": f"system:serviceaccount:{JOBS}:{DRIVER_SA}",
}
VALUES = {"jobNamespaces": [JOBS]}

STAGED_IMAGE = "spark-staged-driver:install-test"
SPARK_IMAGE = "apache/spark:4.3.0"
DRIVER_CONTAINER = "spark-kubernetes-driver"
# What `pi.py 4 100000` computes: seeded partitions, so the same whatever the scheduling.
PI_RESULT = "pi-result pi=3.143460 hits=314346 samples=400000"

# Bounds of the waits, and of each test (real processes on two shared cores; each step takes a
# few seconds on a quiet machine, the Spark run 20-40 s).
START_S = 90
RUN_S = 90
BOUND_S = 200

# A client identity the upgrade adds to the policy, and the pod label its NetworkPolicy admits.
CI_IDENTITY = "ci-runner.example.com"
CI_LABELS = {"app.kubernetes.io/name": "ci-runner"}


def run(coro):
    return asyncio.run(coro)


@dataclass
class Stack:
    """The installed release and what the tests share."""

    kubesim: conftest.Kubesim
    helm: helm.Configuration
    api: client.ApiClient
    core: client.CoreV1Api
    apps: client.AppsV1Api
    rbac: client.RbacAuthorizationV1Api
    custom: client.CustomObjectsApi
    tmp: Path
    manifest: list[dict] = field(default_factory=list)
    granted: list[dict] = field(default_factory=list)
    # Requests the tests made on purpose outside an identity's RBAC: (user, verb, resource, ns).
    probes: set[tuple[str, str, str, str]] = field(default_factory=set)
    done: set[str] = field(default_factory=set)


def binary(name: str) -> Path:
    """A binary of this build (`simutil.bin_dir`)."""
    path = bin_dir() / name
    assert path.is_file(), f"{path} is missing: cargo build --release -p {name}, or set BIN_DIR"
    return path


def granted_rules(rbac: client.RbacAuthorizationV1Api) -> list[dict]:
    """Every rule bound to our identities, as installed: {identity, scope, group, resource, verbs,
    names, role} (scope "*" for a ClusterRoleBinding)."""
    users = {v: k for k, v in IDENTITIES.items()}

    def subjects(binding) -> list[str]:
        # A service account subject without a namespace is the binding's.
        names = [f"system:serviceaccount:{s.namespace or binding.metadata.namespace}:{s.name}"
                 for s in binding.subjects or [] if s.kind == "ServiceAccount"]
        return [users[n] for n in names if n in users]

    rules = []
    bindings = [(b, b.metadata.namespace) for b in rbac.list_role_binding_for_all_namespaces().items]
    bindings += [(b, "*") for b in rbac.list_cluster_role_binding().items]
    for binding, scope in bindings:
        who = subjects(binding)
        if not who:
            continue
        ref = binding.role_ref
        role = (rbac.read_namespaced_role(ref.name, binding.metadata.namespace) if ref.kind == "Role"
                else rbac.read_cluster_role(ref.name))
        for rule in role.rules or []:
            for identity in who:
                for group in rule.api_groups or [""]:
                    for resource in rule.resources or []:
                        rules.append({"identity": identity, "scope": scope, "group": group, "resource": resource,
                                      "verbs": list(rule.verbs), "names": list(rule.resource_names or []),
                                      "role": f"{ref.kind} {ref.name}"})
    return rules


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Stack:
    tmp = tmp_path_factory.mktemp("chart-install")
    # The recovery agent's startup probe runs `operator agent probe` inside its container: the
    # operator image's entrypoint, first on the image's PATH.
    image_bin = tmp / "image-bin"
    image_bin.mkdir()
    operator = binary("operator")
    (image_bin / "operator").symlink_to(operator)
    path = f"{image_bin}:{os.environ.get('PATH', '')}"
    images = {
        "spark-submitter": {"command": [str(binary("submitter"))],
                            "env": {"PATH": path}},
        "spark-operator": {"command": [str(operator)], "env": {"PATH": path}},
        # The staged driver: the sandbox binary of the same build.
        STAGED_IMAGE: {"command": [str(binary("sandbox")), "staged-driver", "--"]},
    }
    spark = {"files": {"/opt/spark/work-dir": str(REPO / "tests" / "programs")}}
    kubesim_tmp = tmp / "kubesim"
    kubesim_tmp.mkdir()
    starting = conftest._start_kubesim(kubesim_tmp, https=True, images=images, spark=spark)
    kubesim = next(starting)
    try:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubesim.kubeconfig), client_configuration=configuration)
        api = client.ApiClient(configuration)
        stack = Stack(
            kubesim=kubesim,
            helm=helm.Configuration(namespace=NAMESPACE, kubeconfig=kubesim.kubeconfig.read_text()),
            api=api,
            core=client.CoreV1Api(api),
            apps=client.AppsV1Api(api),
            rbac=client.RbacAuthorizationV1Api(api),
            custom=client.CustomObjectsApi(api),
            tmp=tmp,
        )
        for ns in (NAMESPACE, JOBS):
            stack.core.create_namespace({"metadata": {"name": ns}})
        release = run(helm.Install(stack.helm).run(RELEASE, str(CHART), values=VALUES, wait=True, timeout=START_S))
        assert release["info"]["status"] == "deployed", release["info"]
        stack.manifest = [doc for doc in yaml.safe_load_all(release["manifest"]) if doc]
        stack.granted = granted_rules(stack.rbac)
        yield stack
    finally:
        try:
            next(starting)
        except StopIteration:
            pass


def pods_of(stack: Stack, component: str) -> list:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
    return [p for p in stack.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def ready_pods(stack: Stack, component: str, count: int) -> list:
    """The component's pods once exactly `count` of them exist and all are Ready."""

    def all_ready():
        pods = pods_of(stack, component)
        return pods if len(pods) == count and all(ready(p) for p in pods) else None

    return wait_for(all_ready, f"{count} ready {component} pods", timeout=START_S)


def log_of(stack: Stack, pod: str, namespace: str = NAMESPACE, container: str | None = None) -> str:
    return stack.core.read_namespaced_pod_log(pod, namespace, container=container)


def helm_test(stack: Stack) -> None:
    """`helm test`: the chart's dry-run submission over mTLS with the operator's client Secret."""
    result = run(helm.ReleaseTest(stack.helm).run(RELEASE))
    phases = {hook["name"]: hook["last_run"]["phase"] for hook in result.get("hooks", [])}
    assert phases == {f"{RELEASE}-test": "Succeeded"}, result
    # Helm 4 applies a test hook's delete policy (hook-succeeded) in a shutdown function that
    # `helm test` calls once it printed the logs; helm-sdkpy's binding never calls it, so this
    # does what the CLI would. (Hooks are not part of the release: uninstall leaves them.)
    stack.core.delete_namespaced_pod(f"{RELEASE}-test", NAMESPACE, grace_period_seconds=0)
    wait_for(lambda: is_gone(lambda: stack.core.read_namespaced_pod(f"{RELEASE}-test", NAMESPACE)),
             "the test pod to go", timeout=RUN_S)


# --- certificates ---------------------------------------------------------------------------

def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # SEC1 ("EC PRIVATE KEY"), as the chart's genPrivateKey "ecdsa" writes them.
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def issue(subject: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
          dns: list[str] = (), usage=None) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A CA (no issuer) or a leaf certificate for `subject` and `dns` with extended key `usage`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=30)))
    if issuer is None:
        builder = (builder.issuer_name(name)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True))
        return builder.sign(key, hashes.SHA256()), key
    builder = (builder.issuer_name(issuer[0].subject)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns]), critical=False))
    return builder.sign(issuer[1], hashes.SHA256()), key


def secret_cert(stack: Stack, name: str, key: str = "tls.crt") -> x509.Certificate:
    data = stack.core.read_namespaced_secret(name, NAMESPACE).data[key]
    return x509.load_pem_x509_certificate(base64.b64decode(data))


def names_of(cert: x509.Certificate) -> list[str]:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def common_name(cert: x509.Certificate) -> str:
    return cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


def put_secret_data(stack: Stack, name: str, data: dict[str, bytes]) -> None:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    stack.core.patch_namespaced_secret(name, NAMESPACE, {"data": encoded})


# --- SparkApplications ----------------------------------------------------------------------

def app_state(stack: Stack, name: str) -> dict:
    app = stack.custom.get_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", JOBS, "sparkapplications", name)
    return app.get("status") or {}


def wait_for_state(stack: Stack, name: str, want: str, timeout: float) -> dict:
    def reached():
        status = app_state(stack, name)
        state = (status.get("applicationState") or {}).get("state")
        assert state not in {"FAILED", "SUBMISSION_FAILED", "COMPLETED"} or state == want, \
            f"{name} ended {state}, not {want}: {json.dumps(status)}"
        return status if state == want else None

    try:
        return wait_for(reached, f"{name} to reach {want}", timeout=timeout, interval=0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnosis(stack)}") from None


def diagnosis(stack: Stack) -> str:
    """The last lines of the operator's and the submitters' logs, for a failed wait."""
    parts = []
    for pod in pods_of(stack, "operator") + pods_of(stack, "submitter"):
        tail = "\n".join(log_of(stack, pod.metadata.name).splitlines()[-15:])
        parts.append(f"--- {pod.metadata.name}\n{tail}")
    return "\n".join(parts)


def create_app(stack: Stack, name: str, spec: dict) -> None:
    stack.custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", JOBS, "sparkapplications", {
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": JOBS}, "spec": spec})


def staged_app(stack: Stack, name: str, stages: int) -> dict:
    """A recovery-enabled application of the staged driver (it needs its agent), `stages` stages
    of 600 ms; its journal and published stages go to files the test reads."""
    files = stack.tmp / "staged"
    files.mkdir(exist_ok=True)
    env = {"STAGES": str(stages), "STAGE_MILLIS": "600",
           "OUTPUT": str(files / f"{name}.output"), "JOURNAL": str(files / f"{name}.journal")}
    return {
        "type": "Scala", "mode": "cluster", "image": STAGED_IMAGE, "sparkVersion": "4.0.0",
        "mainClass": "org.example.StagedJob", "mainApplicationFile": "local:///opt/staged-job.jar",
        "sparkConf": {f"spark.kubernetes.driverEnv.{k}": v for k, v in env.items()},
        "restartPolicy": {"type": "OnFailure", "onFailureRetries": 3, "onFailureRetryInterval": 1,
                          "onSubmissionFailureRetries": 3, "onSubmissionFailureRetryInterval": 1,
                          "recovery": {"enabled": True}},
        "driver": {"cores": 1, "memory": "512m", "serviceAccount": DRIVER_SA},
        "executor": {"instances": 1, "cores": 1, "memory": "512m"},
    }


def staged_lines(stack: Stack, name: str, kind: str) -> list[tuple[str, dict]]:
    """(event, fields) of a staged app's journal, or its published stages (`kind` "output")."""
    path = stack.tmp / "staged" / f"{name}.{kind}"
    text = path.read_text() if path.exists() else ""
    lines = []
    for line in text.splitlines():
        words = line.split()
        fields = dict(w.split("=", 1) for w in words if "=" in w)
        lines.append((words[0] if kind == "journal" else "stage", fields))
    return lines


# --- the tests, in order ---------------------------------------------------------------------

@pytest.mark.bound(BOUND_S)
def test_install_starts_both_binaries_from_the_rendered_deployments(stack):
    """Both Deployments roll out from the rendered templates: every replica Ready by its probes
    (HTTPS on the submitter, which kubesim's prober completes as a kubelet does), in-cluster
    config and its own service account (no kubeconfig anywhere), the operator leading through the
    chart's Lease, and `helm test` (a dry-run submission over mTLS) passing."""
    submitters = ready_pods(stack, "submitter", 2)
    (operator,) = ready_pods(stack, "operator", 1)
    for pod, account in [(p, SUBMITTER) for p in submitters] + [(operator, OPERATOR)]:
        assert pod.spec.service_account_name == account
        container = pod.spec.containers[0]
        env = {e.name for e in container.env or []}
        assert not {"KUBECONFIG", "SUBMITTER_KUBECONFIG", "OPERATOR_KUBECONFIG"} & env, env
        assert container.security_context.read_only_root_filesystem is True
        assert pod.status.container_statuses[0].restart_count == 0
    # Each reached the API server as its service account (in-cluster config, the pod's token).
    users = {row["user"] for row in stack.kubesim.sim("GET", "authz").json() if row["allowed"]}
    assert {IDENTITIES["submitter"], IDENTITIES["operator"]} <= users, users
    lease = client.CoordinationV1Api(stack.api).read_namespaced_lease(LEASE, NAMESPACE)
    assert lease.spec.holder_identity == operator.metadata.name
    # The kubelet's HTTPS probes complete their handshakes: none failed on the submitters.
    for pod in submitters:
        log = log_of(stack, pod.metadata.name)
        assert "submitter serving" in log and "TLS handshake failed" not in log, log[-2000:]
    helm_test(stack)
    stack.done.add("install")


@pytest.mark.spark
@pytest.mark.bound(BOUND_S + 30)
def test_a_spark_application_runs_to_completed_through_what_the_chart_installed(stack):
    """Real Spark: the operator submits through the submitter over mTLS (the chart's client
    certificate and policy); the driver, as the chart's driver service account, creates its
    executor through the API server; the result is in the driver's log."""
    create_app(stack, "pi", {
        "type": "Python", "mode": "cluster", "image": SPARK_IMAGE, "sparkVersion": "4.3.0",
        "mainApplicationFile": "local:///opt/spark/work-dir/pi.py", "arguments": ["4", "100000"],
        "driver": {"cores": 1, "memory": "512m", "serviceAccount": DRIVER_SA},
        "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        "restartPolicy": {"type": "Never"},
    })
    status = wait_for_state(stack, "pi", "COMPLETED", timeout=BOUND_S)
    driver = status["driverInfo"]["podName"]
    assert PI_RESULT in log_of(stack, driver, JOBS, DRIVER_CONTAINER)
    stack.done.add("spark")


@pytest.mark.bound(BOUND_S)
def test_a_recovery_enabled_application_resumes_after_its_driver_is_killed(stack):
    """The staged driver beside the recovery agent (the operator image, as the chart sets it):
    killed in the middle of stage 3, its rerun under a new epoch restores stage 2 from the
    chart's Kubernetes state store and runs stages 3 to 5 only."""
    create_app(stack, "staged", staged_app(stack, "staged", stages=5))

    def mid_stage_3():
        journal = staged_lines(stack, "staged", "journal")
        committed = [f["epoch"] for e, f in journal if e == "commit" and f.get("stage") == "2"]
        started = any(e == "start" and f.get("stage") == "3" for e, f in journal)
        pod = (app_state(stack, "staged").get("driverInfo") or {}).get("podName")
        return (pod, int(committed[0])) if committed and started and pod else None

    pod, epoch = wait_for(mid_stage_3, "the driver to start stage 3", timeout=RUN_S, interval=0.1)
    killed = stack.kubesim.sim("POST", f"pods/{JOBS}/{pod}/kill", json={"container": DRIVER_CONTAINER, "exitCode": 137})
    assert killed.status_code == 200, killed.text
    status = wait_for_state(stack, "staged", "COMPLETED", timeout=RUN_S)
    recovery = status["recoveryStatus"]
    assert (recovery["epoch"], recovery["restoredFromEpoch"]) == (epoch + 1, epoch), status
    assert status["driverInfo"]["podName"] != pod
    published = [int(f["stage"]) for _, f in staged_lines(stack, "staged", "output")]
    assert published == [1, 2, 3, 4, 5], published
    journal = staged_lines(stack, "staged", "journal")
    assert ("restored", {"stage": "2", "epoch": str(epoch + 1)}) in journal, journal
    rerun = [int(f["stage"]) for e, f in journal if e == "start" and f.get("epoch") == str(epoch + 1)]
    assert rerun == [3, 4, 5], journal
    stack.done.add("recovery")


@pytest.mark.bound(BOUND_S)
def test_rotated_certificates_are_used_by_both_binaries_without_a_restart(stack):
    """A new CA, a new server certificate and a new operator client certificate are written into
    the chart's Secrets, as a user replacing the CA would. The kubelet rewrites the mounted files
    and both binaries re-read them, without a restart:

    - the submitters: `helm test` (a new pod with the rotated client Secret, trusting only the
      new CA) is answered by the same submitter processes, so they serve the new certificate and
      accept client certificates of the new CA only;
    - the operator: its keep-alive connections made before the rotation go on working, as in any
      cluster, until the submitter pods they lead to are replaced (here by a rollout restart);
      its next connections must present the new client certificate and verify the new server
      certificate against the new CA, so an application submitted then completes only if the
      same operator process re-read both."""
    def instances(component: str) -> set[tuple[str, int]]:
        return {(p.metadata.uid, p.status.container_statuses[0].restart_count) for p in pods_of(stack, component)}

    operator_before = instances("operator")
    submitters_before = instances("submitter")
    old_server, old_client = secret_cert(stack, SERVER_SECRET), secret_cert(stack, OPERATOR_SECRET)
    ca = issue(f"{RELEASE} rotated CA", None)
    server = issue(common_name(old_server), ca, names_of(old_server), ExtendedKeyUsageOID.SERVER_AUTH)
    operator_client = issue(common_name(old_client), ca, names_of(old_client), ExtendedKeyUsageOID.CLIENT_AUTH)
    ca_pem = pem(ca[0])
    put_secret_data(stack, CA_SECRET, {"tls.crt": ca_pem, "tls.key": key_pem(ca[1])})
    put_secret_data(stack, SERVER_SECRET, {"tls.crt": pem(server[0]), "tls.key": key_pem(server[1]), "ca.crt": ca_pem})
    put_secret_data(stack, OPERATOR_SECRET,
                    {"tls.crt": pem(operator_client[0]), "tls.key": key_pem(operator_client[1]), "ca.crt": ca_pem})

    # The probes' handshakes make each submitter look at its files again.
    def reloaded():
        return all("reloaded TLS certificate files" in log_of(stack, p.metadata.name) for p in pods_of(stack, "submitter"))

    wait_for(reloaded, "both submitters to reload their certificate files", timeout=RUN_S)
    helm_test(stack)
    assert instances("submitter") == submitters_before, "a submitter restarted"

    # `kubectl rollout restart` of the submitters ends the operator's old connections.
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    stack.apps.patch_namespaced_deployment(SUBMITTER, NAMESPACE, {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": now}}}}})

    def replaced():
        old = {uid for uid, _ in submitters_before}
        pods = pods_of(stack, "submitter")
        return len(pods) == 2 and all(ready(p) and p.metadata.uid not in old for p in pods)

    wait_for(replaced, "the submitters to be replaced", timeout=RUN_S)
    create_app(stack, "after-rotation", staged_app(stack, "after-rotation", stages=1))
    wait_for_state(stack, "after-rotation", "COMPLETED", timeout=RUN_S)
    (operator,) = pods_of(stack, "operator")
    log = log_of(stack, operator.metadata.name)
    assert instances("operator") == operator_before, (
        "the operator restarted", operator.status.container_statuses[0].last_state, log[-3000:])
    assert "reloaded the client certificate" in log and "reloaded the CA bundle" in log, log[-3000:]
    stack.done.add("rotation")


def client_pod(stack: Stack, name: str, secret: str, args: list[str]) -> tuple[str, str]:
    """Runs the submitter image's CLI in a pod of the release namespace with `secret` (a client
    certificate) mounted, as a CI job in the cluster would; returns its phase and log."""
    stack.core.create_namespaced_pod(NAMESPACE, {
        "metadata": {"name": name, "labels": CI_LABELS},
        "spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": False,
            "containers": [{"name": "cli", "image": f"spark-submitter:{chart_version()}",
                            "args": args, "volumeMounts": [{"name": "tls", "mountPath": "/etc/client/tls"}]}],
            "volumes": [{"name": "tls", "secret": {"secretName": secret}}],
        },
    })

    def finished():
        phase = stack.core.read_namespaced_pod(name, NAMESPACE).status.phase
        return phase if phase in {"Succeeded", "Failed"} else None

    phase = wait_for(finished, f"pod {name} to finish", timeout=RUN_S)
    return phase, log_of(stack, name)


def chart_version() -> str:
    return yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


@pytest.mark.bound(BOUND_S)
def test_helm_upgrade_adds_a_client_to_the_policy_and_a_replica(stack):
    """An upgrade that adds a client identity to the policy (and lets its pods through the
    NetworkPolicy) and a third submitter replica: the policy's checksum rolls the submitters, and a
    look-up refused (403) before the upgrade is answered after it. The CA and the certificates
    (rotated above) are kept."""
    ca_secret = stack.core.read_namespaced_secret(CA_SECRET, NAMESPACE)
    ca_pair = (x509.load_pem_x509_certificate(base64.b64decode(ca_secret.data["tls.crt"])),
               serialization.load_pem_private_key(base64.b64decode(ca_secret.data["tls.key"]), None))
    ci = issue(CI_IDENTITY, ca_pair, [CI_IDENTITY], ExtendedKeyUsageOID.CLIENT_AUTH)
    stack.core.create_namespaced_secret(NAMESPACE, {
        "metadata": {"name": "ci-runner-tls"}, "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in {
            "tls.crt": pem(ci[0]), "tls.key": key_pem(ci[1]), "ca.crt": base64.b64decode(ca_secret.data["tls.crt"])}.items()}})
    driver = app_state(stack, "staged")["driverInfo"]["podName"]
    status_args = ["status", f"--url=https://{SUBMITTER}.{NAMESPACE}.svc:8443", "--ca=/etc/client/tls/ca.crt",
                   "--cert=/etc/client/tls/tls.crt", "--key=/etc/client/tls/tls.key", f"{JOBS}:{driver}"]
    phase, log = client_pod(stack, "ci-before-upgrade", "ci-runner-tls", status_args)
    assert phase == "Failed" and "403" in log, log

    secrets_before = {name: stack.core.read_namespaced_secret(name, NAMESPACE).data
                      for name in (CA_SECRET, SERVER_SECRET, OPERATOR_SECRET)}
    hashes_before = {p.metadata.labels["pod-template-hash"] for p in pods_of(stack, "submitter")}
    values = {**VALUES, "submitter": {
        "replicas": 3,
        "policy": {"clients": [{"identity": CI_IDENTITY, "namespaces": [JOBS], "serviceAccounts": [DRIVER_SA]}]},
        "networkPolicy": {"allowedClients": [{"podSelector": {"matchLabels": CI_LABELS}}]},
    }}
    release = run(helm.Upgrade(stack.helm).run(RELEASE, str(CHART), values=values, wait=True, timeout=START_S))
    assert release["info"]["status"] == "deployed" and release["version"] == 2, release["info"]

    pods = ready_pods(stack, "submitter", 3)
    assert not {p.metadata.labels["pod-template-hash"] for p in pods} & hashes_before, "the policy change rolls them"
    policy = yaml.safe_load(stack.core.read_namespaced_config_map(f"{SUBMITTER}-policy", NAMESPACE).data["policy.yaml"])
    assert CI_IDENTITY in [c["identity"] for c in policy["clients"]]
    phase, log = client_pod(stack, "ci-after-upgrade", "ci-runner-tls", status_args)
    assert phase == "Succeeded", log
    answer = json.loads(log)
    assert (answer["driver_pod_name"], answer["phase"], answer["action"]) == (driver, "Succeeded", "Done"), answer
    for name, data in secrets_before.items():
        assert stack.core.read_namespaced_secret(name, NAMESPACE).data == data, f"{name} changed on upgrade"
    stack.done.add("upgrade")


def as_identity(stack: Stack, identity: str, method: str, path: str, body: dict | None = None) -> requests.Response:
    """A request with a fresh token of one of our service accounts, from outside its pods."""
    _, _, ns, name = IDENTITIES[identity].split(":")
    token = stack.core.create_namespaced_service_account_token(name, ns, {"spec": {"expirationSeconds": 600}}).status.token
    return requests.request(method, f"{stack.kubesim.url}{path}", json=body, timeout=10,
                            verify=str(stack.kubesim.ca_file), headers={"Authorization": f"Bearer {token}"})


# Requests outside each identity's grants: (identity, method, path, body, verb, resource, namespace).
REFUSED = [
    ("submitter", "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets", None, "list", "secrets", NAMESPACE),
    ("submitter", "POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
     {"metadata": {"name": "not-a-job-namespace"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
     "create", "pods", NAMESPACE),
    # The operator creates pods (Spark Connect servers, as kubeflow's does) but reads no secret.
    ("operator", "GET", f"/api/v1/namespaces/{JOBS}/secrets", None, "list", "secrets", JOBS),
    ("driver", "GET", f"/api/v1/namespaces/{JOBS}/secrets", None, "list", "secrets", JOBS),
]


def test_requests_outside_a_service_accounts_rbac_are_refused(stack):
    for identity, method, path, body, verb, resource, ns in REFUSED:
        answer = as_identity(stack, identity, method, path, body)
        assert answer.status_code == 403, (identity, path, answer.text)
        user = IDENTITIES[identity]
        assert answer.json()["message"] == (
            f'{resource} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
            f'in API group "" in the namespace "{ns}"'), answer.json()
        stack.probes.add((user, verb, resource, ns))
    stack.done.add("refused")


@pytest.mark.bound(BOUND_S)
def test_helm_uninstall_leaves_none_of_our_objects_behind(stack):
    """Every object the release rendered is gone after `helm uninstall`, down to the pods of its
    ReplicaSets. What stays is what Helm and the design keep: the CRD (Helm never deletes one),
    the submitter's retention records (ConfigMaps in the release namespace that say a driver
    succeeded, docs/install.md), and events."""
    # A user removes their applications first; their drivers and progress ConfigMaps go with them.
    for app in stack.custom.list_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", JOBS, "sparkapplications")["items"]:
        stack.custom.delete_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", JOBS, "sparkapplications", app["metadata"]["name"])

    def jobs_empty():
        left = [f"pod {p.metadata.name}" for p in stack.core.list_namespaced_pod(JOBS).items]
        left += [f"configmap {c.metadata.name}" for c in stack.core.list_namespaced_config_map(JOBS).items
                 if c.metadata.name != "kube-root-ca.crt"]
        assert not left, left
        return True

    wait_for(jobs_empty, "the drivers and their ConfigMaps to be collected", timeout=RUN_S)
    for pod in ("ci-before-upgrade", "ci-after-upgrade"):
        stack.core.delete_namespaced_pod(pod, NAMESPACE)
    stack.core.delete_namespaced_secret("ci-runner-tls", NAMESPACE)

    run(helm.Uninstall(stack.helm).run(RELEASE, wait=True, timeout=START_S))
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in stack.manifest})
    # Every kind the chart rendered, namespaced and cluster-wide.
    assert kinds == sorted({
        ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "ServiceAccount"),
        ("apps/v1", "Deployment"), ("policy/v1", "PodDisruptionBudget"), ("coordination.k8s.io/v1", "Lease"),
        ("networking.k8s.io/v1", "NetworkPolicy"), ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")}), kinds
    left = [o for o in stack.manifest if not is_gone(lambda o=o: read(stack, o))]
    assert not left, [(o["kind"], o["metadata"]["name"]) for o in left]

    def collected():
        return not stack.core.list_namespaced_pod(NAMESPACE).items and not stack.apps.list_namespaced_replica_set(
            NAMESPACE).items

    wait_for(collected, "the ReplicaSets and their pods to be collected", timeout=RUN_S)
    selector = f"app.kubernetes.io/instance={RELEASE}"
    for ns in (NAMESPACE, JOBS):
        for kind, listing in namespaced_lists(stack, ns).items():
            labelled = [o.metadata.name for o in listing(label_selector=selector).items]
            assert not labelled, f"{kind} {labelled} left in {ns}"
    assert not stack.rbac.list_cluster_role(label_selector=selector).items
    assert not stack.rbac.list_cluster_role_binding(label_selector=selector).items
    assert not stack.core.list_namespaced_secret(NAMESPACE, label_selector=f"owner=helm,name={RELEASE}").items
    # The submission ids' claims and records (docs/install.md), and nothing else: at least the
    # records of the drivers that succeeded; claims still `reserved` whose drivers went with
    # their applications (the uninstalled sweeper frees them after its grace period, or a
    # reinstall's does).
    leftovers = [cm for cm in stack.core.list_namespaced_config_map(NAMESPACE).items
                 if cm.metadata.name != "kube-root-ca.crt"]
    records = [(cm.metadata.name, (cm.metadata.labels or {}).get("spark-submitter.io/record")) for cm in leftovers]
    assert all(name.startswith("spark-submitter-id-") and record in ("reserved", "driver-succeeded", "driver-killed")
               for name, record in records), records
    assert any(record == "driver-succeeded" for _, record in records), records
    assert not [cm.metadata.name for cm in stack.core.list_namespaced_config_map(JOBS).items
                if cm.metadata.name != "kube-root-ca.crt"]
    client.ApiextensionsV1Api(stack.api).read_custom_resource_definition("sparkapplications.sparkoperator.k8s.io")
    stack.done.add("uninstall")


def namespaced_lists(stack: Stack, ns: str) -> dict:
    net = client.NetworkingV1Api(stack.api)
    policy = client.PolicyV1Api(stack.api)
    coordination = client.CoordinationV1Api(stack.api)
    return {
        "secrets": lambda **kw: stack.core.list_namespaced_secret(ns, **kw),
        "configmaps": lambda **kw: stack.core.list_namespaced_config_map(ns, **kw),
        "services": lambda **kw: stack.core.list_namespaced_service(ns, **kw),
        "serviceaccounts": lambda **kw: stack.core.list_namespaced_service_account(ns, **kw),
        "pods": lambda **kw: stack.core.list_namespaced_pod(ns, **kw),
        "deployments": lambda **kw: stack.apps.list_namespaced_deployment(ns, **kw),
        "replicasets": lambda **kw: stack.apps.list_namespaced_replica_set(ns, **kw),
        "poddisruptionbudgets": lambda **kw: policy.list_namespaced_pod_disruption_budget(ns, **kw),
        "networkpolicies": lambda **kw: net.list_namespaced_network_policy(ns, **kw),
        "leases": lambda **kw: coordination.list_namespaced_lease(ns, **kw),
        "roles": lambda **kw: stack.rbac.list_namespaced_role(ns, **kw),
        "rolebindings": lambda **kw: stack.rbac.list_namespaced_role_binding(ns, **kw),
    }


def read(stack: Stack, obj: dict):
    """GETs a rendered object as the API server has it now (a 404 ApiException once gone)."""
    group_version = obj["apiVersion"]
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = {"Secret": "secrets", "ConfigMap": "configmaps", "Service": "services", "ServiceAccount": "serviceaccounts",
              "Deployment": "deployments", "PodDisruptionBudget": "poddisruptionbudgets", "Lease": "leases",
              "NetworkPolicy": "networkpolicies", "Role": "roles", "RoleBinding": "rolebindings",
              "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[obj["kind"]]
    ns = obj["metadata"].get("namespace")
    where = f"/namespaces/{ns}" if ns else ""
    url = f"{stack.api.configuration.host}{base}{where}/{plural}/{obj['metadata']['name']}"
    answer = stack.api.call_api("GET", url, header_params={"Accept": "application/json"})
    answer.read()
    if not 200 <= answer.status < 300:
        raise ApiException(status=answer.status, reason=answer.reason)
    return json.loads(answer.data)


# --- RBAC: verbs used against verbs granted -------------------------------------------------

# Why a grant may go unused in this e2e, by (identity, where, resource, verb); `where` is "jobs"
# (each job namespace), "release" (the release namespace) or "cluster" (a ClusterRole). A grant
# unused without a reason here fails the test, and so does a reason for a grant the chart no
# longer makes. The reasons are written into docs/security.md with the table.
UNUSED_REASONS = {
    ("submitter", "jobs", "pods", "delete"): "rolls back a failed first attempt (uid precondition); every submission here succeeded",
    ("submitter", "jobs", "pods", "get"): "reads a driver whose creation answered AlreadyExists (a retried submission)",
    ("submitter", "jobs", "configmaps", "get"): "reads a dependent whose creation answered AlreadyExists (a retried submission)",
    ("submitter", "jobs", "configmaps", "delete"): "rollback, stale dependents, and the sweeper's ownerless ConfigMaps (after `sweepGraceSeconds`)",
    ("submitter", "jobs", "services", "get"): "as for ConfigMaps: a retried submission",
    ("submitter", "jobs", "services", "delete"): "rollback and stale dependents",
    ("submitter", "jobs", "services", "patch"): "repairs the ownerReference of a dependent a retried submission finds without one (created after the pod, the Service carries it from the start)",
    ("submitter", "jobs", "networking.k8s.io/networkpolicies", "get"): "as for ConfigMaps: a retried submission",
    ("submitter", "jobs", "networking.k8s.io/networkpolicies", "delete"): "rollback and stale dependents",
    ("submitter", "jobs", "networking.k8s.io/networkpolicies", "patch"): "as for Services: an ownerReference repaired on a retry",
    ("submitter", "jobs", "persistentvolumeclaims", "get"): "only submissions with on-demand claims (`claimName=OnDemand`)",
    ("submitter", "jobs", "persistentvolumeclaims", "create"): "only submissions with on-demand claims",
    ("submitter", "jobs", "persistentvolumeclaims", "patch"): "only submissions with on-demand claims",
    ("submitter", "jobs", "persistentvolumeclaims", "delete"): "only submissions with on-demand claims",
    ("submitter", "jobs", "sparkoperator.k8s.io/sparkapplications/finalizers", "update"):
        "asked by the OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift, not in kubesim) for a driver owned by its SparkApplication with `blockOwnerDeletion`",
    ("submitter", "jobs", "pods/log", "get"): "the log route (`GET …/log`) streams a driver's log; nobody reads one here",
    ("submitter", "release", "configmaps", "update"): "a driver's end writes its record over the id's claim; a driver still running at the end of the test has none yet",
    ("submitter", "release", "configmaps", "get"): "a status look-up that misses the watch cache reads the retention record by name",
    ("submitter", "release", "configmaps", "delete"): "the sweeper deletes a retention record when its retention (24h) ends",
    ("operator", "jobs", "sparkoperator.k8s.io/sparkapplications", "get"): "a live read past a stale cache",
    ("operator", "jobs", "sparkoperator.k8s.io/sparkapplications", "delete"): "`timeToLiveSeconds` of a finished application",
    ("operator", "jobs", "pods", "get"): "a live read before a driver missing from the cache is declared lost",
    ("operator", "jobs", "pods", "delete"): "deletes a previous run's driver (uid precondition) unless it is already terminating, as a killed one often is by then",
    ("operator", "jobs", "events.k8s.io/events", "patch"): "a repeated event (its series)",
    ("operator", "jobs", "configmaps", "patch"): "adopts a progress ConfigMap left without its owner reference",
    ("operator", "jobs", "networking.k8s.io/ingresses", "create"): "only applications with `driverIngressOptions`, or an operator run with `--ingress-url-format`",
    ("operator", "jobs", "policy/poddisruptionbudgets", "create"): "only applications with `driverPodDisruptionBudget: true`",
    ("operator", "jobs", "scheduling.volcano.sh/podgroups", "create"): "only applications with `batchScheduler: volcano`",
    ("operator", "jobs", "scheduling.x-k8s.io/podgroups", "create"): "only applications with the coscheduling plugin as `batchScheduler`",
    ("operator", "jobs", "sparkoperator.k8s.io/scheduledsparkapplications", "get"): "a live read of a ScheduledSparkApplication before its due run is made; none here",
    ("operator", "jobs", "sparkoperator.k8s.io/scheduledsparkapplications/status", "update"): "the status of a ScheduledSparkApplication; none here",
    ("operator", "jobs", "sparkoperator.k8s.io/sparkapplications", "create"): "the runs of a ScheduledSparkApplication; none here",
    ("operator", "jobs", "sparkoperator.k8s.io/sparkconnects/status", "update"): "the status of a SparkConnect; none here",
    ("operator", "jobs", "pods", "create"): "the server pod of a SparkConnect; none here",
    ("driver", "jobs", "pods", "patch"): "labels an executor it decommissions (`spark.kubernetes.executor.decommissionLabel`)",
    ("driver", "jobs", "pods", "delete"): "deletes one executor it gives up (failed, or released by dynamic allocation); here the executor ended with the job",
    ("driver", "jobs", "persistentvolumeclaims", "get"): "only executors with on-demand claims (`claimName=OnDemand`)",
    ("driver", "jobs", "persistentvolumeclaims", "list"): "only executors with on-demand claims (reuse)",
    ("driver", "jobs", "persistentvolumeclaims", "create"): "only executors with on-demand claims",
    ("driver", "jobs", "persistentvolumeclaims", "delete"): "only executors with on-demand claims",
    ("driver", "jobs", "persistentvolumeclaims", "deletecollection"): "only executors with on-demand claims",
}

WHERE = {"jobs": "job namespaces", "release": "release namespace", "cluster": "all namespaces"}
WHO = {
    "submitter": "submitter (`<release>-submitter`)",
    "operator": "operator (`<release>-operator`)",
    "driver": f"Spark drivers and the recovery agent (`{DRIVER_SA}`)",
}
TABLE_START = "<!-- rbac-table:start -->"
TABLE_END = "<!-- rbac-table:end -->"


def where(scope: str) -> str:
    return {"*": "cluster", JOBS: "jobs", NAMESPACE: "release"}[scope]


def resource_name(group: str, resource: str) -> str:
    return f"{group}/{resource}" if group else resource


def rbac_table(grants: dict, used: dict) -> str:
    """Markdown: per identity, place and resource, the verbs granted, used, and why unused."""
    lines = [
        "| Identity | Where | Resource | Granted | Used in the install test | Unused, and why |",
        "|---|---|---|---|---|---|",
    ]
    rows: dict[tuple, list[str]] = {}
    for identity, place, resource, verb in grants:
        rows.setdefault((identity, place, resource), []).append(verb)
    order = {"submitter": 0, "operator": 1, "driver": 2}
    for identity, place, resource in sorted(rows, key=lambda k: (order[k[0]], k[1] != "cluster", k[1], k[2])):
        verbs = rows[(identity, place, resource)]
        used_verbs = [v for v in verbs if used.get((identity, place, resource, v))]
        why = "; ".join(f"{v}: {UNUSED_REASONS[(identity, place, resource, v)]}" for v in verbs
                        if not used.get((identity, place, resource, v)) and (identity, place, resource, v) in UNUSED_REASONS)
        lines.append(f"| {WHO[identity]} | {WHERE[place]} | `{resource}` | {', '.join(verbs)} | "
                     f"{', '.join(used_verbs) or '—'} | {why} |")
    return "\n".join(lines)


def test_the_charts_rbac_allowed_every_request_and_grants_only_what_is_used_or_explained(stack):
    """From kubesim's authorization journal: every request our three identities made in the
    tests above was allowed by the chart's RBAC (the refusals are only the deliberate ones), and
    every verb the chart grants was used, or has a reason in UNUSED_REASONS. The table goes into
    docs/security.md."""
    assert stack.done >= {"install", "spark", "recovery", "rotation", "upgrade", "refused", "uninstall"}, (
        f"the table needs every step of this module; ran only {sorted(stack.done)}")
    users = {user: identity for identity, user in IDENTITIES.items()}
    rows = [r for r in stack.kubesim.sim("GET", "authz").json() if r["user"] in users]
    refused = [r for r in rows if not r["allowed"]
               and (r["user"], r["verb"], r["resource"], r["namespace"]) not in stack.probes]
    assert not refused, refused
    assert {(r["user"], r["verb"], r["resource"], r["namespace"]) for r in rows if not r["allowed"]} == stack.probes

    # Grants by (identity, where, resource, verb), from the Roles and ClusterRoles bound at install.
    grants: dict[tuple, list[dict]] = {}
    for rule in stack.granted:
        for verb in rule["verbs"]:
            key = (rule["identity"], where(rule["scope"]), resource_name(rule["group"], rule["resource"]), verb)
            grants.setdefault(key, []).append(rule)
    used: dict[tuple, int] = {}
    unmatched = []
    for r in rows:
        if not r["allowed"] or r["resource"].startswith("/"):
            continue  # refused probes; non-resource requests (discovery) are the default policy's
        identity = users[r["user"]]
        resource = resource_name(r["group"], r["resource"])
        places = [p for p in ("jobs", "release", "cluster")
                  if p == "cluster" or r["namespace"] == {"jobs": JOBS, "release": NAMESPACE}[p]]
        matches = [(identity, p, resource, r["verb"]) for p in places if (identity, p, resource, r["verb"]) in grants]
        if not matches:
            unmatched.append(r)
        for key in matches:
            used[key] = used.get(key, 0) + r["count"]
    assert not unmatched, f"allowed by something other than the chart's rules: {unmatched}"

    unexplained = sorted(k for k in grants if not used.get(k) and k not in UNUSED_REASONS)
    stale = sorted(k for k in UNUSED_REASONS if k not in grants)
    table = rbac_table(grants, used)
    print(table)
    doc = SECURITY_DOC.read_text()
    start, end = doc.index(TABLE_START), doc.index(TABLE_END)
    generated = (f"{TABLE_START}\n<!-- Written by tests/python/test_chart_install.py from kubesim's authorization "
                 f"journal; do not edit. -->\n\n{table}\n\n")
    SECURITY_DOC.write_text(doc[:start] + generated + doc[end:])
    assert not unexplained, f"granted, unused, and no reason in UNUSED_REASONS: {unexplained}"
    assert not stale, f"reasons for grants the chart does not make: {stale}"
