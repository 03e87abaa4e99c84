#!/usr/bin/env bash
# Validates the deployment offline: installs the pinned kustomize if needed,
# then runs the Go test that renders every overlay, decodes every object
# strictly and cross-checks them, and checks the Dockerfile.
# Usage: deploy/validate/run.sh [go test flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/.bin"
if [ ! -x "$bin/kustomize" ] || [ "$root/tools/kustomize/go.mod" -nt "$bin/kustomize" ]; then
	(cd "$root/tools/kustomize" && GOWORK=off GOBIN="$bin" go install tool)
fi
cd "$root/deploy/validate"
KUSTOMIZE="$bin/kustomize" GOWORK=off exec go test -count=1 "$@" ./...
