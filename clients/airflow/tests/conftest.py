"""The stack the provider's tests run against, all on loopback and started here:

- `kubesim serve` (KUBESIM_BIN) and `submitter serve` (SUBMITTER_BIN) over mTLS, with a CA, a
  server certificate, a client certificate the policy allows, and a rogue CA's client
  certificate with the same name;
- an Airflow home with a SQLite metadata database, migrated once per session, in which the tests
  run real `airflow dags test` processes (the interpreter of this venv, so `airflow` is the
  pinned apache-airflow from PyPI).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

STARTUP_TIMEOUT_S = 60.0
# Upper bound of one test: a hung process must fail the test, not hang CI.
TEST_TIMEOUT_S = 240
CLIENT_IDENTITY = "airflow-worker.airflow.svc"

T = TypeVar("T")


def wait_for(probe: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.1) -> T:
    """Calls `probe` until it returns something truthy, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = probe()
            if last:
                return last
        except (AssertionError, httpx.HTTPError, sqlite3.Error) as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def _binary(var: str, package: str) -> Path:
    raw = os.environ.get(var)
    if not raw:
        pytest.fail(f"{var} is not set: `cargo build --release -p {package}` and point {var} at "
                    f"target/release/{package}", pytrace=False)
    path = Path(raw)
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"{var}={raw} is not an executable file", pytrace=False)
    return path.resolve()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(autouse=True)
def _bounded_test(request):
    def on_alarm(signum, frame):
        raise TimeoutError(f"{request.node.nodeid} exceeded its {TEST_TIMEOUT_S}s bound")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --- certificates ------------------------------------------------------------------------------


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # same identity, signed by a CA the submitter does not trust
    rogue_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key, issuer_name: x509.Name, issuer_key, *, ca: bool = False,
          sans: list[x509.GeneralName] | None = None, server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans or []), critical=False)
        usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate | None = None, key=None) -> Path:
    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        path.chmod(0o600)
    return path


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    d = tmp_path_factory.mktemp("pki")

    def authority(name: str):
        key = _key()
        cert = _cert(name, key, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), key, ca=True)
        return cert, key

    ca, ca_key = authority("spark-submitter test CA")
    rogue_ca, rogue_ca_key = authority("rogue CA")
    server_key, client_key, rogue_key = _key(), _key(), _key()
    server = _cert("spark-submitter", server_key, ca.subject, ca_key, server=True,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client = _cert(CLIENT_IDENTITY, client_key, ca.subject, ca_key, sans=[x509.DNSName(CLIENT_IDENTITY)])
    rogue = _cert(CLIENT_IDENTITY, rogue_key, rogue_ca.subject, rogue_ca_key, sans=[x509.DNSName(CLIENT_IDENTITY)])
    return Pki(
        ca=_write(d / "ca.crt", ca),
        server_cert=_write(d / "server.crt", server), server_key=_write(d / "server.key", key=server_key),
        client_cert=_write(d / "client.crt", client), client_key=_write(d / "client.key", key=client_key),
        rogue_cert=_write(d / "rogue.crt", rogue), rogue_key=_write(d / "rogue.key", key=rogue_key),
    )


# --- kubesim and the submitter -----------------------------------------------------------------


@dataclass
class Kubesim:
    url: str
    kubeconfig: Path
    log: Path
    proc: subprocess.Popen = field(repr=False)

    def get(self, path: str, **params: Any) -> dict:
        r = httpx.get(f"{self.url}{path}", params=params, timeout=10)
        r.raise_for_status()
        return r.json()

    def driver_pods(self, namespace: str) -> list[dict]:
        return self.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="spark-role=driver")["items"]

    def kill_container(self, namespace: str, pod: str, exit_code: int) -> None:
        r = httpx.post(f"{self.url}/sim/v1/pods/{namespace}/{pod}/kill",
                       json={"container": "spark-kubernetes-driver", "exitCode": exit_code}, timeout=10)
        r.raise_for_status()

    def delete_pod(self, namespace: str, pod: str) -> None:
        r = httpx.delete(f"{self.url}/api/v1/namespaces/{namespace}/pods/{pod}",
                         params={"gracePeriodSeconds": 0}, timeout=10)
        r.raise_for_status()


