#!/usr/bin/env python3
"""Writes kubesim's Kubernetes protobuf schema (kubesim/src/protobuf/schema.txt).

kubesim keeps objects as JSON and converts to and from Kubernetes protobuf at the edge, field by
field. What it needs per field is what the Go API types say in their struct tags: the protobuf
field number and wire type, the JSON name (or `inline`), `omitempty`, and whether the Go field is
a pointer (a present zero value is then meaningful). So the schema is read from the Go sources of
k8s.io/api, k8s.io/apimachinery and k8s.io/apiextensions-apiserver, and cross-checked against
their generated.proto (every field must be there with the same number and name).

Usage: gen-kube-protobuf-schema.py API_DIR APIMACHINERY_DIR APIEXTENSIONS_DIR > schema.txt
(each a checkout of the repository; the header records the commits when given as
NAME=SHA in the KUBE_SOURCES environment variable).

Output, one message per block:
    message core.v1.Pod
    1 metadata meta.v1.ObjectMeta o
    2 spec core.v1.PodSpec o
A field line is: number, JSON name (`-` for an inlined struct), type, flags (`p` pointer,
`o` omitempty/omitzero, `i` inline, `-` none). Types: a scalar (string bytes bool int32 int64
uint32 uint64 double float), a message name, `[]T` (repeated), `map[K]V`, or `~[]T` (a named
slice that protobuf wraps in a message with `repeated T items = 1`, while JSON is the array).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# Go packages read, keyed by the short name the schema uses.
GROUPS = ["core", "apps", "rbac", "policy", "coordination", "events", "networking", "discovery",
          "authentication", "authorization", "autoscaling"]


def packages(api: Path, machinery: Path, apiext: Path) -> dict[str, Path]:
    out = {f"{g}.v1": api / g / "v1" for g in GROUPS}
    out["meta.v1"] = machinery / "pkg/apis/meta/v1"
    out["runtime"] = machinery / "pkg/runtime"
    out["intstr"] = machinery / "pkg/util/intstr"
    out["resource"] = machinery / "pkg/api/resource"
    out["types"] = machinery / "pkg/types"
    out["apiextensions.v1"] = apiext / "pkg/apis/apiextensions/v1"
    return out


def import_key(path: str) -> str | None:
    if path.startswith("k8s.io/api/"):
        g, v = path.removeprefix("k8s.io/api/").split("/")[:2]
        return f"{g}.{v}"
    return {
        "k8s.io/apimachinery/pkg/apis/meta/v1": "meta.v1",
        "k8s.io/apimachinery/pkg/runtime": "runtime",
        "k8s.io/apimachinery/pkg/util/intstr": "intstr",
        "k8s.io/apimachinery/pkg/api/resource": "resource",
        "k8s.io/apimachinery/pkg/types": "types",
        "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1": "apiextensions.v1",
    }.get(path)


# Types with their own protobuf layout and JSON form, converted by hand in kubesim.
SPECIAL = {"meta.v1.Time", "meta.v1.MicroTime", "meta.v1.Duration", "intstr.IntOrString",
           "resource.Quantity", "runtime.RawExtension", "meta.v1.FieldsV1", "apiextensions.v1.JSON",
           "apiextensions.v1.JSONSchemaPropsOrArray", "apiextensions.v1.JSONSchemaPropsOrBool",
           "apiextensions.v1.JSONSchemaPropsOrStringArray", "runtime.Unknown"}
SCALARS = {"string": "string", "bool": "bool", "int32": "int32", "int64": "int64", "int": "int64",
           "uint32": "uint32", "uint64": "uint64", "float64": "double", "float32": "float",
           "byte": "uint32"}

FIELD = re.compile(r"^\s+(?:(\w+)\s+)?([\w.*\[\]]+)\s+`([^`]*)`\s*(//.*)?$")
TAG = re.compile(r'(\w+):"([^"]*)"')


class Package:
    def __init__(self, key: str, root: Path):
        self.key = key
        self.structs: dict[str, list[tuple[str | None, str, dict[str, str]]]] = {}
        self.aliases: dict[str, str] = {}
        self.imports: dict[str, str] = {}  # per-file, merged: aliases agree across a package
        for f in sorted(root.glob("*.go")):
            if f.name.endswith("_test.go") or f.name.startswith("zz_generated") or f.name == "generated.pb.go":
                continue
            self.read(f.read_text())

    def read(self, text: str) -> None:
        for m in re.finditer(r'^\s*(\w+)?\s*"([^"]+)"\s*$', import_block(text), re.M):
            alias, path = m.group(1), m.group(2)
            key = import_key(path)
            if key:
                self.imports[alias or path.rsplit("/", 1)[-1]] = key
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"^type (\w+) struct\s*\{\s*\}\s*(//.*)?$", line)
            if m:
                self.structs[m.group(1)] = []
                i += 1
                continue
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if m:
                fields = []
                i += 1
                while i < len(lines) and lines[i] != "}":
                    fm = FIELD.match(lines[i])
                    if fm and "protobuf:" in fm.group(3):
                        tags = dict(TAG.findall(fm.group(3)))
                        fields.append((fm.group(1), fm.group(2), tags))
                    i += 1
                self.structs[m.group(1)] = fields
            else:
                m = re.match(r"^type (\w+) ([\w.*\[\]]+)\s*(//.*)?$", line)
                if m:
                    self.aliases[m.group(1)] = m.group(2)
            i += 1


def import_block(text: str) -> str:
    m = re.search(r"^import \((.*?)^\)", text, re.M | re.S)
    if m:
        return m.group(1)
    return "\n".join(re.findall(r'^import (\w+ )?"[^"]+"', text, re.M))


class Resolver:
    def __init__(self, pkgs: dict[str, Package]):
        self.pkgs = pkgs

    def qualify(self, pkg: Package, name: str) -> tuple[Package, str]:
        if "." in name:
            alias, local = name.split(".", 1)
            key = pkg.imports.get(alias)
            if key is None or key not in self.pkgs:
                raise KeyError(f"{pkg.key}: unknown package of {name}")
            return self.pkgs[key], local
        return pkg, name

    def kind(self, pkg: Package, go: str) -> tuple[str, bool]:
        """(schema type, pointer) of a Go type."""
        pointer = go.startswith("*")
        go = go.lstrip("*")
        return self.type_of(pkg, go), pointer

    def type_of(self, pkg: Package, go: str) -> str:
        if go == "[]byte":
            return "bytes"
        if go.startswith("[]"):
            return "[]" + self.type_of(pkg, go[2:])
        if go.startswith("map["):
            k, v = go[4:].split("]", 1)
            return f"map[{self.type_of(pkg, k)}]{self.type_of(pkg, v)}"
        if go in SCALARS:
            return SCALARS[go]
        owner, local = self.qualify(pkg, go)
        full = f"{owner.key}.{local}"
        if full in SPECIAL:
            return full
        if local in owner.structs:
            return full
        if local in owner.aliases:
            under = owner.aliases[local]
            resolved = self.type_of(owner, under)
            if under.startswith("[]") and under != "[]byte" and has_proto_message(owner, local):
                return "~" + resolved
            return resolved
        raise KeyError(f"{pkg.key}: cannot resolve {go}")


PROTO_CACHE: dict[str, str] = {}


def proto_text(pkg: Package) -> str:
    if pkg.key not in PROTO_CACHE:
        root = ROOTS[pkg.key]
        p = root / "generated.proto"
        PROTO_CACHE[pkg.key] = p.read_text() if p.exists() else ""
    return PROTO_CACHE[pkg.key]


def has_proto_message(pkg: Package, name: str) -> bool:
    return re.search(rf"^message {name} \{{", proto_text(pkg), re.M) is not None


def proto_fields(pkg: Package, name: str) -> dict[int, str] | None:
    m = re.search(rf"^message {name} \{{(.*?)^\}}", proto_text(pkg), re.M | re.S)
    if not m:
        return None
    out = {}
    for fm in re.finditer(r"^\s*(?:optional|repeated)?\s*[\w.<>, ]+?\s+(\w+) = (\d+);", m.group(1), re.M):
        out[int(fm.group(2))] = fm.group(1)
    return out


ROOTS: dict[str, Path] = {}


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    api, machinery, apiext = (Path(a) for a in sys.argv[1:])
    ROOTS.update(packages(api, machinery, apiext))
    pkgs = {k: Package(k, p) for k, p in ROOTS.items()}
    res = Resolver(pkgs)
    out = ["# Kubernetes protobuf schema for kubesim: generated by scripts/gen-kube-protobuf-schema.py",
           f"# from {os.environ.get('KUBE_SOURCES', 'kubernetes/api, apimachinery, apiextensions-apiserver')}.",
           "# Do not edit by hand; regenerate instead."]
    problems = []
    for key in sorted(pkgs):
        pkg = pkgs[key]
        for name in sorted(pkg.structs):
            full = f"{key}.{name}"
            fields = pkg.structs[name]
            if full in SPECIAL:
                continue
            proto = proto_fields(pkg, name)
            if proto is None:
                continue
            out.append(f"message {full}")
            for field_name, go_type, tags in fields:
                pb = tags["protobuf"].split(",")
                num = int(pb[1])
                # Embedded structs may leave the name out of the tag; the proto has it.
                pb_name = next((p[5:] for p in pb if p.startswith("name=")), proto.get(num, ""))
                if proto.get(num) != pb_name:
                    problems.append(f"{full}.{pb_name}: proto has {proto.get(num)} at {num}")
                js = tags.get("json", "").split(",")
                embedded = field_name is None
                inline = embedded and (js[0] == "" or "inline" in js[1:])
                json_name = "-" if inline else (js[0] or field_name or go_type)
                if json_name == "-" and not inline:
                    continue
                try:
                    kind, pointer = res.kind(pkg, go_type)
                except KeyError as e:
                    problems.append(str(e))
                    continue
                flags = ("p" if pointer else "") + ("o" if {"omitempty", "omitzero"} & set(js[1:]) else "") + ("i" if inline else "")
                out.append(f"{num} {json_name} {kind} {flags or '-'}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
