# syntax=docker/dockerfile:1
# The adk image: one static binary on an empty base, running as a non-root
# user. `make image` builds it with the version, commit and tag stamped.
#
# GO_IMAGE is the build stage's toolchain image; override it to build from a
# local mirror (any image with Go 1.26, /bin/sh and a CA bundle).
ARG GO_IMAGE=golang:1.26-bookworm

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
# TARGETOS/TARGETARCH come from the builder (docker buildx --platform);
# empty means the build machine's own.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
ARG TAG=
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces two dependencies with patched copies in third_party/.
COPY third_party/ third_party/
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.tag=$TAG" \
      -o /out/usr/local/bin/adk ./cmd/adk
# The final image has no shell: its directories are made here. /data is
# the default data directory (owned by the non-root user, so a fresh named
# volume mounted there is writable); /tmp for os.TempDir.
RUN mkdir -p /out/data /out/tmp /out/etc/ssl/certs \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
 && chown 65532:65532 /out/data && chmod 1777 /out/tmp

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
ENV HOME=/data
WORKDIR /data
# NATS client (adk serve), Raft, developer HTTP API, ops (/healthz,
# /readyz, /metrics), OTLP/HTTP.
EXPOSE 4222 7100 8080 9090 4318
# Every long-running role takes --metrics-addr; the image expects it on
# 127.0.0.1:9090 inside the container (override the check with
# --health-cmd or HEALTHCHECK NONE for other uses). There is no curl here:
# `adk probe` is the check.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/adk", "probe", "--quiet", "--timeout", "2s", "http://127.0.0.1:9090/healthz"]
ENTRYPOINT ["/usr/local/bin/adk"]
CMD ["--help"]
