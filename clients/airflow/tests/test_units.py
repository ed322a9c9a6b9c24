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
from spark_submitter_provider.log_position import (
    LineSplitter,
    LogCursor,
    LogPosition,
    parse_line,
    since_seconds,
    timestamp_ns,
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
        # Killed through the submitter (on_kill): a new id, the killed one stays bound to its driver.
        (RECORD, status("Failed", "Resubmit", None, reason="Killed"), "submit", 1),
        (RECORD, status("Unknown", "Resubmit", "Unknown"), "submit", 1),
        (RECORD, None, "submit", 1),  # 404: no such driver
    ],
    ids=["first-try", "id-without-driver", "pending", "running", "succeeded", "succeeded-collected",
         "succeeded-cached", "failed", "killed", "unknown", "not-found"],
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


def test_a_quota_refusal_is_worth_another_try_and_a_bad_request_is_not():
    from spark_submitter_provider.client import SubmitterRefused

    quota = SubmitterRefused(429, "QUOTA_EXCEEDED", 'pods "pi-driver" is forbidden: exceeded quota: spark-jobs')
    assert quota.retryable and "exceeded quota: spark-jobs" in str(quota)
    assert not SubmitterRefused(400, "INVALID_SPARK_SUBMIT_ARGS", "--class is required").retryable


def test_airflow_discovers_the_provider_and_its_connection_type():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    assert "airflow-provider-spark-submitter" in ProvidersManager().providers
    hook = ProvidersManagerTaskRuntime().hooks["spark_submitter"]
    assert hook.hook_class_name == "spark_submitter_provider.hooks.submitter.SparkSubmitterHook"


def test_trigger_serializes_to_what_the_triggerer_recreates_it_from():
    from spark_submitter_provider.triggers.driver import SparkDriverTrigger

    trigger = SparkDriverTrigger("ns:pi-driver", "my_conn", poll_interval=2.5, get_logs=False,
                                 log_position={"at": T0, "lines": 2}, cancel_on_kill=False)
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    again = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert kwargs["driver"] == "ns:pi-driver" and kwargs["conn_id"] == "my_conn"
    assert kwargs["log_position"] == {"at": T0, "lines": 2} and kwargs["cancel_on_kill"] is False


# --- the driver's log: positions, the cursor, lines ---------------------------------------------

T0 = "2026-03-01T10:00:00.000000001Z"
T1 = "2026-03-01T10:00:01.500000000Z"
T2 = "2026-03-01T10:00:02.000000000Z"


def lines(*pairs: tuple[str, str]) -> list:
    return [parse_line(f"{at} {text}".encode()) for at, text in pairs]


def shown(cursor: LogCursor, log: list) -> list[str]:
    cursor.restart()
    return [line.text for line in log if cursor.admit(line)]


def test_timestamps_are_read_to_the_nanosecond_in_any_zone():
    assert timestamp_ns(b"1970-01-01T00:00:01.000000002Z") == 1_000_000_002
    assert timestamp_ns(b"1970-01-01T00:00:01Z") == 1_000_000_000
    assert timestamp_ns(b"1970-01-01T01:00:01.5+01:00") == 1_500_000_000
    for bad in (b"", b"kubesim:", b"2026-13-01T00:00:00Z", b"2026-03-01 10:00:00Z"):
        assert timestamp_ns(bad) is None, bad


def test_a_line_is_split_into_its_timestamp_and_text():
    line = parse_line(b"2026-03-01T10:00:00.000000001Z INFO SparkContext: Running Spark 4.0.0")
    assert (line.at, line.text) == (T0.encode(), "INFO SparkContext: Running Spark 4.0.0")
    plain = parse_line(b"no timestamp here")
    assert (plain.at, plain.text) == (None, "no timestamp here")
    assert parse_line(b"\xff\xfe bytes").text == "\ufffd\ufffd bytes"


