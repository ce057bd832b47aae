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

.PHONY: all build test test-short bench lint chaos soak services

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

## test: lint, then every test with the race detector.
test: lint services
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)

## test-short: every test without the race detector, in -short mode.
test-short: services
	$(GO) test -short -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)

## bench: benchmarks only (no tests), with allocation counts.
bench: services
	$(GO) test -run '^$$' -bench . -benchmem $(TESTFLAGS) $(PKGS)

## chaos: the fault-injection tests (names with Chaos or Fault), long variant.
chaos: services
	DELAYQ_CHAOS=long $(GO) test -race -count=1 -timeout $(CHAOS_TIMEOUT) -run 'Chaos|Fault' $(TESTFLAGS) $(PKGS)

## soak: the soak tests (names with Soak), long variant.
soak: services
	DELAYQ_SOAK=long $(GO) test -race -count=1 -timeout $(SOAK_TIMEOUT) -run Soak $(TESTFLAGS) $(PKGS)
