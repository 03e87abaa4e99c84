#!/usr/bin/env bash
# Builds the helm pinned in this directory's go.mod into the directory $1,
# with the link-time settings of helm's own release build: its version,
# and the Kubernetes version it assumes when no cluster is asked (helm
# template, and the deprecated-API rules of helm lint), that of the
# client-go it is built with. Without them helm assumes Kubernetes 1.20.
set -euo pipefail
gobin="$1"
cd "$(dirname "$0")"
helm_version=$(sed -n 's/^\thelm\.sh\/helm\/v3 \(v[0-9.]*\).*/\1/p' go.mod)
# client-go v0.N.x is Kubernetes 1.N.
k8s_minor=$(sed -n 's/^\tk8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' go.mod)
if [ -z "$helm_version" ] || [ -z "$k8s_minor" ]; then
	echo "tools/helm/go.mod: no helm.sh/helm/v3 or k8s.io/client-go version found" >&2
	exit 1
fi
ldflags="-X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
GOWORK=off GOBIN="$gobin" go install -ldflags "$ldflags" tool
