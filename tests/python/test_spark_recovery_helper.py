"""The driver helper (docs/examples/spark_recovery.py) against a real `operator agent` process on
the Redis store, with a `redis-server` started on a free loopback port.

The agent binary comes from AGENT_BIN, else the newest `operator` build in the target directory
(of SUBMITTER_BIN, or CARGO_TARGET_DIR, or ./target): scripts/test.sh builds only kubesim and the
submitter in release, but its `cargo nextest run` leaves a debug `operator` before these tests run.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from simutil import bin_dir, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "examples"))

import spark_recovery as sr  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent_binary() -> Path:
    candidates: list[Path] = []
    if os.environ.get("AGENT_BIN"):
        candidates.append(Path(os.environ["AGENT_BIN"]))
    if os.environ.get("SUBMITTER_BIN"):
        release = Path(os.environ["SUBMITTER_BIN"]).resolve().parent
        candidates += [release / "operator", release.parent / "debug" / "operator"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path(__file__).resolve().parents[2] / "target"))
    candidates += [bin_dir() / "operator", target / "release" / "operator", target / "debug" / "operator"]
    if os.environ.get("AGENT_BIN"):
        candidates = candidates[:1]
    found = [p for p in candidates if p.is_file() and os.access(p, os.X_OK)]
    if found:
        # The newest build: a release binary left over from an earlier checkout must not win.
        return max(found, key=lambda p: p.stat().st_mtime).resolve()
    pytest.fail(
        "no operator binary: set AGENT_BIN (e.g. `cargo build --release -p operator && "
        "AGENT_BIN=target/release/operator`); looked at " + ", ".join(map(str, candidates)),
        pytrace=False,
    )


@dataclass
class Redis:
    port: int
    proc: subprocess.Popen = field(repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/"

    def command(self, *args: str) -> bytes:
        """One inline command (arguments without spaces), e.g. a SET the operator would script."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall((" ".join(args) + "\r\n").encode())
            return s.recv(4096)

    def fence(self, app: str, epoch: int) -> None:
        """The operator's fence of `app` under [`SCOPE`], to `epoch`, as its script leaves it."""
        assert self.command("SET", f"spark:{{{app}}}:epoch", str(epoch)).startswith(b"+OK")
        assert self.command("HSET", f"spark:{{{app}}}:meta", "scope", SCOPE).startswith(b":")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def redis() -> Redis:
    port = _free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = Redis(port, proc)

    def up() -> bool:
        assert proc.poll() is None, "redis-server exited"
        try:
            return server.command("PING").startswith(b"+PONG")
        except OSError:
            return False

    try:
        wait_for(up, "redis-server answers PING", timeout=10, interval=0.05)
        yield server
    finally:
        server.stop()


