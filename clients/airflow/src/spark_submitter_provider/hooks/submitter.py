"""The `spark_submitter` connection type and its hook.

A connection names the submitter (host, port) and the TLS material, in `extra`:

    {"ca_cert": "/etc/spark-submitter/ca.crt",          # path or inline PEM
     "client_cert": "/etc/spark-submitter/tls.crt",     # path or inline PEM
     "client_key": "/etc/spark-submitter/tls.key",      # path or inline PEM
     "timeout": 30,                                     # seconds per HTTP request (optional)
     "attempts": 4}                                     # per call, for 500/503/unreachable (optional)

`schema` is the URL scheme: `https` (the default) or `http` for a development submitter started
with `--insecure-dev`. The port defaults to 8443, the submitter's own default.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from spark_submitter_provider.client import (
    DEFAULT_ATTEMPTS,
    DriverStatus,
    SubmitResult,
    SubmitterClient,
    SubmitterConfig,
    SubmitterConfigError,
)

DEFAULT_PORT = 8443


def config_from_connection(conn: Any) -> SubmitterConfig:
    """A SubmitterConfig from an Airflow Connection (the worker's or the triggerer's)."""
    if not conn.host:
        raise SubmitterConfigError(f"connection {conn.conn_id!r} has no host")
    extra = conn.extra_dejson or {}
    scheme = (conn.schema or extra.get("scheme") or "https").lower()
    if scheme not in ("https", "http"):
        raise SubmitterConfigError(f"connection {conn.conn_id!r}: schema must be https or http, got {scheme!r}")
    host = conn.host
    if "://" in host:
        # A host written as a URL: its scheme wins, its port only when the connection has none.
        scheme, _, host = host.partition("://")
        host = host.rstrip("/")
    if ":" in host and not host.startswith("[") and host.count(":") == 1:
        host, _, url_port = host.partition(":")
        port = conn.port or int(url_port)
    else:
        port = conn.port or DEFAULT_PORT
    try:
        return SubmitterConfig(
            url=f"{scheme}://{host}:{port}",
            ca_cert=extra.get("ca_cert") or None,
            client_cert=extra.get("client_cert") or None,
            client_key=extra.get("client_key") or None,
            timeout=float(extra.get("timeout", 30.0)),
            attempts=int(extra.get("attempts", DEFAULT_ATTEMPTS)),
        )
    except (TypeError, ValueError) as e:
        raise SubmitterConfigError(f"connection {conn.conn_id!r}: {e}") from e


class SparkSubmitterHook(BaseHook):
    """Talks to a `submitter serve` over mTLS: submit, and look drivers up by `namespace:pod`."""

    conn_name_attr = "conn_id"
    default_conn_name = "spark_submitter_default"
    conn_type = "spark_submitter"
    hook_name = "Spark Submitter"

    def __init__(self, conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self._client: SubmitterClient | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["login", "password"],
            "relabeling": {"schema": "Scheme (https, or http for --insecure-dev)"},
            "placeholders": {
                "host": "spark-submitter.spark-system.svc",
                "port": str(DEFAULT_PORT),
                "schema": "https",
                "extra": '{"ca_cert": "/path/ca.crt", "client_cert": "/path/tls.crt", '
                         '"client_key": "/path/tls.key"}',
            },
        }

    def get_config(self) -> SubmitterConfig:
        return config_from_connection(self.get_connection(self.conn_id))

    def get_conn(self) -> SubmitterClient:
        if self._client is None:
            self._client = SubmitterClient(self.get_config())
        return self._client

    def submit(self, submission_id: str, args: list[str], driver_pod_template: dict | None = None,
               executor_pod_template: dict | None = None) -> SubmitResult:
        return self.get_conn().submit(submission_id, args, driver_pod_template, executor_pod_template)

    def driver_status(self, driver: str) -> DriverStatus | None:
        return self.get_conn().driver_status(driver)

    def submission_status(self, submission_id: str) -> DriverStatus | None:
        return self.get_conn().submission_status(submission_id)

    def test_connection(self) -> tuple[bool, str]:
        """The UI's "Test" button: a status look-up of a driver that does not exist.

        A 404 proves the whole path: TLS both ways, an identity the policy allows (403 otherwise).
        """
        try:
            self.get_conn().driver_status("default:airflow-connection-test")
        except Exception as e:  # the button shows any failure as text
            if getattr(e, "status", None) == 403:
                return True, f"TLS works; the policy does not allow namespace 'default' for this client: {e}"
            return False, str(e)
        return True, "the submitter answered"
