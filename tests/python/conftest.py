"""Fixtures for the Python end-to-end tests: one kubesim per session, a fresh namespace per test.

The kubesim binary comes from the environment variable KUBESIM_BIN (the test runner sets it, e.g.
`KUBESIM_BIN=target/release/kubesim python -m pytest tests/python`).
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from simutil import wait_for

STARTUP_TIMEOUT_S = 30.0
REPO = Path(__file__).resolve().parents[2]
# The probe program the tiny chart's Deployment runs: a real process in each pod (its own network,
# in-cluster config with its service account's token).
REPLICA_PROGRAM = REPO / "kubesim" / "tests" / "fidelity" / "programs" / "replica.py"
REPLICA_IMAGE = "kubesim.test/replica"
# Upper bound for any one test (a hung request must not hang the suite); spark tests get more.
DEFAULT_TEST_TIMEOUT_S = 60
SPARK_TEST_TIMEOUT_S = 240


@dataclass
class Kubesim:
    """A running `kubesim serve` (over plain HTTP, or HTTPS with `serve --https`)."""

    url: str
    kubeconfig: Path
    log: Path
    proc: subprocess.Popen = field(repr=False)
    # The cluster CA (PEM file) when `url` is HTTPS, for clients that verify the server.
    ca_file: Path | None = None

    def sim(self, method: str, path: str, **kwargs) -> requests.Response:
        """Calls the control API: `path` is relative to `/sim/v1`."""
        kwargs.setdefault("timeout", 10)
        if self.ca_file is not None:
            kwargs.setdefault("verify", str(self.ca_file))
        return requests.request(method, f"{self.url}/sim/v1/{path.lstrip('/')}", **kwargs)

    def log_tail(self, n: int = 40) -> str:
        return _log_tail(self.log, n)


def _binary(var: str, package: str) -> Path:
    """The executable named by environment variable `var` (a binary of cargo package `package`)."""
    raw = os.environ.get(var)
    if not raw:
        pytest.fail(
            f"{var} is not set: point it at a {package} binary, e.g. "
            f"`cargo build --release -p {package} && {var}=target/release/{package} python -m pytest tests/python`",
            pytrace=False,
        )
    path = Path(raw)
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"{var}={raw} is not an executable file", pytrace=False)
    return path.resolve()


def _log_tail(log: Path, n: int) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def _read_kubeconfig(path: Path) -> dict | None:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    try:
        doc["clusters"][0]["cluster"]["server"]
    except (KeyError, IndexError, TypeError):
        return None
    return doc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    # `kubesim serve` shuts down on Ctrl-C; fall back to SIGKILL if it does not.
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _start_kubesim(tmp: Path, https: bool, images: dict | None = None, spark: dict | None = None):
    """Starts `kubesim serve` and yields a ready Kubesim: its kubeconfig written and its URL
    printed (the kubeconfig names the same URL). `images` maps images to local commands; `spark`
    is the `spark:` section of its configuration (real Spark for the Spark image)."""
    binary = _binary("KUBESIM_BIN", "kubesim")
    kubeconfig = tmp / "kubeconfig"
    log = tmp / "kubesim.log"
    args = [str(binary), "serve", "--listen", "127.0.0.1:0", "--kubeconfig-out", str(kubeconfig)]
    if https:
        args.append("--https")
    config = {key: value for key, value in (("images", images), ("spark", spark)) if value}
    if config:
        config_file = tmp / "kubesim.yaml"
        config_file.write_text(yaml.safe_dump(config))
        args += ["--config", str(config_file)]
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=log_file,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
        )
    first_line: list[str] = []

    def read_stdout() -> None:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        first_line.append(line.decode(errors="replace").strip())
        for _ in proc.stdout:  # keep draining so the pipe never fills
            pass

    threading.Thread(target=read_stdout, daemon=True).start()
    handle = Kubesim(url="", kubeconfig=kubeconfig, log=log, proc=proc)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"kubesim exited with {proc.returncode} before it was ready; log:\n{handle.log_tail()}",
                    pytrace=False,
                )
            doc = _read_kubeconfig(kubeconfig)
            if doc is not None and first_line:
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"kubesim wrote no kubeconfig at {kubeconfig} / printed no URL within "
                    f"{STARTUP_TIMEOUT_S:.0f}s; log:\n{handle.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.05)
        handle.url = first_line[0]
        scheme = "https" if https else "http"
        assert re.fullmatch(rf"{scheme}://127\.0\.0\.1:\d+", handle.url), f"unexpected first stdout line {handle.url!r}"
        server = doc["clusters"][0]["cluster"]["server"]
        assert server == handle.url, f"kubeconfig names {server}, stdout said {handle.url}"
        if https:
            handle.ca_file = tmp / "ca.crt"
            handle.ca_file.write_bytes(base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]))
        yield handle
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def kubesim(tmp_path_factory) -> Kubesim:
    """kubesim over plain HTTP (no credentials, cluster-admin), as the older tests use it."""
    yield from _start_kubesim(tmp_path_factory.mktemp("kubesim"), https=False)


@pytest.fixture(scope="session")
def kubesim_https(tmp_path_factory) -> Kubesim:
    """kubesim over HTTPS: its kubeconfig carries the cluster CA and the admin's client certificate.
    The probe program runs as image `kubesim.test/replica` (pods on their own network)."""
    images = {REPLICA_IMAGE: {"command": [sys.executable, "-u", str(REPLICA_PROGRAM)]}}
    yield from _start_kubesim(tmp_path_factory.mktemp("kubesim-https"), https=True, images=images)


@dataclass
class Kube:
    """The real `kubernetes` client, configured from kubesim's kubeconfig only."""

    core: client.CoreV1Api
    networking: client.NetworkingV1Api
    apiext: client.ApiextensionsV1Api
    custom: client.CustomObjectsApi


