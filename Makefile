# Two commands: `make lab` opens the product, `make test` runs everything CI runs.
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo $$p && break; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test install bench lint typecheck clean pg pg-stop wheel wheel-test docs

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "agentnb needs Python 3.11 or newer on PATH (python3.11, python3.12, ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

lab: install
	$(BIN)/jupyter lab $(ROOT_FLAG) notebooks/01_first_loop.ipynb

test: install
	$(BIN)/ruff check agentnb tests bench docs
	$(BIN)/mypy
	@# bytecode once, up front: every process the suite starts (kernels, workers, the command) reads it even where
	@# PYTHONDONTWRITEBYTECODE keeps each from writing its own, instead of compiling agentnb again (~1 s each)
	$(BIN)/python -m compileall -q agentnb tests >/dev/null
	$(BIN)/pytest -m "not wheel" -n auto --dist loadfile
	$(MAKE) wheel-test

# the sdist and the wheel built from it, in dist/ (what a release uploads)
wheel: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# the wheel as a stranger gets it: built, installed with its extras in a fresh venv outside the checkout, used
wheel-test: install
	$(BIN)/pytest -m wheel tests/test_wheel.py tests/browser/test_wheel_browser.py

# the docs site in site/, warnings as errors (the suite builds it too, and runs its examples: tests/test_docs_examples.py)
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

bench: install
	$(BIN)/python bench/loop_overhead.py

# a throw-away PostgreSQL cluster in .pg/ for local work: `eval "$$(make -s pg)"` exports AGENTNB_PG_DSN
pg: install
	@$(BIN)/python -m tests.pgserver start .pg

pg-stop:
	@$(BIN)/python -m tests.pgserver stop .pg

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist site *.egg-info
