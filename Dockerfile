# syntax=docker/dockerfile:1
#
# svc-sidecar: a static binary on a distroless base, running as non-root.
#
#   docker build -t svc-sidecar .
#   docker run --rm -e SVC_TENANT_ID=acme -e SVC_JWKS_URL=https://idp.example/jwks.json \
#     -e SVC_FAIL_MODE=closed svc-sidecar
#
# The gRPC listener defaults to 127.0.0.1:50051 here, the address the
# shipped Envoy configurations (deploy/envoy/) dial inside a shared network
# namespace: container runtimes often have no IPv6 loopback for the
# binary's own default, [::1]:50051. The local HTTP API stays on
# 127.0.0.1:7700. Configuration comes from SVC_* variables or from
# /etc/svc/svc.toml (the working directory).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0
RUN CGO_ENABLED=0 go build -trimpath -tags vtprotobuf \
      -ldflags "-s -w -X github.com/svc-dev/svc/engine/version.Version=${VERSION}" \
      -o /out/svc-sidecar ./cmd/svc-sidecar

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/svc-sidecar /usr/local/bin/svc-sidecar
WORKDIR /etc/svc
ENV SVC_SIDECAR_ADDR=127.0.0.1:50051
EXPOSE 50051 7700
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/svc-sidecar"]
