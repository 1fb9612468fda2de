# Shipyard: the two commands of the README are `make run` and `make test`.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
# VERSION is the one version of every binary and image (scripts/version.sh: from git).
VERSION ?= $(shell scripts/version.sh)
LDVERSION := -X github.com/shipyard-dev/shipyard/internal/version.Version=$(VERSION)
BIN := bin
# Test timeout: the whole suite must end well inside CI's 90 minutes on 2 cores.
TEST_TIMEOUT ?= 45m
# K8S_TEST_PKGS: the packages `make test` and `make test-k8s` run with the build tag k8s
# against the test cluster (scripts/k8s/test.sh starts it and stops it after).
K8S_TEST_PKGS ?= ./internal/bay/k8s/... ./deploy/kubernetes ./e2e/k8se2e
BENCH_OUT ?= bench-results

.PHONY: test-k8s k8s-build k8s-up k8s-up-tier1 k8s-down all build run test chaos bench bench-quick lint host-deps gvisor image image-base image-gull image-bay images clean leftovers

all: build

## build: static bin/ship and bin/gull (CGO_ENABLED=0), bin/bay and bin/shipyard.
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDVERSION)' -o $(BIN)/ship ./cmd/ship
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDVERSION)' -o $(BIN)/gull ./cmd/gull
	$(GO) build -trimpath -ldflags '$(LDVERSION)' -o $(BIN)/bay ./cmd/bay
	$(GO) build -trimpath -ldflags '$(LDVERSION)' -o $(BIN)/shipyard ./cmd/shipyard

## host-deps: the Debian packages the image build and the tests need (idempotent).
host-deps:
	@scripts/install-deps.sh

## gvisor: gVisor's runsc and its containerd shim (the test node's handler runsc), built from
## source through the Go module proxy once (cached in /var/cache/shipyard/gvisor); runsc is
## registered with the Docker engine as the runtime runsc
## (scripts/gvisor.sh: idempotent; the engine reloads its configuration with SIGHUP, only when
## the script changed it). The tests under runsc fail without it; they never skip.
gvisor:
	@scripts/gvisor.sh

## image / image-base / image-gull: build the sandbox image flavours when missing
## (content-tagged: an unchanged recipe and runtime binary are never rebuilt). image-gull is
## the browser runtime (gull:latest, with bin/gull).
image: build host-deps
	$(BIN)/bay image build --flavour full
image-base: build host-deps
	$(BIN)/bay image build --flavour base
image-gull: build host-deps
	$(BIN)/bay image build --flavour gull
images: image-base image image-gull

## image-bay: bay's own image (bay:latest) for deploy/kubernetes and deploy/compose: a static
## bin/bay-static on a minimal Debian root filesystem, built and content-tagged like the
## sandbox images.
image-bay: host-deps
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDVERSION)' -o $(BIN)/bay-static ./cmd/bay
	$(BIN)/bay-static image build --flavour bay

## run: build the binaries and install what serving needs (side by side), then start bay on
## :8114 with SQLite and the local Docker engine; the repository's skills/ seed the skill
## library (kept in data/skills). Missing sandbox images are built by bay in the background once it serves
## (images.build_missing): ship:base first (python sandboxes start on it until ship:latest is
## ready), then ship:latest and gull:latest. `make image` builds them ahead instead.
run:
	@mkdir -p $(BIN)
	@scripts/install-deps.sh run >$(BIN)/.install-deps.log 2>&1 & deps=$$!; \
	  $(MAKE) --no-print-directory build || exit 1; \
	  wait $$deps || { cat $(BIN)/.install-deps.log; exit 1; }
	BAY_IMAGES__BUILD_MISSING=true BAY_SKILLS__SEED_DIR=$(CURDIR)/skills BAY_SKILLS__DIR=$(CURDIR)/data/skills $(BIN)/bay serve

## test: lint, unit tests, tests against the real Docker engine, a real kernel, a real
## SQLite file and PostgreSQL, and the end-to-end scenarios; then the Kubernetes tests
## (K8S_TEST_PKGS) against a real single-node cluster started for them and stopped after; then
## check that nothing was left behind. Every part runs even when an earlier one failed; the
## status is the first failure's. Profiles with runtime runsc are tested under gVisor (gvisor).
test: lint images gvisor
	@status=0; \
	  $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./... || status=$$?; \
	  GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) scripts/k8s/test.sh $(K8S_TEST_PKGS) || { s=$$?; [ $$status = 0 ] && status=$$s; }; \
	  scripts/check-leftovers.sh || { s=$$?; [ $$status = 0 ] && status=$$s; }; \
	  exit $$status

## test-k8s: the Kubernetes tests alone (K8S_TEST_PKGS) against the test cluster (scripts/k8s;
## the first run builds the kube binaries from source, about 800 CPU-seconds, then cached),
## started and stopped by scripts/k8s/test.sh; then the leftover check.
test-k8s: images host-deps
	@GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) scripts/k8s/test.sh $(K8S_TEST_PKGS)
	@scripts/check-leftovers.sh

## chaos: the long reliability suite (chaos/): hostile input, cross-tenant calls, abuse from
## inside a sandbox, killed and frozen processes, 60 s of load against a real bay; `make test`
## runs its bounded version. The figures go to $(CHAOS_REPORT).
CHAOS_REPORT ?= $(BENCH_OUT)/chaos.md
chaos: image-base
	@mkdir -p $(dir $(CHAOS_REPORT))
	SHIPYARD_CHAOS=long CHAOS_REPORT=$(abspath $(CHAOS_REPORT)) $(GO) test -count=1 -v -timeout 30m -run TestChaos ./chaos
	@scripts/check-leftovers.sh

## bench: the benchmark program against the raw baselines (see README, "Figures").
bench: images gvisor
	$(GO) run ./bench/all -out $(BENCH_OUT)
bench-quick: images gvisor
	$(GO) run ./bench/all -quick -out $(BENCH_OUT)

## lint: gofmt and go vet.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## k8s-build / k8s-up / k8s-down: the test machine's single-node Kubernetes (scripts/k8s):
## kube binaries built from source once (cached in /var/cache/shipyard/k8s), etcd + control
## plane (k8s-up-tier1) and the node (containerd, CNI bridge, kubelet) with the sandbox images
## copied from the Docker engine. The kubeconfig is /var/lib/shipyard-k8s/admin.kubeconfig.
k8s-build:
	@scripts/k8s/build.sh >/dev/null
k8s-up: host-deps
	@scripts/k8s/install-deps.sh
	@scripts/k8s/up.sh 2
k8s-up-tier1: host-deps
	@scripts/k8s/install-deps.sh
	@scripts/k8s/up.sh 1
k8s-down:
	@scripts/k8s/down.sh

leftovers:
	@scripts/check-leftovers.sh

clean:
	rm -rf $(BIN) $(BENCH_OUT)
