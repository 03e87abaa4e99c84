#!/usr/bin/env bash
# Builds the local OpenTelemetry Collector (builder-config.yaml) into
# .bin/otelcol-switchboard with the pinned collector builder. Only Go and the
# Go module proxy are needed. It takes a few minutes the first time.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/.bin/otelcol-switchboard"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$root/deploy/local-tracing/builder-config.yaml" "$work/"
cd "$work"
GOWORK=off GOBIN="$work" go install go.opentelemetry.io/collector/cmd/builder@v0.165.0
GOWORK=off CGO_ENABLED=0 ./builder --config builder-config.yaml
mkdir -p "$root/.bin"
mv otelcol-switchboard/otelcol-switchboard "$out"
echo "built $out"
