"""The submitter's REST API over mTLS, for the hook (blocking) and the trigger (asyncio).

No Airflow import here: the wire format, the error envelope and which failures are worth a retry
are the submitter's contract (openapi/spark-submit.yaml), not Airflow's.

Retry rule, per call: 500 `INTERNAL_SERVER_ERROR`, 503 `SUBMITTER_OVERLOADED` and 429
(`QUOTA_EXCEEDED`: the namespace's ResourceQuota had no room; `TOO_MANY_LOG_STREAMS`), each with
its `Retry-After`, and transport failures that are not TLS failures (refused connection, timeout, a
connection dropped mid-answer) are retried a bounded number of times. A repeated submission is
safe: the same `submission_id` never makes a second driver. Everything else is final: another
try would get the same answer. A TLS failure is final too: a certificate the submitter refuses
stays refused, and a client that kept retrying it would look like an outage instead of a
misconfiguration.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

import httpx

SUBMIT_PATH = "/api/v1/spark-submit"
USER_AGENT = "airflow-provider-spark-submitter"

# The `action` of a DriverStatus (seed 001's table, as the submitter answers it).
RECONNECT = "Reconnect"
DONE = "Done"
RESUBMIT = "Resubmit"

RETRYABLE_STATUSES = frozenset({429, 500, 503})
DEFAULT_ATTEMPTS = 4
MAX_BACKOFF_S = 8.0
MAX_RETRY_AFTER_S = 10.0


class SubmitterError(Exception):
    """A call to the submitter failed. `retryable` says whether another try may succeed."""

    retryable = False


class SubmitterConfigError(SubmitterError):
    """The connection cannot be used as configured (missing file, unreadable certificate or key)."""


class SubmitterTlsError(SubmitterError):
    """The TLS handshake failed: a server certificate we do not trust, or a client certificate
    the submitter refuses."""


class SubmitterUnreachable(SubmitterError):
    """No answer: refused connection, timeout, connection lost. Worth retrying."""

    retryable = True


class SubmitterRefused(SubmitterError):
    """The submitter answered with its error envelope (or with something that is not its API)."""

    def __init__(self, status: int, error_code: str, message: str, submission_id: str = ""):
        self.status = status
        self.error_code = error_code
        self.message = message
        self.submission_id = submission_id
        self.retryable = status in RETRYABLE_STATUSES
        super().__init__(f"the submitter answered HTTP {status} {error_code}: {message}{_HINTS.get(status, '')}")


# What a person should check when the submitter does not accept who we are.
_HINTS = {
    401: "; check the connection's client_cert and client_key: the submitter needs a client certificate "
         "signed by the CA it trusts (its --client-ca)",
    403: "; the submitter's policy does not allow this client's certificate identity for that namespace "
         "or service account",
}


@dataclass(frozen=True)
class SubmitterConfig:
    """Where the submitter is and how to prove who we are.

    `ca_cert`, `client_cert` and `client_key` are file paths or inline PEM text. `url` is
    `https://host:port`; `http://` only for a `submitter serve --insecure-dev`.
    """

    url: str
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    timeout: float = 30.0
    attempts: int = DEFAULT_ATTEMPTS

    def __post_init__(self) -> None:
        if not self.url.startswith(("https://", "http://")):
            raise SubmitterConfigError(f"submitter url {self.url!r} must start with https:// or http://")
        if (self.client_cert is None) != (self.client_key is None):
            raise SubmitterConfigError("client_cert and client_key must be given together")
        if self.attempts < 1:
            raise SubmitterConfigError(f"attempts must be at least 1, got {self.attempts}")

    @property
    def is_tls(self) -> bool:
        return self.url.startswith("https://")


@dataclass(frozen=True)
class SubmitResult:
    """A 201 (created) or 200 (`duplicate_submission`: the driver of this id already existed)."""

    submission_id: str
    namespace: str
    driver_pod_name: str
    driver_pod_uid: str
    spark_app_id: str
    duplicate_submission: bool

    @property
    def driver(self) -> str:
        """The `namespace:pod` id an orchestrator keeps."""
        return f"{self.namespace}:{self.driver_pod_name}"


@dataclass(frozen=True)
class DriverStatus:
    """The submitter's `DriverStatus`: the driver container's state and the action it implies."""

    namespace: str
    driver_pod_name: str
    phase: str
    action: str
    pod_phase: str | None = None
    container_state: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    finished_at: str | None = None
    submission_id: str | None = None
    spark_app_id: str | None = None
    driver_pod_uid: str | None = None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DriverStatus:
        try:
            return cls(
                namespace=doc["namespace"],
                driver_pod_name=doc["driver_pod_name"],
                phase=doc["phase"],
                action=doc["action"],
                pod_phase=doc.get("pod_phase"),
                container_state=doc.get("container_state"),
                exit_code=doc.get("exit_code"),
                reason=doc.get("reason"),
                message=doc.get("message"),
                finished_at=doc.get("finished_at"),
                submission_id=doc.get("submission_id"),
                spark_app_id=doc.get("spark_app_id"),
                driver_pod_uid=doc.get("driver_pod_uid"),
            )
        except (KeyError, TypeError) as e:
            raise SubmitterRefused(200, "BAD_RESPONSE", f"not a DriverStatus: {doc!r:.200}") from e

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def driver(self) -> str:
        return f"{self.namespace}:{self.driver_pod_name}"

    def describe(self) -> str:
        """What a person needs to see when the driver did not succeed: exit code, reason, message."""
        details = []
        if self.exit_code is not None:
            details.append(f"exit code {self.exit_code}")
        if self.reason:
            details.append(f"reason {self.reason}")
        text = f"driver {self.driver} is {self.phase}"
        if details:
            text += f" ({', '.join(details)})"
        if self.message:
            text += f": {self.message}"
        return text


def describe_kill(target: str, status: DriverStatus | None) -> str:
    """What a kill of `target` (a driver or a submission id) did, in a task log's words."""
    if status is None:
        return f"the submitter knows no driver {target}: nothing to kill"
    return f"asked the submitter to kill {target}: {status.describe()}"