@pytest.fixture(scope="session")
def kubesim(tmp_path_factory) -> Kubesim:
    binary = _binary("KUBESIM_BIN", "kubesim")
    tmp = tmp_path_factory.mktemp("kubesim")
    kubeconfig, log = tmp / "kubeconfig", tmp / "kubesim.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--kubeconfig-out", str(kubeconfig)],
            stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL,
        )
    first: list[str] = []

    def read_stdout() -> None:
        assert proc.stdout is not None
        first.append(proc.stdout.readline().decode(errors="replace").strip())
        for _ in proc.stdout:  # keep draining so the pipe never fills
            pass

    threading.Thread(target=read_stdout, daemon=True).start()
    try:
        wait_for(lambda: proc.poll() is not None or (first and kubeconfig.exists()),
                 f"kubesim to start (log:\n{_tail(log)})", timeout=STARTUP_TIMEOUT_S)
        if proc.poll() is not None:
            pytest.fail(f"kubesim exited with {proc.returncode}; log:\n{_tail(log)}", pytrace=False)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", first[0]), first
        yield Kubesim(first[0], kubeconfig, log, proc)
    finally:
        _stop(proc)


@dataclass
class Submitter:
    url: str
    port: int
    log: Path
    pki: Pki
    proc: subprocess.Popen = field(repr=False)

    def client(self, cert: Path | None = None, key: Path | None = None) -> httpx.Client:
        cert_pair = (str(cert or self.pki.client_cert), str(key or self.pki.client_key))
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(*cert_pair)
        return httpx.Client(base_url=self.url, verify=context, timeout=10)

    def submissions_created(self) -> int:
        """Driver pods this submitter created (201s), from its own metrics."""
        with self.client() as c:
            text = c.get("/metrics").text
        return int(sum(float(m) for m in re.findall(
            r'^submitter_http_requests_total\{[^}]*route="submit"[^}]*code="201"[^}]*\} (\S+)', text, re.M)))


@pytest.fixture(scope="session")
def submitter(tmp_path_factory, kubesim: Kubesim, pki: Pki) -> Submitter:
    binary = _binary("SUBMITTER_BIN", "submitter")
    tmp = tmp_path_factory.mktemp("submitter")
    policy = tmp / "policy.yaml"
    policy.write_text(json.dumps({"clients": [
        {"identity": CLIENT_IDENTITY, "namespaces": ["*"], "serviceAccounts": ["*"]}]}))
    port = _free_port()
    log = tmp / "submitter.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [str(binary), "serve", "--kubeconfig", str(kubesim.kubeconfig), "--listen", f"127.0.0.1:{port}",
             "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
             "--client-ca", str(pki.ca), "--policy", str(policy)],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
        )
    handle = Submitter(f"https://127.0.0.1:{port}", port, log, pki, proc)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"submitter exited with {proc.returncode}; log:\n{_tail(log)}", pytrace=False)
            # With a client certificate: whether probes need one depends on the submitter's version.
            with handle.client() as c:
                return c.get("/readyz").status_code == 200

        wait_for(ready, f"the submitter to be ready (log:\n{_tail(log)})", timeout=STARTUP_TIMEOUT_S)
        yield handle
    finally:
        _stop(proc)


def _namespace_name(test_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower().removeprefix("test_")).strip("-")
    return f"af-{base[:40].strip('-')}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(request, kubesim: Kubesim) -> str:
    name = _namespace_name(request.node.name)
    r = httpx.post(f"{kubesim.url}/api/v1/namespaces", json={"metadata": {"name": name}}, timeout=10)
    r.raise_for_status()
    yield name
    httpx.delete(f"{kubesim.url}/api/v1/namespaces/{name}", timeout=10)


