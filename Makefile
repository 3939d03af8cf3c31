# Two commands: `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := bubblewrap git chromium fonts-dejavu-core
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-all lint bench clean

$(STAMP): pyproject.toml
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = "0" ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/arcforge run

test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10

test-all: setup
	$(BIN)/python -m pytest -q -m "" -p no:cacheprovider

lint: setup
	$(BIN)/ruff check arcforge tests benchmarks
	$(BIN)/ruff format --check arcforge tests benchmarks

clean:
	rm -rf $(VENV) runs