@dataclass
class Agent:
    url: str
    log: Path
    proc: subprocess.Popen = field(repr=False)

    def terminate(self) -> int:
        """SIGTERM, as the kubelet stops a native sidecar; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=10)

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


@pytest.fixture
def start_agent(redis: Redis, tmp_path):
    """Starts `operator agent` for an application under an epoch; stops every one at the end."""
    binary = _agent_binary()
    started: list[Agent] = []

    def start(app: str, epoch: int) -> Agent:
        # What the operator's fence leaves in the Redis store before it submits under `epoch`.
        redis.fence(app, epoch)
        port = _free_port()
        log = tmp_path / f"agent-{epoch}-{port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_RECOVERY_")}
        env.update(
            SPARK_RECOVERY_APP=app,
            SPARK_RECOVERY_EPOCH=str(epoch),
            SPARK_RECOVERY_SCOPE=SCOPE,
            SPARK_RECOVERY_STORE="redis",
            SPARK_RECOVERY_REDIS_URL=redis.url,
            SPARK_RECOVERY_PORT=str(port),
            SPARK_RECOVERY_HEARTBEAT_MILLIS="100",
        )
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(binary), "agent"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        agent = Agent(f"http://127.0.0.1:{port}", log, proc)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        code = agent.terminate()
        assert code == 0, f"the agent exits 0 on SIGTERM, got {code}:\n{agent.log_tail()}"


# The application object and run the agents' progress belongs to (uid/run).
SCOPE = "uid-helper/1"


def app_name() -> str:
    return f"default/helper-{secrets.token_hex(4)}"


def test_a_fresh_app_restores_nothing_and_each_stage_commit_is_restored(start_agent):
    agent = start_agent(app_name(), 1)
    client = sr.RecoveryClient(agent.url, max_wait_s=20)
    assert client.restore() is None, agent.log_tail()
    assert client.epoch == 1 and client.restored_from_epoch is None

    assert client.commit(1, {"stage": 1, "outputs": {"clean": "/w/clean/epoch=1"}}) is True
    assert client.commit(2, {"stage": 2, "outputs": {"clean": "/w/clean/epoch=1", "daily": "/w/daily/epoch=1"}})
    marker = client.restore()
    assert (marker.epoch, marker.seq) == (1, 2)
    assert marker.data()["outputs"]["daily"] == "/w/daily/epoch=1"

    # A retry of the latest marker (same value, so the same text) is accepted; an older one is
    # already recorded.
    assert client.commit(2, {"outputs": {"daily": "/w/daily/epoch=1", "clean": "/w/clean/epoch=1"}, "stage": 2})
    assert client.commit(1, {"stage": 1}) is False
    assert client.restore().seq == 2


def test_a_successor_resumes_and_the_superseded_driver_is_fenced(start_agent, redis):
    app = app_name()
    old_agent = start_agent(app, 1)
    old = sr.RecoveryClient(old_agent.url, max_wait_s=20)
    assert old.restore() is None
    assert old.commit(1, "stage-1")

    # The operator fences epoch 1 (the fixture does its advance) and resubmits under epoch 2.
    new = sr.RecoveryClient(start_agent(app, 2).url, max_wait_s=20)
    marker = new.restore()
    assert (marker.epoch, marker.seq, marker.payload) == (1, 1, "stage-1")
    assert (new.epoch, new.restored_from_epoch) == (2, 1)
    assert new.commit(2, "stage-2")

    with pytest.raises(sr.Fenced) as fenced:
        old.commit(2, "zombie")
    assert (fenced.value.epoch, fenced.value.current_epoch) == (1, 2)
    assert new.restore().payload == "stage-2"


def test_an_unavailable_store_is_retried_for_a_bounded_time_then_raised(start_agent, redis):
    agent = start_agent(app_name(), 1)
    client = sr.RecoveryClient(agent.url, max_wait_s=20)
    assert client.restore() is None
    redis.stop()

    impatient = sr.RecoveryClient(agent.url, max_wait_s=1.0, first_backoff_s=0.05)
    started = time.monotonic()
    with pytest.raises(sr.Unavailable) as unavailable:
        impatient.commit(1, "p")
    assert unavailable.value.code == "STORE_UNAVAILABLE"
    # Bounded: the budget plus at most one store call (the agent bounds each at 10 s).
    assert time.monotonic() - started < 15


def test_an_unreachable_agent_is_retried_for_a_bounded_time_then_raised():
    client = sr.RecoveryClient(f"http://127.0.0.1:{_free_port()}", max_wait_s=0.5, first_backoff_s=0.05)
    with pytest.raises(sr.Unavailable) as unavailable:
        client.restore()
    assert unavailable.value.status is None


def test_the_helper_reads_its_url_from_the_environment(monkeypatch):
    monkeypatch.delenv(sr.URL_ENV, raising=False)
    with pytest.raises(sr.RecoveryError):
        sr.RecoveryClient.from_env()
    monkeypatch.setenv(sr.URL_ENV, "http://127.0.0.1:7979/")
    assert sr.RecoveryClient.from_env().url == "http://127.0.0.1:7979"