def split_driver(driver: str) -> tuple[str, str]:
    """`namespace:pod` → (namespace, pod)."""
    namespace, sep, pod = driver.partition(":")
    if not sep or not namespace or not pod or ":" in pod:
        raise ValueError(f"driver id {driver!r} is not of the form namespace:pod")
    return namespace, pod


# --- TLS material -----------------------------------------------------------------------------

_pem_dir: str | None = None


def _private_dir() -> str:
    """A 0700 directory for inline PEM material (ssl loads client certificates from files only)."""
    global _pem_dir
    if _pem_dir is None:
        _pem_dir = tempfile.mkdtemp(prefix="spark-submitter-tls-")
        atexit.register(shutil.rmtree, _pem_dir, True)
    return _pem_dir


def _is_inline_pem(value: str) -> bool:
    return "-----BEGIN " in value


def _pem_file(value: str, what: str) -> str:
    if _is_inline_pem(value):
        fd, path = tempfile.mkstemp(prefix=f"{what}-", suffix=".pem", dir=_private_dir())
        with os.fdopen(fd, "w") as f:
            f.write(value)
        return path
    if not os.path.isfile(value):
        raise SubmitterConfigError(f"{what} file {value!r} does not exist")
    return value


def ssl_context(config: SubmitterConfig) -> ssl.SSLContext:
    """Server verification against `ca_cert` (system roots when none), and our client certificate."""
    try:
        if config.ca_cert and _is_inline_pem(config.ca_cert):
            context = ssl.create_default_context(cadata=config.ca_cert)
        elif config.ca_cert:
            context = ssl.create_default_context(cafile=_pem_file(config.ca_cert, "ca_cert"))
        else:
            context = ssl.create_default_context()
    except ssl.SSLError as e:
        raise SubmitterConfigError(f"ca_cert is not a usable PEM CA certificate: {e}") from e
    if config.client_cert and config.client_key:
        cert = _pem_file(config.client_cert, "client_cert")
        key = _pem_file(config.client_key, "client_key")
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as e:
            raise SubmitterConfigError(
                f"client_cert and client_key do not form a usable certificate and key: {e}"
            ) from e
    return context


# --- error classification -----------------------------------------------------------------------