LOG = lines((T0, "a"), (T1, "b1"), (T1, "b2"), (T1, "b3"), (T2, "c"))


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (None, ["a", "b1", "b2", "b3", "c"]),
        (LogPosition(T0, 1), ["b1", "b2", "b3", "c"]),
        (LogPosition(T1, 1), ["b2", "b3", "c"]),  # lines stamped alike: counted, not skipped all
        (LogPosition(T1, 3), ["c"]),
        (LogPosition(T2, 1), []),
        (LogPosition("2026-03-01T10:00:01.700000000Z", 1), ["c"]),  # between two lines
    ],
    ids=["from-start", "after-first", "inside-equal-stamps", "after-equal-stamps", "at-end", "between"],
)
def test_a_resumed_read_shows_exactly_the_lines_after_the_position(position, expected):
    assert shown(LogCursor(position), LOG) == expected


def test_every_reread_of_a_growing_log_shows_each_line_once():
    cursor = LogCursor()
    assert shown(cursor, LOG[:2]) == ["a", "b1"]
    assert cursor.position == LogPosition(T1, 1)
    assert shown(cursor, LOG[:4]) == ["b2", "b3"]
    assert cursor.position == LogPosition(T1, 3)
    assert shown(cursor, LOG) == ["c"]
    assert shown(cursor, LOG) == []
    # The position survives the task state store.
    again = LogCursor(LogPosition.from_store(json.loads(json.dumps(cursor.position.to_store()))))
    assert shown(again, LOG) == []


def test_lines_without_a_timestamp_are_shown_and_do_not_move_the_position():
    cursor = LogCursor(LogPosition(T1, 1))
    assert shown(cursor, [parse_line(b"continued"), *LOG]) == ["continued", "b2", "b3", "c"]
    assert cursor.position == LogPosition(T2, 1)


def test_unreadable_positions_read_as_none():
    for bad in (None, "x", {"at": T0}, {"at": "yesterday", "lines": 1}, {"at": T0, "lines": 0}):
        assert LogPosition.from_store(bad) is None, bad


def test_since_seconds_reaches_back_past_the_position_by_the_clock_margin():
    position = LogPosition(T0, 1)
    at = timestamp_ns(T0.encode())
    assert since_seconds(None, at) is None, "nothing shown: the whole log"
    assert since_seconds(position, at + 10_500_000_000, margin_s=60) == 71
    assert since_seconds(position, at - 5_000_000_000, margin_s=60) == 60, "a clock behind the cluster's"
    assert since_seconds(position, at, margin_s=0) == 1


def test_line_splitter_joins_chunks_and_cuts_long_lines_with_a_note():
    splitter = LineSplitter(max_line=8)
    assert splitter.feed(b"one\ntw") == [b"one"]
    assert splitter.feed(b"o\n") == [b"two"]
    assert splitter.feed(b"0123456789") == []
    assert splitter.feed(b"abc\nlast") == [b"01234567 [line cut: 5 more bytes]"]
    assert splitter.flush() == [b"last"]
    assert splitter.flush() == []


def test_record_keeps_the_log_position_only_with_its_driver():
    record = Record(1, "airflow-x-g1", "ns:p", None, LogPosition(T1, 2))
    assert Record.from_store(json.loads(json.dumps(record.to_store()))) == record
    assert Record.from_store({**record.to_store(), "driver": None}).log is None
    # A record of the version before the log was followed.
    assert Record.from_store({"generation": 0, "submission_id": "x", "driver": "ns:p", "phase": None}).log is None


def test_the_backlog_between_stream_and_task_log_holds_its_bound_and_the_reader_waits():
    import asyncio

    from spark_submitter_provider.driver_wait import Backlog

    async def scenario() -> tuple[bool, list[str], bool]:
        backlog = Backlog(max_bytes=10)
        await backlog.put(parse_line(b"aaaa"), 4)
        await backlog.put(parse_line(b"bbbbbb"), 6)
        third = asyncio.create_task(backlog.put(parse_line(b"cc"), 2))
        await asyncio.sleep(0)  # let the third put run up to where it waits
        held_back = not third.done()
        first = [item.text for item in await backlog.take()]
        await asyncio.wait_for(third, 5)
        # A line larger than the bound still goes through, alone.
        await backlog.take()
        await asyncio.wait_for(backlog.put(parse_line(b"x" * 20), 20), 5)
        return held_back, first, third.done()

    held_back, first, released = asyncio.run(scenario())
    assert held_back, "a full backlog makes the reader wait"
    assert first == ["aaaa", "bbbbbb"] and released
