#!/usr/bin/env bash
# Builds the submitter and operator OCI images on this machine without a container daemon:
# release binaries from cargo, the root filesystem from images/rootfs.sh (Debian's libc6,
# libgcc-s1, ca-certificates and base-files, nothing else), the image with umoci.
#
#   scripts/build-images.sh [--no-build] [--bin-dir DIR] [--out DIR] [--debs DIR]
#
# --no-build  use the release binaries already in the target folder (CI builds them first)
# --bin-dir DIR  take the binaries from DIR instead of the target folder's release/ (the test
#             command's one build; an image to push is built from release binaries)
# --out DIR   where the images go (default: target/images); each image is an OCI layout,
#             DIR/spark-submitter and DIR/spark-operator, tagged with the crate version, plus an
#             OCI archive of it (DIR/spark-submitter-VERSION.oci.tar)
# --debs DIR  where the Debian packages are downloaded (default: DIR/debs); reused when present
#
# Push with any OCI tool, e.g.
#   skopeo copy oci:target/images/spark-submitter:0.1.0 docker://registry.example/spark-submitter:0.1.0
# The Dockerfiles in images/ build the same root filesystem where a daemon is available.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
out=""
debs=""
bin_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --bin-dir) bin_dir=$2; shift ;;
    --out) out=$2; shift ;;
    --debs) debs=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

target="${CARGO_TARGET_DIR:-$PWD/target}"
out="${out:-$target/images}"
debs="${debs:-$out/debs}"
bin_dir="${bin_dir:-$target/release}"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

for tool in umoci dpkg-deb readelf apt-get; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed (scripts/install-deps.sh installs umoci)" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then
  # Layer entries take their owners from the files; only root can make them root-owned.
  echo "run as root: the image's files must be owned by root" >&2
  exit 2
fi

if [ "$build" -eq 1 ]; then
  cargo build --release --locked -p submitter -p operator
fi

mkdir -p "$debs"
# gcc-N-base carries libgcc-s1's copyright; N follows the release.
gcc_base=$(apt-cache depends libgcc-s1 2>/dev/null | grep -o 'gcc-[0-9]*-base' | head -n 1)
packages=(libc6 libgcc-s1 ca-certificates base-files "${gcc_base:-gcc-12-base}")
missing=()
for pkg in "${packages[@]}"; do
  compgen -G "$debs/${pkg}_*.deb" >/dev/null || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  # apt-get download writes to the current folder; as root it warns that _apt cannot, harmlessly.
  (cd "$debs" && apt-get download "${missing[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  for pkg in "${missing[@]}"; do
    compgen -G "$debs/${pkg}_*.deb" >/dev/null || { echo "could not download $pkg" >&2; exit 1; }
  done
fi

# The commit time makes the layers reproducible: same commit, same binaries, same digests.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)

# image name, binary, description
images=(
  "spark-submitter submitter Spark submissions without a JVM per application"
  "spark-operator operator SparkApplication operator and recovery agent"
)
for entry in "${images[@]}"; do
  read -r image binary description <<<"$entry"
  bin="$bin_dir/$binary"
  [ -x "$bin" ] || { echo "$bin is missing: build it, or drop --no-build" >&2; exit 1; }
  layout="$out/$image"
  rootfs="$out/$image.rootfs"
  rm -rf "$layout" "$rootfs" "$out/$image-$version.oci.tar"
  sh images/rootfs.sh "$bin" "$binary" "$debs" "$rootfs"

  umoci init --layout "$layout"
  umoci new --image "$layout:$version"
  umoci insert --image "$layout:$version" --history.created "$created" \
    --history.created_by "images/rootfs.sh $binary" "$rootfs" /
  umoci config --image "$layout:$version" --created "$created" --history.created "$created" \
    --os linux --architecture amd64 \
    --config.user 65532:65532 --config.workingdir / \
    --config.entrypoint "/usr/local/bin/$binary" \
    --config.env PATH=/usr/local/bin \
    --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --config.label "org.opencontainers.image.title=$image" \
    --config.label "org.opencontainers.image.description=$description" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.created=$created"
  umoci gc --layout "$layout"
  unpacked=$(du -sb "$rootfs" | cut -f1)
  rm -rf "$rootfs"
  (cd "$layout" && tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -cf "../$image-$version.oci.tar" .)
  echo "built $layout:$version ($(du -sb "$layout/blobs" | cut -f1) bytes of blobs, compressed; $unpacked bytes unpacked)"
done
