"""Rendering and validating the Helm chart in charts/spark-submitter with the real Helm engine.

Helm's own Go library does the work: `helm-python-sdk` (Helm v4's engine, linted and rendered
offline, as `helm lint --strict` and `helm template` do) and `helm-sdkpy` (the library the install
tests drive against kubesim). Manifests are checked against the Kubernetes OpenAPI schemas by
`kubernetes-validate` in strict mode (unknown fields are errors); the third-party kinds the chart
may render (cert-manager, Prometheus Operator) against the fields their CRDs define that the chart
uses.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import yaml

from simutil import bin_dir

# libyaml's loader when present: the CRD alone is ~700 KB of YAML.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "spark-submitter"
RELEASE = "spark"
NAMESPACE = "spark-system"

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schema known.
KUBE_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())

# Values that exercise each certificate mode (and the kubeflow client) beside the defaults.
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "selfSigned+kubeflow": {"kubeflowClient": {"enabled": True, "namespace": "kubeflow"}},
    "certManager": {
        "tls": {"mode": "certManager"},
        "kubeflowClient": {"enabled": True},
        "submitter": {"serviceMonitor": {"enabled": True}},
        "operator": {"serviceMonitor": {"enabled": True}},
    },
    "certManager+clusterIssuer": {
        "tls": {"mode": "certManager", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
        "kubeflowClient": {"enabled": True, "namespace": "kubeflow"},
    },
    "existingSecrets": {
        "tls": {
            "mode": "existingSecrets",
            "existingSecrets": {
                "server": "submitter-tls",
                "clientCA": {"name": "clients-ca", "key": "bundle.pem"},
                "operatorClient": "operator-tls",
            },
        },
    },
    "clusterWide+redis+HA": {
        "jobNamespaces": [],
        "operator": {
            "replicas": 2,
            "installCRD": True,
            "recovery": {"store": "redis", "redis": {"existingSecret": {"name": "redis", "key": "url"}}},
        },
        "submitter": {"replicas": 3, "podAntiAffinity": "hard"},
    },
}


def submitter_bin() -> str:
    """The submitter binary scripts/test.sh built (SUBMITTER_BIN), else this build's."""
    path = Path(os.environ.get("SUBMITTER_BIN", bin_dir() / "submitter"))
    assert path.is_file(), f"{path} is missing: cargo build --release -p submitter"
    return str(path)


@functools.cache
def chart() -> helm_python.Chart:
    return helm_python.Chart.load(str(CHART))


def render(values: dict[str, Any] | None = None, *, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object `helm template` would print (hooks included, NOTES.txt not)."""
    rendered = chart().render(values or {}, name=RELEASE, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.load_all(text, Loader=LOADER):
            if doc:
                doc.setdefault("metadata", {}).setdefault("annotations", {})
                objects.append(doc)
    return objects


def notes(values: dict[str, Any] | None = None) -> str:
    rendered = chart().render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))


def crds() -> list[dict[str, Any]]:
    return [yaml.load(entry["data"], Loader=LOADER) for entry in chart().crds]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def _strip_empty_annotations(obj: dict[str, Any]) -> dict[str, Any]:
    # render() adds an empty annotations map for convenient lookups; it is not the chart's.
    meta = dict(obj["metadata"])
    if not meta.get("annotations"):
        meta.pop("annotations", None)
    return {**obj, "metadata": meta}


# The fields of the third-party kinds that the chart renders, as their CRDs define them
# (cert-manager.io/v1, monitoring.coreos.com/v1). Unknown fields are errors, as in strict mode.
def _o(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": False, "required": required or []}


_STR = {"type": "string"}
_META = {"type": "object"}
_ISSUER_REF = _o({"name": _STR, "kind": {"enum": ["Issuer", "ClusterIssuer"]}, "group": _STR}, ["name"])
_DURATION = {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
THIRD_PARTY: dict[tuple[str, str], dict[str, Any]] = {
    ("cert-manager.io/v1", "Issuer"): _o({
        "apiVersion": _STR, "kind": _STR, "metadata": _META,
        "spec": {"type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
                 "properties": {"selfSigned": _o({}), "ca": _o({"secretName": _STR}, ["secretName"])}},
    }, ["spec"]),
    ("cert-manager.io/v1", "Certificate"): _o({
        "apiVersion": _STR, "kind": _STR, "metadata": _META,
        "spec": _o({
            "secretName": _STR, "commonName": {"type": "string", "maxLength": 64},
            "dnsNames": {"type": "array", "items": _STR}, "isCA": {"type": "boolean"},
            "duration": _DURATION, "renewBefore": _DURATION,
            "usages": {"type": "array", "items": {"enum": [
                "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
                "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
                "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
                "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"]}},
            "privateKey": _o({"algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]}, "size": {"type": "integer"},
                              "encoding": {"enum": ["PKCS1", "PKCS8"]}, "rotationPolicy": {"enum": ["Never", "Always"]}}),
            "issuerRef": _ISSUER_REF,
        }, ["secretName", "issuerRef"]),
    }, ["spec"]),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _o({
        "apiVersion": _STR, "kind": _STR, "metadata": _META,
        "spec": _o({
            "selector": {"type": "object"},
            "namespaceSelector": _o({"matchNames": {"type": "array", "items": _STR}, "any": {"type": "boolean"}}),
            "endpoints": {"type": "array", "items": _o({
                "port": _STR, "path": _STR, "scheme": {"enum": ["http", "https"]}, "interval": _DURATION,
                "tlsConfig": _o({"serverName": _STR, "insecureSkipVerify": {"type": "boolean"},
                                 "ca": _o({"secret": _o({"name": _STR, "key": _STR}, ["name", "key"])})}),
            })},
        }, ["selector", "endpoints"]),
    }, ["spec"]),
}


def validate(obj: dict[str, Any]) -> None:
    """Raises if `obj` does not validate (strict) against its kind's schema."""
    obj = _strip_empty_annotations(obj)
    key = (obj["apiVersion"], obj["kind"])
    if key in THIRD_PARTY:
        jsonschema.validate(obj, THIRD_PARTY[key])
        # Their metadata is an ObjectMeta like any other: check it through a ConfigMap's.
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]}
    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)