# kubesim's scripted containers (docs/kubesim.md): run until the test ends them, or exit 1. Each
# writes `kubesim: container NAME started`, `… running for Ns` every second, `… exited with code C`.
RUN_UNTIL_KILLED = "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1"
EXIT_1 = "spark.kubernetes.driver.annotation.kubesim.io/exit-code=1"
DRIVER_CONTAINER = "spark-kubernetes-driver"
DRIVER_LINE_PREFIX = "[driver] "


def driver_line(what: str) -> str:
    """A line of a scripted driver's log: `started`, `running for 2s`, `exited with code 0`."""
    return f"kubesim: container {DRIVER_CONTAINER} {what}"


def spark_args(namespace: str, *confs: str) -> list[str]:
    args = [
        "--master", "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode", "cluster",
        "--name", "airflow-pi",
        "--class", "org.apache.spark.examples.SparkPi",
        "--conf", "spark.kubernetes.container.image=spark:4.0.0",
        "--conf", f"spark.kubernetes.namespace={namespace}",
    ]
    for conf in confs:
        args += ["--conf", conf]
    return args + ["local:///opt/spark/examples/jars/spark-examples.jar"]


def split(driver: str) -> tuple[str, str]:
    namespace, pod = driver.split(":")
    return namespace, pod


# --- Airflow -----------------------------------------------------------------------------------

DAGS_SOURCE = Path(__file__).with_name("dags.py")
DAG_COUNT = 7  # the DAGs dags.py defines


@dataclass
class Airflow:
    """A small real Airflow deployment: api-server (the execution API the workers talk to),
    scheduler with the LocalExecutor, dag-processor and triggerer, on one SQLite metadata DB."""

    home: Path
    db: Path
    env: dict[str, str]
    api_url: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    def api(self, method: str, path: str, body: dict) -> dict:
        """The public REST API (`/api/v2…`), as the UI calls it (every user is an admin here)."""
        r = httpx.request(method, f"{self.api_url}/api/v2{path}", json=body, timeout=30)
        assert r.status_code == 200, f"{method} {path}: {r.status_code} {r.text[:2000]}"
        return r.json()

    def clear(self, dag_id: str, run_id: str, task_id: str = "spark_pi") -> None:
        """What the UI's "Clear" does to a task instance (running or not): it runs again."""
        self.api("POST", f"/dags/{dag_id}/clearTaskInstances",
                 {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False})

    def mark(self, dag_id: str, run_id: str, state: str, task_id: str = "spark_pi") -> None:
        """What the UI's "Mark as failed/success" does."""
        self.api("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}", {"new_state": state})

    def cli(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run([sys.executable, "-m", "airflow", *args], capture_output=True, text=True,
                              env=self.env, cwd=self.home, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def trigger(self, dag_id: str, run_id: str, conf: dict) -> None:
        self.cli("dags", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf))

    def query(self, sql: str, *args: Any) -> list[tuple]:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10) as db:
            return db.execute(sql, args).fetchall()

    def task_instance(self, dag_id: str, run_id: str, task_id: str = "spark_pi") -> dict | None:
        rows = self.query("SELECT state, try_number, pid FROM task_instance "
                          "WHERE dag_id = ? AND run_id = ? AND task_id = ?", dag_id, run_id, task_id)
        if not rows:
            return None
        state, try_number, pid = rows[0]
        return {"state": state, "try_number": try_number, "pid": pid}

    def record(self, dag_id: str, run_id: str, task_id: str = "spark_pi") -> dict | None:
        """The provider's record in the task state store."""
        rows = self.query("SELECT value FROM task_state_store "
                          "WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = ?",
                          dag_id, run_id, task_id, "spark_submitter")
        return json.loads(rows[0][0]) if rows else None

    def xcom(self, dag_id: str, run_id: str, key: str, task_id: str = "spark_pi") -> Any:
        rows = self.query("SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = ?",
                          dag_id, run_id, task_id, key)
        return json.loads(rows[0][0]) if rows else None

    def driver_lines(self, dag_id: str, run_id: str, attempt: int, task_id: str = "spark_pi") -> list[str]:
        """The driver's lines the provider put in the try's log (`[driver] …`), in order."""
        lines = []
        for raw in self.task_log(dag_id, run_id, attempt, task_id).splitlines():
            try:
                event = json.loads(raw).get("event", "")
            except (ValueError, AttributeError):
                event = raw
            if isinstance(event, str) and event.startswith(DRIVER_LINE_PREFIX):
                lines.append(event.removeprefix(DRIVER_LINE_PREFIX))
        return lines

    def task_log(self, dag_id: str, run_id: str, attempt: int, task_id: str = "spark_pi") -> str:
        """The try's log: the worker's, then what its triggers logged (`….trigger.<job>.log`)."""
        folder = self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        paths = [folder / f"attempt={attempt}.log", *sorted(folder.glob(f"attempt={attempt}.log.trigger.*.log"))]
        return "".join(p.read_text(errors="replace") for p in paths if p.is_file())

    def wait_state(self, dag_id: str, run_id: str, states: set[str], timeout: float = 120) -> dict:
        def probe() -> dict | None:
            self.check_alive()
            ti = self.task_instance(dag_id, run_id)
            return ti if ti and ti["state"] in states else None

        return wait_for(probe, f"{dag_id}/{run_id} to reach {states} (now {self.task_instance(dag_id, run_id)})",
                        timeout=timeout, interval=0.2)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"airflow {name} exited with {proc.returncode}:\n"
                                     f"{_tail(self.home / f'{name}.log')}")

    def logs(self, n: int = 30) -> str:
        return "\n".join(f"--- {name}\n{_tail(self.home / f'{name}.log', n)}" for name in self.procs)


