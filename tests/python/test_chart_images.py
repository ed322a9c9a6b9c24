"""The images, as a cluster would run them: scripts/build-images.sh builds both OCI images from the
release binaries without a container daemon; each root filesystem is unpacked with umoci and its
entrypoint run in a chroot of that root alone, as the image's user, with an empty environment:
`--version`, and a host name resolved through the root's own /etc/hosts (the file the kubelet
mounts into a container), told apart from a name it does not list.

Needs root (chroot, and root-owned files in the layers), as CI runs.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from simutil import bin_dir

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
VERSION = re.search(r'^version = "([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M).group(1)
USER = "65532:65532"
HOSTS_NAME = "image-check.hosts.test"
UNLISTED_NAME = "unlisted.hosts.test"

# image -> binary
IMAGES = {"spark-submitter": "submitter", "spark-operator": "operator"}

# Everything a root filesystem may hold besides /usr/local/bin/<binary>: libc and the loader,
# libgcc_s (unwinding), the CA bundle, os-release, users, nsswitch, /tmp, and the packages'
# copyright and status entries.
EXPECTED = {
    "etc", "etc/group", "etc/nsswitch.conf", "etc/os-release", "etc/passwd", "etc/ssl", "etc/ssl/certs",
    "etc/ssl/certs/ca-certificates.crt", "home", "home/nonroot", "lib", "lib/x86_64-linux-gnu",
    "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6",
    "lib/x86_64-linux-gnu/libgcc_s.so.1", "lib/x86_64-linux-gnu/libm.so.6", "lib64",
    "lib64/ld-linux-x86-64.so.2", "tmp", "usr", "usr/lib", "usr/lib/os-release", "usr/local", "usr/local/bin",
    "usr/share", "usr/share/doc", "var", "var/lib", "var/lib/dpkg", "var/lib/dpkg/status.d",
} | {f"usr/share/doc/{p}{s}" for p in ("base-files", "ca-certificates", "gcc-12-base", "libc6", "libgcc-s1")
     for s in ("", "/copyright")} | {
    f"var/lib/dpkg/status.d/{p}" for p in ("base-files", "ca-certificates", "gcc-12-base", "libc6", "libgcc-s1")}


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    assert os.geteuid() == 0, "image tests need root (chroot, root-owned layer files); CI runs as root"
    for binary in IMAGES.values():
        assert (bin_dir() / binary).is_file(), f"build it first: cargo build --release -p {binary}, or set BIN_DIR"
    out = tmp_path_factory.mktemp("images")
    # The Debian packages are cached beside the target folder, so reruns do not download again.
    build = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-images.sh"), "--no-build", "--bin-dir", str(bin_dir()), "--out", str(out),
         "--debs", str(TARGET / "image-debs")],
        capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def blob(layout: Path, digest: str) -> bytes:
    algorithm, hexdigest = digest.split(":")
    return (layout / "blobs" / algorithm / hexdigest).read_bytes()


def manifest_and_config(layout: Path) -> tuple[dict, dict]:
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == VERSION
    manifest = json.loads(blob(layout, entry["digest"]))
    return manifest, json.loads(blob(layout, manifest["config"]["digest"]))


@pytest.fixture(scope="module")
def rootfs(images, tmp_path_factory):
    """image -> unpacked root filesystem (umoci raw unpack)."""
    roots = {}
    for image in IMAGES:
        root = tmp_path_factory.mktemp(image) / "rootfs"
        unpack = subprocess.run(["umoci", "raw", "unpack", "--image", f"{images / image}:{VERSION}", str(root)],
                                capture_output=True, text=True, timeout=120)
        assert unpack.returncode == 0, unpack.stderr
        roots[image] = root
    return roots


def in_chroot(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30,
              until: re.Pattern | None = None) -> str:
    """Runs the image's entrypoint in a chroot of `root` as its user; returns its output. With
    `until`, stops it once a line matches (the operator keeps running after its first error)."""
    binary = next(iter((root / "usr" / "local" / "bin").iterdir())).name
    proc = subprocess.Popen(
        ["/usr/sbin/chroot", f"--userspec={USER}", str(root), f"/usr/local/bin/{binary}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env or {})
    lines = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if until is not None and until.search(line):
                break
        else:
            pytest.fail(f"{binary} {' '.join(args)}: no answer in {timeout}s: {''.join(lines)}")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return "".join(lines)


@pytest.mark.parametrize("image", IMAGES)
def test_image_runs_its_binary_as_a_non_root_user(images, image):
    manifest, config = manifest_and_config(images / image)
    assert len(manifest["layers"]) == 1
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    assert config["config"]["User"] == USER
    assert config["config"]["Entrypoint"] == [f"/usr/local/bin/{IMAGES[image]}"]
    assert config["config"]["Labels"]["org.opencontainers.image.version"] == VERSION
    # The archive form beside the layout, for `skopeo copy oci-archive:...`.
    assert (images / f"{image}-{VERSION}.oci.tar").stat().st_size > manifest["layers"][0]["size"]


@pytest.mark.parametrize("image", IMAGES)
def test_root_filesystem_holds_only_the_binary_libc_and_ca_certificates(rootfs, image):
    root = rootfs[image]
    binary = f"usr/local/bin/{IMAGES[image]}"
    found = {str(p.relative_to(root)) for p in root.rglob("*")}
    assert found == EXPECTED | {binary}
    for shell in ("sh", "bash", "dash", "busybox"):
        assert not list(root.rglob(shell)), shell
    executables = {str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file() and not p.is_symlink() and os.access(p, os.X_OK)}
    assert executables <= {binary, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6"}
    passwd = (root / "etc/passwd").read_text()
    assert "nonroot:x:65532:65532:" in passwd and "/bin/sh" not in passwd
    for path in found:
        st = (root / path).lstat()
        owner = (st.st_uid, st.st_gid)
        assert owner == ((65532, 65532) if path == "home/nonroot" else (0, 0)), path
        assert not st.st_mode & 0o002 or path == "tmp" or (root / path).is_symlink(), f"{path} is world-writable"
    # Beyond the binary: libc, libm, libgcc_s, the loader and the CA bundle, a few MB.
    others = sum((root / p).lstat().st_size for p in found if p != binary)
    assert others < 5 * 1024 * 1024, others


@pytest.mark.parametrize("image", IMAGES)
def test_entrypoint_prints_its_version_in_a_chroot_of_the_image(rootfs, image):
    out = in_chroot(rootfs[image], "--version")
    assert out.strip() == f"{IMAGES[image]} {VERSION}"


def hosts_file(root: Path, listed: bool) -> None:
    # What the kubelet mounts at /etc/hosts; the image itself ships none.
    entry = f"127.0.0.1\t{HOSTS_NAME}\n" if listed else ""
    (root / "etc" / "hosts").write_text(f"127.0.0.1\tlocalhost\n{entry}")


REFUSED = re.compile(r"[Cc]onnection refused")
NO_NAME = re.compile(r"dns error|failed to lookup address")


def resolve(root: Path, image: str, name: str) -> str:
    """Makes the entrypoint connect to `name` port 1 on loopback; returns what it printed."""
    if image == "spark-submitter":
        # The client retries transport errors a few times before it prints the last one.
        return in_chroot(root, "status", "--url", f"http://{name}:1", "ns:pod", timeout=45)
    kubeconfig = root / "tmp" / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://{name}:1', insecure-skip-tls-verify: true}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
    kubeconfig.chmod(0o644)
    # Applying the CRD is its first request; whatever comes after, the first error names the cause.
    out = in_chroot(root, "run", "--kubeconfig", "/tmp/kubeconfig", "--submitter-url", "http://127.0.0.1:1",
                    "--probe-listen", "127.0.0.1:0", env={"OPERATOR_INSTALL_CRD": "true"},
                    until=re.compile(f"{REFUSED.pattern}|{NO_NAME.pattern}"))
    kubeconfig.unlink()
    return out


@pytest.mark.parametrize("image", IMAGES)
def test_entrypoint_resolves_names_through_the_images_etc_hosts(rootfs, image):
    root = rootfs[image]
    try:
        hosts_file(root, listed=True)
        listed = resolve(root, image, HOSTS_NAME)
        assert REFUSED.search(listed) and not NO_NAME.search(listed), listed
        # The control: a name /etc/hosts does not list fails to resolve (no DNS server in the
        # chroot's world), so the check above is the hosts file's doing.
        hosts_file(root, listed=False)
        unlisted = resolve(root, image, UNLISTED_NAME)
        assert NO_NAME.search(unlisted) and not REFUSED.search(unlisted), unlisted
    finally:
        (root / "etc" / "hosts").unlink(missing_ok=True)


def test_same_binaries_give_the_same_image_digests(images, tmp_path):
    # The layers take the commit time as every file's mtime, and the config the same time as
    # its creation: a rebuild is byte-for-byte the image already pushed.
    again = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-images.sh"), "--no-build", "--bin-dir", str(bin_dir()), "--out", str(tmp_path),
         "--debs", str(TARGET / "image-debs")],
        capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    for image in IMAGES:
        first = json.loads((images / image / "index.json").read_text())["manifests"][0]["digest"]
        second = json.loads((tmp_path / image / "index.json").read_text())["manifests"][0]["digest"]
        assert first == second, image
