#!/usr/bin/env bash
# Lays the greeting library out as a Maven repository in DIR (made if missing):
#   DIR/org/example/greeting/1.0.0/greeting-1.0.0.{jar,pom}
# compiled with the machine's javac (Java 17) for Java 17, no network. Used by scripts/corpus.py
# and the real-Spark packages test (tests/tests/real_spark_packages.rs).
set -euo pipefail
dir="${1:?usage: make_repo.sh DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
artifact="$dir/org/example/greeting/1.0.0"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
mkdir -p "$artifact" "$build/classes"
javac --release 17 -d "$build/classes" "$here/src/org/example/greeting/Greeting.java"
jar --create --file "$artifact/greeting-1.0.0.jar" -C "$build/classes" .
cp "$here/pom.xml" "$artifact/greeting-1.0.0.pom"