@pytest.fixture(scope="session")
def kube(kubesim: Kubesim) -> Kube:
    config.load_kube_config(config_file=str(kubesim.kubeconfig))
    return Kube(
        core=client.CoreV1Api(),
        networking=client.NetworkingV1Api(),
        apiext=client.ApiextensionsV1Api(),
        custom=client.CustomObjectsApi(),
    )


@dataclass
class KubeHttps:
    """The real `kubernetes` client for the HTTPS kubesim, as its admin (client certificate)."""

    api_client: client.ApiClient
    core: client.CoreV1Api
    apps: client.AppsV1Api
    rbac: client.RbacAuthorizationV1Api


@pytest.fixture(scope="session")
def kube_https(kubesim_https: Kubesim) -> KubeHttps:
    # A configuration of its own: the plain-HTTP `kube` fixture owns the client's global default.
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubesim_https.kubeconfig), client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    return KubeHttps(
        api_client=api_client,
        core=client.CoreV1Api(api_client),
        apps=client.AppsV1Api(api_client),
        rbac=client.RbacAuthorizationV1Api(api_client),
    )


@pytest.fixture
def https_namespace(request, kube_https: KubeHttps) -> str:
    """A fresh namespace on the HTTPS kubesim for one test, deleted afterwards."""
    name = _namespace_name(request.node.name)
    kube_https.core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        kube_https.core.delete_namespace(name, _request_timeout=10)
    except ApiException as e:
        if e.status != 404:
            raise


def _namespace_name(test_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower().removeprefix("test_")).strip("-")
    return f"t-{base[:40].strip('-')}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(request, kube: Kube) -> str:
    """A fresh namespace for one test, deleted afterwards."""
    name = _namespace_name(request.node.name)
    kube.core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: kube.core.read_namespace(name), f"namespace {name} to be readable", timeout=10)
    yield name
    try:
        kube.core.delete_namespace(name, _request_timeout=10)
    except ApiException as e:
        if e.status != 404:
            raise


@pytest.fixture(autouse=True)
def _bounded_test(request):
    """Fails a test that runs longer than its bound instead of hanging the suite."""
    bound = request.node.get_closest_marker("bound")
    if bound is not None:
        limit = int(bound.args[0])
    else:
        limit = SPARK_TEST_TIMEOUT_S if request.node.get_closest_marker("spark") else DEFAULT_TEST_TIMEOUT_S

    def on_alarm(signum, frame):
        raise TimeoutError(f"{request.node.nodeid} exceeded its {limit}s bound")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Submitter:
    """A running `submitter serve --insecure-dev` against the session's kubesim."""

    url: str
    log: Path
    proc: subprocess.Popen = field(repr=False)

    def log_tail(self, n: int = 40) -> str:
        return _log_tail(self.log, n)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def submitter(tmp_path_factory, kubesim: Kubesim) -> Submitter:
    """`submitter serve --insecure-dev` on loopback, ready (caches synced) before it is used."""
    binary = _binary("SUBMITTER_BIN", "submitter")
    tmp = tmp_path_factory.mktemp("submitter")
    log = tmp / "submitter.log"
    url = f"http://127.0.0.1:{_free_port()}"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [str(binary), "serve", "--insecure-dev", "--kubeconfig", str(kubesim.kubeconfig),
             "--listen", url.removeprefix("http://")],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
        )
    handle = Submitter(url=url, log=log, proc=proc)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"submitter exited with {proc.returncode}; log:\n{handle.log_tail()}", pytrace=False)
            try:
                if requests.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"submitter not ready within {STARTUP_TIMEOUT_S:.0f}s; log:\n{handle.log_tail()}",
                            pytrace=False)
            time.sleep(0.1)
        yield handle
    finally:
        _stop(proc)
