"""The live `submitter serve` against openapi/spark-submit.yaml, with schemathesis.

kubesim (the session fixture) is the API server; the submitter is the session's `--insecure-dev` one (plain HTTP on
loopback, every submission allowed; see conftest.py). Every operation of the document gets generated
requests (bounded: MAX_EXAMPLES each, well under a minute in all) and each answer must be
documented: its status, its content type and its body schema; and the server never answers a 5xx
other than the documented 503. The document's agreement with the code itself is checked in Rust
(submitter/tests/openapi_drift.rs).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)


ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "openapi" / "spark-submit.yaml"
MAX_EXAMPLES = 25

# Only the documented 503 (overloaded, API server unreachable) may be a 5xx.
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx", "503"]}}}
)
schema = schemathesis.openapi.from_path(OPENAPI, config=CONFIG)


def no_undocumented_server_error(ctx, response, case) -> None:
    """A 500 (or any 5xx but 503) on generated input is a server bug, whatever the document says."""
    assert response.status_code < 500 or response.status_code == 503, (
        f"{case.method} {case.formatted_path} answered {response.status_code}: {response.text[:500]}"
    )


# (method, path template, status) of every answer, to show the generation reached the service.
SEEN: Counter = Counter()


def record(ctx, response, case) -> None:
    SEEN[(case.method.upper(), case.operation.path, response.status_code)] += 1


CHECKS = [
    record,
    not_a_server_error,
    no_undocumented_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def submitter_url(submitter) -> str:
    """The session's submitter (tests/python/conftest.py); a panic during the run fails the module."""
    yield submitter.url
    if "panicked" in (tail := submitter.log_tail(200)):
        pytest.fail(f"the submitter panicked:\n{tail}", pytrace=False)


@pytest.fixture(scope="module")
def session() -> requests.Session:
    with requests.Session() as s:
        yield s


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_live_server_agrees_with_the_openapi_document(case, submitter_url, session):
    case.call_and_validate(base_url=submitter_url, session=session, checks=CHECKS, timeout=10)


def test_generated_requests_reached_the_service_and_its_error_paths():
    """Runs after the generated tests: they must have created drivers and met the envelope."""
    if not SEEN:
        pytest.skip("the generated tests did not run in this session")
    print(sorted(SEEN.items()))
    submit = {
        status
        for (method, path, status), _ in SEEN.items()
        if path == "/api/v1/spark-submit" and method == "POST"
    }
    assert {201, 400, 415} <= submit, f"submit answers seen: {sorted(submit)}"
    listed = {
        status
        for (method, path, status), _ in SEEN.items()
        if path == "/api/v1/spark-submit" and method == "GET"
    }
    assert 200 in listed, f"list answers seen: {sorted(listed)}"
    lookups = {status for (method, path, status), _ in SEEN.items() if "{" in path}
    assert 404 in lookups, f"look-up answers seen: {sorted(lookups)}"
    assert sum(SEEN.values()) >= 100


def test_every_documented_operation_is_exercised():
    operations = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert operations == {
        ("GET", "/api/v1/spark-submit"),
        ("POST", "/api/v1/spark-submit"),
        ("GET", "/api/v1/spark-submit/{submission_id}"),
        ("DELETE", "/api/v1/spark-submit/{submission_id}"),
        ("GET", "/api/v1/spark-submit/{submission_id}/log"),
        ("GET", "/api/v1/drivers/{namespace}/{pod}"),
        ("DELETE", "/api/v1/drivers/{namespace}/{pod}"),
        ("GET", "/api/v1/drivers/{namespace}/{pod}/log"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    }
