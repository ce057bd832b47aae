# delayq's developer entry points. `make test` is what CI runs (.ci/run).
#
# The test targets first run scripts/test-services.sh, which makes sure Redis
# and MariaDB answer (starting or installing them when they don't); see
# README.md, "Running the tests", for the DELAYQ_TEST_* variables.

GO ?= go
PKGS ?= ./...
TEST_TIMEOUT ?= 18m
CHAOS_TIMEOUT ?= 60m
SOAK_TIMEOUT ?= 4h
# Extra flags for go test, e.g. make test TESTFLAGS='-run Claim -v'.
TESTFLAGS ?=

# How long each fuzz target runs in make fuzz; make test runs each for
# FUZZTIME_CI, a count of executions: a duration can trip Go 1.26's fuzz
# coordinator at its deadline (go.dev/issue/75804), a count cannot.
FUZZTIME ?= 60s
FUZZTIME_CI ?= 2000x

.PHONY: all build test test-short bench lint chaos soak fuzz services

all: build

## build: compile every package.
build:
	$(GO) build ./...

## services: make sure the test Redis and MariaDB answer.
services:
	bash scripts/test-services.sh

## lint: gofmt must list no file, then go vet.
lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files are not formatted (run gofmt -w on them):" >&2; \
		echo "$$unformatted" >&2; \
		exit 1; \
	fi
	$(GO) vet ./...

## test: lint, every test with the race detector (a 60 s soak and a 20,000-job
## scale-out drain among them), then each fuzz target for FUZZTIME_CI executions.
test: lint services
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)
	FUZZTIME=$(FUZZTIME_CI) bash scripts/fuzz.sh

## test-short: every test without the race detector, in -short mode.
test-short: services
	$(GO) test -short -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)

## bench: benchmarks only (no tests), with allocation counts.
bench: services
	$(GO) test -run '^$$' -bench . -benchmem $(TESTFLAGS) $(PKGS)

## chaos: the fault-injection tests (names with Chaos or Fault), long variant.
chaos: services
	DELAYQ_CHAOS=long $(GO) test -race -count=1 -timeout $(CHAOS_TIMEOUT) -run 'Chaos|Fault' $(TESTFLAGS) $(PKGS)

## soak: the soak test for 10 minutes (DELAYQ_SOAK_DURATION to change it) and
## the 100,000-job scale-out drain, with their tables (-v).
soak: services
	DELAYQ_SOAK=long $(GO) test -race -count=1 -v -timeout $(SOAK_TIMEOUT) -run 'Soak|Scale' $(TESTFLAGS) ./internal/recoverer/

## fuzz: every fuzz target for FUZZTIME each (seed corpora in testdata/fuzz).
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh
