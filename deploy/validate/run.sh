#!/usr/bin/env bash
# Validates the deployment offline: installs the pinned kustomize
# (tools/kustomize) and helm (tools/helm) unless KUSTOMIZE and HELM name
# them, then runs the Go test that renders every overlay and the Helm chart
# with each of its values files, decodes every object strictly,
# cross-checks them, compares the chart's renders with the overlays', and
# checks the Dockerfile, the operations guide and the monitoring (alerting
# rules, PrometheusRule, Grafana dashboard).
# Usage: deploy/validate/run.sh [go test flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ -z "${KUSTOMIZE:-}" ]; then
	KUSTOMIZE="$root/.bin/kustomize"
	if [ ! -x "$KUSTOMIZE" ] || [ "$root/tools/kustomize/go.mod" -nt "$KUSTOMIZE" ]; then
		(cd "$root/tools/kustomize" && GOWORK=off GOBIN="$root/.bin" go install tool)
	fi
fi
if [ -z "${HELM:-}" ]; then
	HELM="$root/.bin/helm"
	if [ ! -x "$HELM" ] || [ "$root/tools/helm/go.mod" -nt "$HELM" ] || [ "$root/tools/helm/install.sh" -nt "$HELM" ]; then
		"$root/tools/helm/install.sh" "$root/.bin"
	fi
fi
export KUSTOMIZE HELM
cd "$root/deploy/validate"
# This module imports services/config through a replace, so a dependency
# that services adds would make its committed go.sum incomplete. Test with a
# tidied copy of go.mod/go.sum instead of failing on, or rewriting, the
# committed ones.
modcopy="$(mktemp -d)"
trap 'rm -rf "$modcopy"' EXIT
cp go.mod go.sum "$modcopy/"
export GOWORK=off GOFLAGS="-modfile=$modcopy/go.mod"
go mod tidy
go test -count=1 "$@" ./...
# The local trace viewer has its own (dependency-free) module.
cd "$root/deploy/local-tracing/tracetree"
GOFLAGS= go test -count=1 ./...