def connection_env(conn_id: str, submitter: Submitter, cert: Path, key: Path) -> dict[str, str]:
    conn = {"conn_type": "spark_submitter", "host": "127.0.0.1", "port": submitter.port, "schema": "https",
            "extra": {"ca_cert": str(submitter.pki.ca), "client_cert": str(cert), "client_key": str(key),
                      "attempts": 3}}
    return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(conn)}


@pytest.fixture(scope="session")
def airflow(tmp_path_factory, submitter: Submitter, pki: Pki) -> Airflow:
    home = tmp_path_factory.mktemp("airflow-home")
    dags = home / "dags"
    dags.mkdir()
    # Every DAG of the suite is in place before the dag-processor starts: no waiting for a rescan.
    (dags / "spark_submitter_dags.py").write_text(DAGS_SOURCE.read_text())
    db = home / "airflow.db"
    api_port = _free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{db}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        # A worker that stops heartbeating (killed) is failed, and retried, after 10 s, not 5 min.
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "10",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        # The venv's bin first: `airflow` and the interpreter are the pinned ones.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **connection_env("spark_submitter_default", submitter, pki.client_cert, pki.client_key),
        **connection_env("spark_submitter_rogue", submitter, pki.rogue_cert, pki.rogue_key),
    }
    deployment = Airflow(home, db, env, f"http://127.0.0.1:{api_port}")
    with open(home / "migrate.log", "wb") as out:
        done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], stdout=out,
                              stderr=subprocess.STDOUT, env=env, cwd=home, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"airflow db migrate failed:\n{_tail(home / 'migrate.log')}", pytrace=False)
    try:
        for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
            with open(home / f"{name}.log", "wb") as out:
                deployment.procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "airflow", name], stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=env, cwd=home, start_new_session=True)

        def ready() -> bool:
            deployment.check_alive()
            serialized = deployment.query("SELECT count(*) FROM serialized_dag")[0][0]
            health = httpx.get(f"http://127.0.0.1:{api_port}/api/v2/monitor/health", timeout=2).json()
            return serialized >= DAG_COUNT and all(
                health.get(c, {}).get("status") == "healthy" for c in ("scheduler", "triggerer", "dag_processor"))

        wait_for(ready, "the Airflow deployment to be healthy", timeout=300, interval=0.5)
        yield deployment
    finally:
        # The tests are over: a short grace, then the whole process group (workers included).
        for proc in deployment.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in deployment.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