def _ssl_error_in(exc: BaseException) -> ssl.SSLError | None:
    """The ssl.SSLError behind an httpx error, if any (httpcore wraps it once or twice)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        # An EOF in the middle of a record is a dropped connection, not a verdict on a certificate.
        if isinstance(e, ssl.SSLError) and not isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return e
        todo += [e.__cause__, e.__context__]
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
    return None


def transport_error(exc: httpx.TransportError, url: str) -> SubmitterError:
    """A transport failure as a SubmitterError: TLS failures are final, the rest retryable."""
    tls = _ssl_error_in(exc)
    if isinstance(tls, ssl.SSLCertVerificationError):
        return SubmitterTlsError(
            f"TLS handshake with the submitter at {url} failed: its server certificate is not trusted "
            f"({getattr(tls, 'verify_message', None) or tls}); check the connection's ca_cert"
        )
    if tls is not None:
        return SubmitterTlsError(
            f"TLS handshake with the submitter at {url} failed: the submitter refused this client's "
            f"certificate ({getattr(tls, 'reason', None) or tls}); check the connection's client_cert and client_key: "
            f"they must be signed by the CA the submitter trusts (its --client-ca)"
        )
    return SubmitterUnreachable(f"cannot reach the submitter at {url}: {type(exc).__name__}: {exc}")


def _refusal(response: httpx.Response) -> SubmitterRefused:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error_code"), str):
        return SubmitterRefused(
            response.status_code, body["error_code"], str(body.get("message", "")),
            str(body.get("submission_id", "")),
        )
    text = response.text[:200]
    return SubmitterRefused(response.status_code, "UNEXPECTED_RESPONSE", f"not the submitter's envelope: {text!r}")


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError as e:
        raise SubmitterRefused(response.status_code, "BAD_RESPONSE", f"not JSON: {response.text[:200]!r}") from e
    if not isinstance(body, dict):
        raise SubmitterRefused(response.status_code, "BAD_RESPONSE", f"not a JSON object: {body!r:.200}")
    return body


def _retry_delay(attempt: int, retry_after: str | None) -> float:
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)
        except ValueError:
            pass
    return min(0.5 * 2**attempt, MAX_BACKOFF_S)


def _submit_body(submission_id: str, args: list[str], driver_pod_template: dict | None,
                 executor_pod_template: dict | None) -> dict[str, Any]:
    body: dict[str, Any] = {"submission_id": submission_id, "spark_submit_args": list(args)}
    if driver_pod_template is not None:
        body["driver_pod_template"] = driver_pod_template
    if executor_pod_template is not None:
        body["executor_pod_template"] = executor_pod_template
    return body


def _submit_result(response: httpx.Response) -> SubmitResult:
    if response.status_code not in (200, 201):
        raise _refusal(response)
    body = _json(response)
    try:
        return SubmitResult(
            submission_id=body["submission_id"],
            namespace=body["namespace"],
            driver_pod_name=body["driver_pod_name"],
            driver_pod_uid=body["driver_pod_uid"],
            spark_app_id=body["spark_app_id"],
            duplicate_submission=bool(body["duplicate_submission"]),
        )
    except KeyError as e:
        raise SubmitterRefused(response.status_code, "BAD_RESPONSE", f"answer lacks {e}: {body!r:.200}") from e


def _status_result(response: httpx.Response) -> DriverStatus | None:
    if response.status_code == 404:
        refusal = _refusal(response)
        # 404 NOT_FOUND in the envelope is the answer "no such driver" (resubmit); a 404 without
        # the envelope is a wrong URL, which must not read as a lost driver.
        if refusal.error_code == "NOT_FOUND":
            return None
        raise refusal
    if response.status_code != 200:
        raise _refusal(response)
    return DriverStatus.from_json(_json(response))


def _kill_result(response: httpx.Response) -> DriverStatus | None:
    """202 with the killed driver's status; None for a driver the submitter does not know."""
    if response.status_code == 404:
        refusal = _refusal(response)
        if refusal.error_code == "NOT_FOUND":
            return None
        raise refusal
    if response.status_code != 202:
        raise _refusal(response)
    return DriverStatus.from_json(_json(response))


def _log_params(follow: bool, since_seconds: int | None) -> dict[str, str]:
    # Always with timestamps: they are what a resumed read skips by (log_position).
    params = {"follow": "true" if follow else "false", "timestamps": "true"}
    if since_seconds is not None:
        params["since_seconds"] = str(since_seconds)
    return params


def _driver_path(namespace: str, pod: str) -> str:
    return f"/api/v1/drivers/{quote(namespace, safe='')}/{quote(pod, safe='')}"


def _submission_path(submission_id: str) -> str:
    return f"{SUBMIT_PATH}/{quote(submission_id, safe='')}"


def _client_kwargs(config: SubmitterConfig) -> dict[str, Any]:
    return {
        "base_url": config.url.rstrip("/"),
        "verify": ssl_context(config) if config.is_tls else False,
        "timeout": config.timeout,
        "headers": {"user-agent": USER_AGENT},
    }


