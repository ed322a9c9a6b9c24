"""The provider's pure parts (ids, the resume table, connection parsing) and its registration with
Airflow. No stack needed: these run in a second or two."""

from __future__ import annotations

import json
import ssl

import pytest

from spark_submitter_provider.client import (
    DriverStatus,
    SubmitterConfig,
    SubmitterConfigError,
    SubmitterTlsError,
    SubmitterUnreachable,
    split_driver,
    transport_error,
)
from spark_submitter_provider.resume import Record, needs_status, next_step, submission_id_for


def status(phase: str, action: str, pod_phase: str | None = "Running", **kw) -> DriverStatus:
    return DriverStatus(namespace="ns", driver_pod_name="pi-driver", phase=phase, action=action,
                        pod_phase=pod_phase, **kw)


def test_submission_id_ignores_the_try_and_differs_per_task_instance_and_generation():
    base = submission_id_for("dag", "task", "run", -1)
    assert base == submission_id_for("dag", "task", "run", -1), "stable: a retry finds its driver"
    others = {submission_id_for("dag", "task", "run", 0), submission_id_for("dag", "task2", "run", -1),
              submission_id_for("dag", "task", "run2", -1), submission_id_for("dag2", "task", "run", -1),
              # No ambiguity from where the separators fall.
              submission_id_for("da", "gtask", "run", -1)}
    assert base not in others and len(others) == 5
    assert submission_id_for("dag", "task", "run", -1, generation=1) == base + "-g1"
    assert submission_id_for("d", "t", "r", -1, generation=2, base="mine") == "mine-g2"
    assert len(base) <= 253


RECORD = Record(generation=0, submission_id="airflow-x", driver="ns:pi-driver")


@pytest.mark.parametrize(
    ("record", "driver_status", "kind", "generation"),
    [
        (None, None, "submit", 0),
        (Record(3, "airflow-x-g3"), None, "submit", 3),  # killed before the answer: same id again
        (RECORD, status("Pending", "Reconnect", "Pending"), "wait", 0),
        (RECORD, status("Running", "Reconnect"), "wait", 0),
        (RECORD, status("Succeeded", "Done", "Succeeded"), "done", 0),
        (RECORD, status("Succeeded", "Done", None), "done", 0),  # garbage-collected, retained
        (Record(0, "airflow-x", "ns:pi-driver", "Succeeded"), None, "done", 0),  # cached success
        (RECORD, status("Failed", "Resubmit", "Failed", exit_code=1, reason="Error"), "submit", 1),
        (RECORD, status("Unknown", "Resubmit", "Unknown"), "submit", 1),
        (RECORD, None, "submit", 1),  # 404: no such driver
    ],
    ids=["first-try", "id-without-driver", "pending", "running", "succeeded", "succeeded-collected",
         "succeeded-cached", "failed", "unknown", "not-found"],
)
def test_next_step_follows_the_resume_table(record, driver_status, kind, generation):
    step = next_step(record, driver_status)
    assert (step.kind, step.generation) == (kind, generation), step
    if kind in ("wait", "done"):
        assert step.driver == record.driver


def test_status_is_asked_only_for_a_recorded_unfinished_driver():
    assert not needs_status(None)
    assert not needs_status(Record(0, "x"))
    assert not needs_status(Record(0, "x", "ns:p", "Succeeded"))
    assert needs_status(Record(0, "x", "ns:p"))


def test_record_round_trips_and_unreadable_records_are_ignored():
    record = Record(2, "airflow-x-g2", "ns:p", None)
    assert Record.from_store(json.loads(json.dumps(record.to_store()))) == record
    assert Record.from_store(None) is None
    assert Record.from_store({"generation": "2"}) is None
    assert Record.from_store("ns:p") is None


def test_failed_driver_description_carries_exit_code_reason_and_message():
    s = status("Failed", "Resubmit", "Failed", exit_code=3, reason="Error", message="Job aborted: stage 2")
    assert s.describe() == "driver ns:pi-driver is Failed (exit code 3, reason Error): Job aborted: stage 2"


