# syntax=docker/dockerfile:1
#
# Switchboard container images: one build stage compiles every binary, one
# final stage per service copies its binary onto a distroless base.
#
#   docker build --target gateway    -t ghcr.io/switchboard-mcp/switchboard-gateway:$VERSION .
#   docker build --target aggregator -t ghcr.io/switchboard-mcp/switchboard-aggregator:$VERSION .
#   docker build --target indexer    -t ghcr.io/switchboard-mcp/switchboard-indexer:$VERSION .
#   docker build --target demo-backend -t ghcr.io/switchboard-mcp/switchboard-demo-backend:$VERSION .
#
# Pass --build-arg VERSION=... REVISION=$(git rev-parse HEAD) CREATED=$(date -u +%FT%TZ)
# so the binaries and the labels say what they are (deploy/README.md).

# The Go toolchain the project is verified with. Release builds should pass
# the newest patch release (--build-arg GO_VERSION=...): standard library
# security fixes arrive in patch releases.
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
# Filled from --platform by BuildKit, which it does only for arguments
# declared without a default (a default would win, and an arm64 image
# would get amd64 binaries).
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Module files first, so dependency downloads are cached until they change.
COPY go.work go.work.sum* ./
COPY services/go.mod services/go.sum services/
COPY gateway/go.mod gateway/go.sum gateway/
COPY aggregator/go.mod aggregator/go.sum aggregator/
COPY indexer/go.mod indexer/go.sum indexer/
COPY test/go.mod test/go.sum test/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binaries (no cgo), no local paths in them, the version stamped in.
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/switchboard-mcp/switchboard/services/lifecycle.Version=${VERSION}" \
      -o /out/ \
      ./gateway/cmd/switchboard-gateway \
      ./aggregator/cmd/switchboard-aggregator \
      ./indexer/cmd/switchboard-indexer \
      ./services/cmd/switchboard-demo-backend

# distroless/static: CA certificates, tzdata and /etc/passwd, nothing else;
# no shell, no package manager. UID 65532 is its "nonroot" user.
FROM gcr.io/distroless/static-debian12:nonroot AS runtime
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.vendor="Switchboard" \
      org.opencontainers.image.source="https://github.com/switchboard-mcp/switchboard" \
      org.opencontainers.image.url="https://github.com/switchboard-mcp/switchboard" \
      org.opencontainers.image.documentation="https://github.com/switchboard-mcp/switchboard/blob/main/docs/operations.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
USER 65532:65532

FROM runtime AS aggregator
LABEL org.opencontainers.image.title="switchboard-aggregator" \
      org.opencontainers.image.description="Switchboard aggregator: backend MCP sessions, catalog, authorization and routing over gRPC"
COPY --from=build /out/switchboard-aggregator /usr/local/bin/switchboard-aggregator
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/switchboard-aggregator"]

FROM runtime AS indexer
LABEL org.opencontainers.image.title="switchboard-indexer" \
      org.opencontainers.image.description="Switchboard indexer: per-principal tool search over PostgreSQL full-text search, over gRPC"
COPY --from=build /out/switchboard-indexer /usr/local/bin/switchboard-indexer
EXPOSE 50052 9090
ENTRYPOINT ["/usr/local/bin/switchboard-indexer"]

FROM runtime AS demo-backend
LABEL org.opencontainers.image.title="switchboard-demo-backend" \
      org.opencontainers.image.description="Switchboard demo MCP server with configurable tools, for trying a deployment"
COPY --from=build /out/switchboard-demo-backend /usr/local/bin/switchboard-demo-backend
EXPOSE 9101
ENTRYPOINT ["/usr/local/bin/switchboard-demo-backend"]

# Last, so that a plain "docker build ." builds the gateway.
FROM runtime AS gateway
LABEL org.opencontainers.image.title="switchboard-gateway" \
      org.opencontainers.image.description="Switchboard gateway: the MCP endpoint (Streamable HTTP) in front of the aggregator and indexer"
COPY --from=build /out/switchboard-gateway /usr/local/bin/switchboard-gateway
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/switchboard-gateway"]
