# syntax=docker/dockerfile:1
# The submitter image (spark-submitter): the release binary on a root filesystem of Debian's libc6, libgcc-s1,
# ca-certificates and base-files, assembled by images/rootfs.sh; no shell, user 65532.
# scripts/build-images.sh builds the same image without a Docker daemon.
#
#   docker build -f images/submitter.Dockerfile -t spark-submitter:0.1.0 .
ARG RUST_IMAGE=rust:1.95-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=spark-rs-target \
    cargo build --release --locked -p submitter && cp target/release/submitter /submitter

# Same Debian release as the build stage, so the libc the binary was linked against is the one
# it runs on.
FROM ${DEBIAN_IMAGE} AS rootfs
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && mkdir /debs && cd /debs \
 && apt-get download libc6 libgcc-s1 ca-certificates base-files \
      $(apt-cache depends libgcc-s1 | grep -o 'gcc-[0-9]*-base' | head -n 1)
COPY images/rootfs.sh /rootfs.sh
COPY --from=build /submitter /submitter
ARG SOURCE_DATE_EPOCH
RUN sh /rootfs.sh /submitter submitter /debs /out

FROM scratch
COPY --from=rootfs /out/ /
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /
LABEL org.opencontainers.image.title="spark-submitter" \
      org.opencontainers.image.description="Spark submissions without a JVM per application"
ENTRYPOINT ["/usr/local/bin/submitter"]