def test_driver_ids_must_be_namespace_colon_pod():
    assert split_driver("ns:pod") == ("ns", "pod")
    for bad in ("pod", ":pod", "ns:", "a:b:c"):
        with pytest.raises(ValueError):
            split_driver(bad)


class Conn:
    def __init__(self, host, port=None, schema=None, extra=None):
        self.conn_id, self.host, self.port, self.schema = "c", host, port, schema
        self.extra_dejson = extra or {}


def test_connection_fields_make_the_url_and_tls_material(tmp_path):
    from spark_submitter_provider.hooks.submitter import config_from_connection

    cfg = config_from_connection(Conn("submitter.svc", extra={"ca_cert": "/ca", "client_cert": "/c",
                                                              "client_key": "/k", "timeout": "5"}))
    assert (cfg.url, cfg.ca_cert, cfg.client_cert, cfg.client_key, cfg.timeout) == \
        ("https://submitter.svc:8443", "/ca", "/c", "/k", 5.0)
    assert config_from_connection(Conn("h", 9000, "http")).url == "http://h:9000"
    assert config_from_connection(Conn("https://h:9443/")).url == "https://h:9443"
    with pytest.raises(SubmitterConfigError):
        config_from_connection(Conn("h", schema="ftp"))
    with pytest.raises(SubmitterConfigError):
        config_from_connection(Conn("h", extra={"client_cert": "/c"}))  # a key is needed too
    with pytest.raises(SubmitterConfigError):
        config_from_connection(Conn(None))


def test_missing_or_unusable_tls_files_are_configuration_errors(tmp_path):
    from spark_submitter_provider.client import ssl_context

    with pytest.raises(SubmitterConfigError, match="does not exist"):
        ssl_context(SubmitterConfig("https://h:1", ca_cert=str(tmp_path / "nope.crt")))
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(SubmitterConfigError):
        ssl_context(SubmitterConfig("https://h:1", client_cert=str(junk), client_key=str(junk)))


def test_tls_failures_are_final_and_connection_failures_retryable():
    import httpx

    def wrapped(cause: BaseException) -> httpx.TransportError:
        try:
            try:
                raise cause
            except BaseException as e:
                raise httpx.ConnectError("boom") from e
        except httpx.TransportError as outer:
            return outer

    refused = transport_error(wrapped(ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca")), "u")
    assert isinstance(refused, SubmitterTlsError) and not refused.retryable
    assert "refused this client's certificate" in str(refused)
    untrusted = transport_error(wrapped(ssl.SSLCertVerificationError(1, "certificate verify failed")), "u")
    assert isinstance(untrusted, SubmitterTlsError) and "not trusted" in str(untrusted)
    dropped = transport_error(wrapped(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")), "u")
    assert isinstance(dropped, SubmitterUnreachable) and dropped.retryable
    refused_tcp = transport_error(wrapped(ConnectionRefusedError(111, "Connection refused")), "u")
    assert isinstance(refused_tcp, SubmitterUnreachable) and refused_tcp.retryable


def test_identity_refusals_say_what_to_check():
    from spark_submitter_provider.client import SubmitterRefused

    unauthenticated = SubmitterRefused(401, "UNAUTHENTICATED", "a client certificate is required")
    assert not unauthenticated.retryable
    assert "check the connection's client_cert and client_key" in str(unauthenticated)
    assert "policy does not allow" in str(SubmitterRefused(403, "FORBIDDEN", "namespace spark-jobs"))
    assert SubmitterRefused(503, "SUBMITTER_OVERLOADED", "busy").retryable


def test_airflow_discovers_the_provider_and_its_connection_type():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    assert "airflow-provider-spark-submitter" in ProvidersManager().providers
    hook = ProvidersManagerTaskRuntime().hooks["spark_submitter"]
    assert hook.hook_class_name == "spark_submitter_provider.hooks.submitter.SparkSubmitterHook"


def test_trigger_serializes_to_what_the_triggerer_recreates_it_from():
    from spark_submitter_provider.triggers.driver import SparkDriverTrigger

    trigger = SparkDriverTrigger("ns:pi-driver", "my_conn", poll_interval=2.5)
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    again = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert kwargs["driver"] == "ns:pi-driver" and kwargs["conn_id"] == "my_conn"
