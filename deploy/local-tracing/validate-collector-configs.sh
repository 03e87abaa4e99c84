#!/usr/bin/env bash
# Validates every OpenTelemetry Collector configuration of the repository
# with the collector's own code (otelcol validate), using the local build of
# builder-config.yaml, which has every component those files use. Builds the
# collector first if needed (minutes, once).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
otelcol="$root/.bin/otelcol-switchboard"
if [ ! -x "$otelcol" ] || [ "$root/deploy/local-tracing/builder-config.yaml" -nt "$otelcol" ]; then
	"$root/deploy/local-tracing/build-collector.sh"
fi
cd "$root"
for f in deploy/local-tracing/collector.yaml deploy/k8s/base/otel-collector-config.yaml deploy/k8s/overlays/*/otel-collector-config.yaml; do
	"$otelcol" validate --config "$f"
	echo "valid: $f"
done
