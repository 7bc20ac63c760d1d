# Attention, by hand and by library: build, test and refresh the book.
# Everything runs from the project's own virtualenv (.venv); the system python is only
# used once, to create it.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.stamp
NOTEBOOKS := $(wildcard chapters/*.ipynb)
EXEC_TIMEOUT := 600
# Parallel workers for pytest-xdist (the CI machine has 2 cores).
JOBS ?= 2

# Determinism. MPLBACKEND=Agg is set for the unit tests only: exported globally it
# would stop Jupyter kernels from using the inline backend, and figures would vanish
# from notebooks and the book. OMP_NUM_THREADS is deliberately left alone.
export PYTHONHASHSEED := 0
export KERAS_BACKEND := torch
# Prefer the venv's Jupyter data (its python3 kernel) over any per-user kernel spec.
export JUPYTER_PREFER_ENV_PATH := 1

JB_BUILD := $(BIN)/jupyter-book build . -W -n --keep-going

.PHONY: help env book test unittest nbval lint sitetest chromium execute clean distclean

help:
	@echo "make book       build the HTML book into _build/html (executes changed notebooks)"
	@echo "make test       unit tests, nbval on chapters/*.ipynb, ruff, full book build (-W -n),"
	@echo "                then the site test (every page in headless Chromium, offline)"
	@echo "make sitetest   only the site test, on the book already in _build/html"
	@echo "make execute    re-execute every chapters/*.ipynb in place from a fresh kernel"
	@echo "make lint       ruff check + ruff format --check"
	@echo "make clean      remove _build and caches (keeps .venv)"
	@echo "make distclean  clean, and remove .venv"

# ---- environment --------------------------------------------------------------------
env: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install -e . --no-deps
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (.venv)"
	touch $@

# ---- book ---------------------------------------------------------------------------
# The site shows the outputs stored in the notebooks (execute_notebooks: off), and those
# are the outputs nbval has just checked: `make book` first re-executes every chapter
# changed since its last check (nbval, below), then builds. With nothing changed, a
# second `make book` only re-writes nothing and takes seconds.
# A failed build forgets Sphinx's saved environment, so the next (incremental) build
# re-reads every page and reports the same warnings again instead of passing.
book: $(STAMP) nbval
	$(JB_BUILD) || { rm -f _build/.doctrees/environment.pickle; exit 1; }
	@echo "Book: $(CURDIR)/_build/html/index.html"

# ---- tests --------------------------------------------------------------------------
# The book is built with --all (a fresh Sphinx environment) so that warnings of pages
# unchanged since the last build are reported again. The site test needs the built
# book, so it runs last. Independent work runs on every core (pytest-xdist).
test: $(STAMP)
	$(MAKE) --no-print-directory lint unittest nbval
	$(JB_BUILD) --all || { rm -f _build/.doctrees/environment.pickle; exit 1; }
	@echo "Book: $(CURDIR)/_build/html/index.html"
	$(MAKE) --no-print-directory sitetest

# Unit, property and oracle tests, and every docstring example of attnlib.
unittest: $(STAMP)
	MPLBACKEND=Agg $(BIN)/pytest tests/ lib/attnlib --doctest-modules \
	    --ignore=tests/test_site.py -n $(JOBS)

# The website as readers see it: tests/test_site.py serves _build/html on 127.0.0.1 and
# opens every page in headless Chromium with the network off (math, figures, launch
# menu, no console errors); screenshots land in _build/screenshots/. Without Chromium
# the test skips, saying why; with CI set it fails instead.
sitetest: $(STAMP) chromium
	$(BIN)/pytest tests/test_site.py -n $(JOBS)

# Debian's chromium, installed when missing and we can (root, apt-get). Playwright drives
# it; no browser is ever downloaded at run time.
chromium:
	@if command -v chromium >/dev/null 2>&1; then \
	    :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium: installing Debian's package for the site test"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	        apt-get install -y -qq chromium >/dev/null; } \
	        || echo "chromium: apt-get install failed"; \
	else \
	    echo "chromium: not installed, and installing it needs root and apt-get"; \
	fi

# nbval re-executes each chapter in a fresh kernel "python3" (the venv's kernel spec, as
# `make execute` does) and compares every output with the stored one. A chapter is
# checked again only when it, attnlib, the data or the environment changed since its
# last check (stamp: _build/nbval/<chapter>.ok). Chapters run $(JOBS) at a time, the
# slowest first; --output-sync keeps each chapter's report in one piece.
# pytest exits 5 when it collects nothing (a notebook without code cells): not a failure.
NBVAL_DIR := _build/nbval
SLOW_FIRST := $(filter %/08_efficient_attention.ipynb %/09_positions.ipynb \
    %/10_training_attention.ipynb %/11_inference.ipynb,$(NOTEBOOKS))
NBVAL_ORDER := $(SLOW_FIRST) $(filter-out $(SLOW_FIRST),$(NOTEBOOKS))
NBVAL_OKS := $(patsubst chapters/%.ipynb,$(NBVAL_DIR)/%.ok,$(NBVAL_ORDER))
NBVAL_DEPS := $(wildcard lib/attnlib/*.py) $(wildcard data/*) tests/nbval_sanitize.cfg $(STAMP)

nbval: $(STAMP)
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(NBVAL_OKS)
	@echo "nbval: every chapter's stored outputs match a fresh run"

$(NBVAL_DIR)/%.ok: chapters/%.ipynb $(NBVAL_DEPS)
	$(BIN)/pytest --nbval $< --nbval-sanitize-with tests/nbval_sanitize.cfg \
	    -p no:randomly -p no:xdist -q || [ $$? -eq 5 ]
	@mkdir -p $(@D) && touch $@

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# ---- refresh stored notebook outputs ------------------------------------------------
execute: $(STAMP)
ifneq ($(NOTEBOOKS),)
	for nb in $(NOTEBOOKS); do \
	    echo "executing $$nb"; \
	    $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	        --ExecutePreprocessor.kernel_name=python3 \
	        --ExecutePreprocessor.timeout=$(EXEC_TIMEOUT) \
	        --ExecutePreprocessor.record_timing=False \
	        "$$nb"; \
	done
else
	@echo "execute: no chapters/*.ipynb yet"
endif

# ---- cleaning -----------------------------------------------------------------------
clean:
	rm -rf _build .pytest_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o \
	    \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 \
	    | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
