#!/bin/sh
# Assembles the root filesystem of one of our images: the binary, the shared libraries it needs
# (taken from Debian's libc6 and libgcc-s1 packages), the CA bundle (from ca-certificates),
# os-release (from base-files), /etc/passwd and /etc/group with a non-root user, nsswitch.conf,
# an empty /tmp, and each package's copyright and status entry (as distroless images carry them,
# so scanners see which Debian packages are inside). No shell, no package manager, nothing else.
#
# Used by images/*.Dockerfile (inside a Debian stage) and by scripts/build-images.sh (on this
# machine, no Docker daemon), so both give the same tree.
#
#   images/rootfs.sh BINARY NAME DEBDIR OUTDIR
#
# BINARY  the release binary (stripped here when `strip` exists)
# NAME    its name in the image: /usr/local/bin/NAME
# DEBDIR  a folder holding the .deb files of libc6, libgcc-s1, ca-certificates, base-files and
#         gcc-N-base (libgcc-s1's copyright lives there):
#         `apt-get download libc6 libgcc-s1 ca-certificates base-files gcc-12-base`
# OUTDIR  created; must not exist
#
# Needs: dpkg-deb, readelf (binutils). SOURCE_DATE_EPOCH, when set, becomes every file's mtime so
# that the same inputs give the same layer.
set -eu

if [ "$#" -ne 4 ]; then
  echo "usage: $0 BINARY NAME DEBDIR OUTDIR" >&2
  exit 2
fi
binary=$1
name=$2
debdir=$3
out=$4

# The run-time user, as distroless names it: no login, no shell, no home worth writing.
uid=65532
packages="libc6 libgcc-s1 ca-certificates base-files"
# libgcc-s1's documentation folder is a link into gcc-N-base, whose N follows the release.
base=$(find "$debdir" -maxdepth 1 -name 'gcc-*-base_*.deb' | sort | tail -n 1)
if [ -z "$base" ]; then
  echo "no gcc-N-base_*.deb in $debdir (libgcc-s1's copyright is in it)" >&2
  exit 2
fi
packages="$packages $(basename "$base" | cut -d_ -f1)"

if [ -e "$out" ]; then
  echo "$out exists; refusing to write into it" >&2
  exit 2
fi
for tool in dpkg-deb readelf; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Unpack each package into its own folder (never into the output: we copy only what is needed).
for pkg in $packages; do
  deb=$(find "$debdir" -maxdepth 1 -name "${pkg}_*.deb" | sort | tail -n 1)
  if [ -z "$deb" ]; then
    echo "no ${pkg}_*.deb in $debdir" >&2
    exit 2
  fi
  mkdir -p "$work/$pkg"
  dpkg-deb -x "$deb" "$work/$pkg"
  dpkg-deb -f "$deb" > "$work/$pkg.control"
done

mkdir -p "$out/usr/local/bin" "$out/etc/ssl/certs" "$out/lib64" "$out/lib/x86_64-linux-gnu" \
  "$out/usr/lib" "$out/var/lib/dpkg/status.d" "$out/home/nonroot" "$out/tmp"

cp "$binary" "$out/usr/local/bin/$name"
if command -v strip >/dev/null 2>&1; then
  # Symbols only serve debuggers and backtraces; panics still print their message.
  strip --strip-unneeded "$out/usr/local/bin/$name"
fi
chmod 0755 "$out/usr/local/bin/$name"

# Where a library lives in the unpacked packages (bookworm ships them under /lib/<triplet>).
find_lib() {
  for pkg in libc6 libgcc-s1; do
    for dir in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu; do
      if [ -e "$work/$pkg/$dir/$1" ]; then
        echo "$pkg/$dir/$1"
        return 0
      fi
    done
  done
  return 1
}

# The libraries the binary needs, and what they need in turn (DT_NEEDED, transitively).
needed() {
  readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}
todo=$(needed "$out/usr/local/bin/$name")
done_libs=""
while [ -n "$todo" ]; do
  next=""
  for lib in $todo; do
    case " $done_libs " in *" $lib "*) continue ;; esac
    done_libs="$done_libs $lib"
    src=$(find_lib "$lib") || { echo "$name needs $lib, which no package here provides" >&2; exit 1; }
    cp -L "$work/$src" "$out/lib/x86_64-linux-gnu/$lib"
    next="$next $(needed "$work/$src")"
  done
  todo=$next
done

# The program interpreter the binary names (PT_INTERP), at the path it names.
interp=$(readelf -l "$out/usr/local/bin/$name" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
case "$interp" in
  /lib64/ld-linux-x86-64.so.2)
    cp -L "$work/libc6/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$out/lib/x86_64-linux-gnu/"
    ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$out/lib64/ld-linux-x86-64.so.2"
    ;;
  "") ;; # static binary: no interpreter
  *)
    echo "unexpected program interpreter $interp" >&2
    exit 1
    ;;
esac

# CA bundle: what update-ca-certificates would write from the Mozilla set, without running it.
cat "$work/ca-certificates/usr/share/ca-certificates/mozilla/"*.crt > "$out/etc/ssl/certs/ca-certificates.crt"

cp "$work/base-files/usr/lib/os-release" "$out/usr/lib/os-release"
ln -s ../usr/lib/os-release "$out/etc/os-release"

cat > "$out/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:$uid:$uid:nonroot:/home/nonroot:/sbin/nologin
EOF
cat > "$out/etc/group" <<EOF
root:x:0:
nonroot:x:$uid:
EOF
# glibc reads this for getaddrinfo: /etc/hosts (the kubelet's) before DNS.
cat > "$out/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
networks: files
protocols: files
services: files
EOF

# The copyright of a package whose doc folder is a link (libgcc-s1 -> gcc-N-base).
copyright() {
  for dir in $packages; do
    if [ -f "$work/$dir/usr/share/doc/$1/copyright" ]; then
      echo "$work/$dir/usr/share/doc/$1/copyright"
      return 0
    fi
  done
  link=$(readlink "$work/$pkg/usr/share/doc/$1" 2>/dev/null) && copyright "$(basename "$link")"
}

for pkg in $packages; do
  mkdir -p "$out/usr/share/doc/$pkg"
  src=$(copyright "$pkg") || { echo "no copyright for $pkg" >&2; exit 1; }
  cp "$src" "$out/usr/share/doc/$pkg/copyright"
  # Only the fields a scanner reads; the rest (Depends, Breaks, Description) says nothing here.
  grep -E '^(Package|Source|Version|Architecture):' "$work/$pkg.control" > "$out/var/lib/dpkg/status.d/$pkg"
done

chmod 0755 "$out" "$out/etc" "$out/usr" "$out/usr/local" "$out/usr/local/bin"
chmod 1777 "$out/tmp"
chown -R "$uid:$uid" "$out/home/nonroot" 2>/dev/null || true
chmod 0700 "$out/home/nonroot"

if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  find "$out" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
fi
