# The usual commands. `make test` is the README's test command, which CI
# runs (.ci/run, with gofmt and go vet before it).

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(shell go env GOPATH)/bin/golangci-lint

.PHONY: test lint bench build run

test:
	go test -race -timeout 30m -bench . -benchtime 1x ./...

# golangci-lint as installed in $(go env GOPATH)/bin, else the pinned
# version run from the Go module proxy.
lint:
	@if [ -x "$(GOLANGCI_LINT)" ]; then \
		"$(GOLANGCI_LINT)" run ./...; \
	else \
		go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...; \
	fi

bench:
	go test -run X -bench . ./...

build:
	go build -o vera .

run:
	go run .