class SubmitterClient:
    """Blocking client (the operator's worker side)."""

    def __init__(self, config: SubmitterConfig):
        self.config = config
        self._http = httpx.Client(**_client_kwargs(config))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SubmitterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, json: Any = None) -> httpx.Response:
        for attempt in range(self.config.attempts):
            retry_after = None
            try:
                response = self._http.request(method, path, json=json)
            except httpx.TransportError as e:
                error: SubmitterError = transport_error(e, self.config.url)
            else:
                if response.status_code not in RETRYABLE_STATUSES:
                    return response
                error, retry_after = _refusal(response), response.headers.get("retry-after")
            if not error.retryable or attempt + 1 == self.config.attempts:
                raise error
            time.sleep(_retry_delay(attempt, retry_after))
        raise AssertionError("unreachable: the loop returns or raises")

    def submit(self, submission_id: str, args: list[str], driver_pod_template: dict | None = None,
               executor_pod_template: dict | None = None) -> SubmitResult:
        body = _submit_body(submission_id, args, driver_pod_template, executor_pod_template)
        return _submit_result(self._call("POST", SUBMIT_PATH, json=body))

    def driver_status(self, driver: str) -> DriverStatus | None:
        """The driver's status by `namespace:pod`, or None when the submitter knows no such driver."""
        return _status_result(self._call("GET", _driver_path(*split_driver(driver))))

    def submission_status(self, submission_id: str) -> DriverStatus | None:
        return _status_result(self._call("GET", _submission_path(submission_id)))

    def kill_driver(self, driver: str) -> DriverStatus | None:
        """Kills the driver `namespace:pod` as `spark-submit --kill` does; its status after the
        kill, or None when the submitter knows no such driver. Idempotent, so retried like a
        look-up."""
        return _kill_result(self._call("DELETE", _driver_path(*split_driver(driver))))

    def kill_submission(self, submission_id: str) -> DriverStatus | None:
        """The same, for the driver of a submission id."""
        return _kill_result(self._call("DELETE", _submission_path(submission_id)))


class AsyncSubmitterClient:
    """The same calls for asyncio (the trigger, in the triggerer)."""

    def __init__(self, config: SubmitterConfig):
        self.config = config
        self._http = httpx.AsyncClient(**_client_kwargs(config))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSubmitterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, json: Any = None) -> httpx.Response:
        for attempt in range(self.config.attempts):
            retry_after = None
            try:
                response = await self._http.request(method, path, json=json)
            except httpx.TransportError as e:
                error: SubmitterError = transport_error(e, self.config.url)
            else:
                if response.status_code not in RETRYABLE_STATUSES:
                    return response
                error, retry_after = _refusal(response), response.headers.get("retry-after")
            if not error.retryable or attempt + 1 == self.config.attempts:
                raise error
            await asyncio.sleep(_retry_delay(attempt, retry_after))
        raise AssertionError("unreachable: the loop returns or raises")

    async def driver_status(self, driver: str) -> DriverStatus | None:
        return _status_result(await self._call("GET", _driver_path(*split_driver(driver))))

    async def submission_status(self, submission_id: str) -> DriverStatus | None:
        return _status_result(await self._call("GET", _submission_path(submission_id)))

    async def kill_driver(self, driver: str) -> DriverStatus | None:
        return _kill_result(await self._call("DELETE", _driver_path(*split_driver(driver))))

    @asynccontextmanager
    async def driver_log(self, driver: str, *, follow: bool, since_seconds: int | None = None,
                         read_timeout: float | None = None) -> AsyncIterator[AsyncIterator[bytes]]:
        """The driver container's log with timestamps, as chunks of bytes while they come.

        One request, not retried here: a follower resumes from its position instead. A refusal
        (404, 410 `DRIVER_GONE`, 429 `TOO_MANY_LOG_STREAMS`, 400 for a container not started)
        raises SubmitterRefused before the first chunk; a connection lost or silent for
        `read_timeout` seconds raises SubmitterUnreachable from the iteration.
        """
        path = _driver_path(*split_driver(driver)) + "/log"
        timeout = httpx.Timeout(self.config.timeout, read=read_timeout or self.config.timeout)
        request = self._http.build_request("GET", path, params=_log_params(follow, since_seconds),
                                           timeout=timeout)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise transport_error(e, self.config.url) from e
        try:
            if response.status_code != 200:
                await response.aread()
                raise _refusal(response)
            yield self._chunks(response)
        finally:
            await response.aclose()

    async def _chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.TransportError as e:
            raise transport_error(e, self.config.url) from e
