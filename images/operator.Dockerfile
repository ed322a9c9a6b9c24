# syntax=docker/dockerfile:1
# The operator image (spark-operator): the release binary on a root filesystem of Debian's libc6, libgcc-s1,
# ca-certificates and base-files, assembled by images/rootfs.sh; no shell, user 65532.
# scripts/build-images.sh builds the same image without a Docker daemon.
#
#   docker build -f images/operator.Dockerfile -t spark-operator:0.1.0 .
ARG RUST_IMAGE=rust:1.95-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=spark-rs-target \
    cargo build --release --locked -p operator && cp target/release/operator /operator

# Same Debian release as the build stage, so the libc the binary was linked against is the one
# it runs on.
FROM ${DEBIAN_IMAGE} AS rootfs
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && mkdir /debs && cd /debs \
 && apt-get download libc6 libgcc-s1 ca-certificates base-files \
      $(apt-cache depends libgcc-s1 | grep -o 'gcc-[0-9]*-base' | head -n 1)
COPY images/rootfs.sh /rootfs.sh
COPY --from=build /operator /operator
ARG SOURCE_DATE_EPOCH
RUN sh /rootfs.sh /operator operator /debs /out

FROM scratch
COPY --from=rootfs /out/ /
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /
LABEL org.opencontainers.image.title="spark-operator" \
      org.opencontainers.image.description="SparkApplication operator and recovery agent (operator agent)"
ENTRYPOINT ["/usr/local/bin/operator"]
