# Attention, by hand and by library: build, test and refresh the book.
# Everything runs from the project's own virtualenv (.venv), which `make env` (run first by
# every target) creates or refreshes (see "environment" below).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

.PHONY: help env book test unittest nbval nbval-portable nbval-threads gpu-check lint sitetest chromium \
    execute clean distclean odyssey-lm gemma3-results recall lr-stability pointer-heads induction-model texts \
    lock colab-cells dates exercises exercises-strict exercises-solutions

help:  ## this list
	@awk -F':.*## ' '/^[a-z-]+:.*## /{printf "make %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# ---- settings -----------------------------------------------------------------------
# PYTHON makes .venv. PY_FLOOR is the highest Requires-Python of the pinned packages
# (soupsieve 4.1.2: 3.11.5); keep it equal to requires-python in pyproject.toml.
PYTHON    ?= python3
PY_FLOOR  := 3.11.5
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.stamp
GOAL      := $(or $(MAKECMDGOALS),book)
comma     := ,
# On Linux torch comes from PyTorch's CPU wheel index (PyPI's Linux wheel pulls several GB
# of CUDA libraries); empty it (`make TORCH_INDEX= book`) to use the default index.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(TORCH_CPU_INDEX)
NET_TIMEOUT ?= 5
# .venv is made by uv (about 5x faster than pip), or by pip with `make INSTALLER=pip ...`.
INSTALLER ?= uv
JOBS ?= 2
NOTEBOOKS := $(wildcard chapters/*.ipynb)
JB_BUILD := $(BIN)/jupyter-book build . -W -n --keep-going
# Determinism (MPLBACKEND=Agg only for the unit tests: globally it would hide figures).
export PYTHONHASHSEED := 0
export KERAS_BACKEND := torch
# Prefer the venv's Jupyter data (its python3 kernel) over any per-user kernel spec.
export JUPYTER_PREFER_ENV_PATH := 1

# ---- book ---------------------------------------------------------------------------
# The site shows the notebooks' stored outputs (`make test` checks them). A failed build
# forgets Sphinx's saved environment, so that the next build reports its warnings again.
book: env  ## build the HTML book into _build/html from the stored (tested) outputs
	$(JB_BUILD) || { rm -f _build/.doctrees/environment.pickle; exit 1; }
	@echo "Book: $(CURDIR)/_build/html/index.html"

# ---- tests --------------------------------------------------------------------------
# --all: the warnings of unchanged pages are reported again.
test: env  ## ruff, unit tests, nbval (outputs compared as numbers), book -W -n, site test
	$(MAKE) --no-print-directory lint unittest exercises-solutions nbval nbval-threads
	$(JB_BUILD) --all || { rm -f _build/.doctrees/environment.pickle; exit 1; }
	@echo "Book: $(CURDIR)/_build/html/index.html"
	$(MAKE) --no-print-directory sitetest

SITE_TESTS := $(wildcard tests/test_site*.py)

unittest: env  ## only the unit, property and oracle tests, and the docstring examples
	MPLBACKEND=Agg $(BIN)/pytest tests/ lib/attnlib --doctest-modules \
	    $(addprefix --ignore=,$(SITE_TESTS)) -n $(JOBS)

# The exercises (lib/exercises, chapters/exercises.md); lib/exercises/test_checks.py checks
# that the checks catch wrong solutions.
# An unsolved stub fails its check: that is where a reader starts, not an error, so
# `make exercises` lists them and exits 0 (pytest's 1, "some failed"); `exercises-strict`
# exits 1 while one is not right. Any other failure of pytest (2-5) is passed on.
exercises: env  ## check your lib/exercises/stubs.py: one line per exercise not right yet
	@rc=0; $(BIN)/pytest lib/exercises/test_exercises.py -q --tb=line -rN -n 0 || rc=$$?; \
	if [ $$rc -eq 1 ]; then echo "exercises: the lines above are the exercises not right yet" \
	    "(each stub fails until you solve it); \`make exercises-strict\` exits 1 on them"; \
	elif [ $$rc -ne 0 ]; then exit $$rc; else echo "exercises: every exercise is right"; fi

exercises-strict: env  ## as exercises, but exit 1 while one is not right
	$(BIN)/pytest lib/exercises/test_exercises.py -q --tb=line -rN -n 0

exercises-solutions: env  ## the exercises' checks on the book's solutions
	$(BIN)/pytest lib/exercises --solutions -q -n 0

lint: env  ## ruff check, ruff format --check, lint-imports (no import cycle)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# tests/test_site.py: _build/html in headless Chromium, network off (skips without it, or
# fails where CI is set).
sitetest: env chromium  ## only the site test, on the book already in _build/html
	$(BIN)/pytest $(SITE_TESTS) -n $(JOBS)

chromium:  # Debian's chromium, installed when missing and we can (root, apt-get)
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium: installing Debian's package for the site test"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	        apt-get install -y -qq chromium >/dev/null; } || echo "chromium: apt-get failed"; \
	else echo "chromium: not installed, and installing it needs root and apt-get"; fi

# nbval runs each chapter in a fresh kernel and compares its outputs as numbers (within one
# unit of the last printed digit: scripts/nbval_numbers.py), again only when the chapter,
# attnlib, the data or .venv changed; $(JOBS) at a time, the slowest first.
NBVAL_DIR ?= _build/nbval
NBVAL_ENV ?=
SLOW_FIRST := $(wildcard chapters/induction_heads.ipynb chapters/08_efficient_attention.ipynb \
    chapters/language_model.ipynb chapters/09_positions.ipynb chapters/10_training_attention.ipynb \
    chapters/encoder.ipynb chapters/11_inference.ipynb)
NBVAL_OKS := $(patsubst chapters/%.ipynb,$(NBVAL_DIR)/%.ok,\
    $(filter $(NOTEBOOKS),$(SLOW_FIRST)) $(filter-out $(SLOW_FIRST),$(NOTEBOOKS)))
NBVAL_DEPS := $(wildcard lib/attnlib/*.py) $(wildcard data/*) $(wildcard data/odyssey_lm/*) \
    $(wildcard data/recall/*) scripts/train_recall.py \
    tests/nbval_sanitize.cfg scripts/nbval_numbers.py \
    scripts/train_odyssey.py scripts/_atomic.py

nbval: env  ## only nbval (chapters changed since their last check)
	@$(MAKE) --no-print-directory -j$(JOBS) --keep-going --output-sync=target $(NBVAL_OKS)
	@echo "nbval: done $(NBVAL_ENV)"

$(NBVAL_DIR)/%.ok: chapters/%.ipynb $(NBVAL_DEPS) $(STAMP)
	@echo "nbval $< $(NBVAL_ENV)"
	env $(NBVAL_ENV) $(BIN)/python scripts/nbval_numbers.py $<
	@mkdir -p $(@D) && touch $@

# The chapters that train a model live (tests/test_output_rule.py keeps this list complete), checked
# once more at another thread count: 3 (CI's machine has 2 cores, nbval-portable uses 1). They
# train on one thread whatever the machine has, so their outputs must not move (README: Portable
# outputs).
LIVE_TRAINING := induction_heads language_model 09_positions 10_training_attention
nbval-threads: env  ## nbval again on the chapters that train live, at 3 threads
	@$(MAKE) --no-print-directory nbval NBVAL_DIR=_build/nbval-threads \
	    NBVAL_ENV="OMP_NUM_THREADS=3" NOTEBOOKS="$(LIVE_TRAINING:%=chapters/%.ipynb)"

# Another machine: one thread, ATen's plain kernels (as on ARM), OpenBLAS's old kernels, MKL's
# compatible path (README: Portable outputs). Run it after changing a chapter's numbers.
PORTABLE := OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=default OPENBLAS_CORETYPE=Sandybridge \
    MKL_CBWR=COMPATIBLE
nbval-portable: env  ## nbval under another machine's settings (one thread, plain kernels)
	@$(MAKE) --no-print-directory nbval NBVAL_DIR=_build/nbval-portable NBVAL_ENV="$(PORTABLE)"

# tests/test_devices.py (attnlib and 20 training steps equal to the CPU's), then
# benchmarks/bench_gpu.py. Needs torch's CUDA build (`make TORCH_INDEX= env`).
gpu-check: env  ## the device tests and the chapters' timings on CUDA
	@$(BIN)/python -c 'import sys, torch; torch.cuda.is_available() or sys.exit("gpu-check:" \
	    " no CUDA device here (torch.cuda.is_available() is False): run it where there is one")'
	$(BIN)/pytest tests/test_devices.py -q -rs -p no:randomly -n 0 -k cuda
	$(BIN)/python benchmarks/bench_gpu.py --device cuda

# ---- refresh stored notebook outputs ------------------------------------------------
# Widget state (the explorer's model ids and PNG, different on every run) is not stored.
execute: env  ## re-execute every chapters/*.ipynb in place from a fresh kernel
	for nb in $(NOTEBOOKS); do \
	    echo "executing $$nb"; \
	    $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	        --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=600 \
	        --ExecutePreprocessor.record_timing=False \
	        --ExecutePreprocessor.store_widget_state=False "$$nb"; \
	done

# ---- data and the trained model -----------------------------------------------------
texts: env  ## rewrite data/odyssey.txt and data/iliad.txt from data/raw/
	$(BIN)/python scripts/prepare_texts.py

# The chapter "A language model on the Odyssey" loads these models; the script trains the word
# model, its variants and the BPE model, three seeds each, $(JOBS) runs at a time, one thread
# each (deterministic: seeded draws), and writes data/odyssey_lm/ atomically.
odyssey-lm: env  ## retrain the Odyssey models into data/odyssey_lm/ (54 runs, 5.5 h)
	$(BIN)/python scripts/train_odyssey.py --jobs $(JOBS)

# Gemma 3 270M measured for "A real decoder" (tests/test_gemma3_results.py replays parts).
gemma3-results: env  ## measure Gemma 3 270M into data/gemma3/results.json (8 min, 2 threads)
	$(BIN)/python scripts/gemma_measure.py

# Five token mixers, memories of several sizes, one thread (tests/test_recall.py replays it).
recall: env  ## retrain the recall benchmark's 17 models into data/recall/ (40 min)
	$(BIN)/python scripts/train_recall.py

dates: env  ## retrain the three date translators into data/dates/ (4 min)
	$(BIN)/python scripts/train_dates.py

# QK-norm and a soft cap at three learning rates (tests/test_lr_stability.py).
lr-stability: env  ## the learning rates at which attention breaks (9 runs, 15 min)
	$(BIN)/python scripts/lr_stability.py

# Chapters 5-7 and the explorer load them (tests/test_pointer_heads.py checks them).
pointer-heads: env  ## retrain the two pointer heads of the training chapter
	$(BIN)/python scripts/train_pointer_heads.py

induction-model: env  ## retrain the induction chapter's model into data/induction/
	OMP_NUM_THREADS=1 $(BIN)/python scripts/train_induction.py

# tests/test_colab.py fails when a chapter's cell 0 differs from the template.
colab-cells: env  ## rewrite every chapter's cell 0 (Colab) from its template
	$(BIN)/python scripts/colab_cells.py

# ---- environment --------------------------------------------------------------------
# .venv is up to date when its stamp is newer than the lock and pyproject.toml (make's own
# rule); it is made again, saying why, when it was made by a Python older than PY_FLOOR or,
# with `make PYTHON=...`, by another Python than that one. uv (PyPI's wheel, kept in
# _build/uv unless uv is on PATH) makes it (`uv venv`) and installs the lock (`uv pip
# sync`); `make INSTALLER=pip ...` uses venv and pip, and pip takes over when uv fails. The
# stamp is written last, so an install that fails half-way is redone (tests/test_install.py).
UV_PIN    := uv==0.13.9
UV        := $(or $(shell command -v uv 2>/dev/null),_build/uv/bin/uv)
PYPI      := $(or $(PIP_INDEX_URL),https://pypi.org/simple/)
VENV_PY   := $(shell sed -nE 's/^version(_info)? *= *([0-9]+\.[0-9]+\.[0-9]+).*/\2/p' \
    $(VENV)/pyvenv.cfg 2>/dev/null)
PY_WANTED := $(if $(filter command line environment,$(origin PYTHON)),$(shell \
    $(PYTHON) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null))
older = $(filter-out $(2),$(firstword $(shell printf '%s\n' $(1) $(2) | sort -V)))
STALE := $(strip $(if $(VENV_PY),$(if $(call older,$(VENV_PY),$(PY_FLOOR)),it was made by \
    Python $(VENV_PY)$(comma) older than $(PY_FLOOR),$(if $(filter-out $(VENV_PY),$(PY_WANTED)),it \
    was made by Python $(VENV_PY)$(comma) not by PYTHON=$(PYTHON) ($(PY_WANTED))))))
ifneq ($(STALE)$(if $(wildcard $(BIN)/python),,missing),)
.PHONY: $(STAMP)
endif

# Exits with the reason when the URL (argv[1]) does not answer within NET_TIMEOUT seconds.
define PROBE_PY
import os, sys, urllib.error as e, urllib.request as u
url = sys.argv[1]
try:
    if url.startswith("file:"):
        os.listdir(u.url2pathname(url[5:]))
    else:
        u.urlopen(u.Request(url, method="HEAD"), timeout=$(NET_TIMEOUT)).close()
except e.HTTPError:
    pass  # the server answered
except Exception as error:
    sys.exit(str(getattr(error, "reason", error)))
endef
export PROBE_PY

# The wheel ships attnlib only; the book's exercises (lib/exercises, `from exercises import
# check` in the chapters) are the checkout's: a .pth file puts lib/ on .venv's path.
EXERCISES_PTH := import pathlib, site, sys; pathlib.Path(site.getsitepackages()[0], \
    "attention_book.pth").write_text(sys.argv[1] + chr(10))
export EXERCISES_PTH
export NEW_ENOUGH := import sys; sys.exit(sys.version_info < ($(subst .,$(comma),$(PY_FLOOR))))

env: $(STAMP)  ## only create/refresh .venv (PYTHON=python3.12 picks the interpreter)
$(STAMP): requirements.txt pyproject.toml
	@found=$$($(PYTHON) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) \
	    || { echo "env: cannot run PYTHON=$(PYTHON): this book needs Python >= $(PY_FLOOR);" \
	    "run \`make PYTHON=/path/to/python3.12 $(GOAL)\`" >&2; exit 1; }; \
	if ! $(PYTHON) -c "$$NEW_ENOUGH"; then \
	    better=$$(for p in python3.14 python3.13 python3.12 python3.11; do \
	        $$p -c "$$NEW_ENOUGH" 2>/dev/null && echo $$p && break; done || true); \
	    echo "env: needs Python >= $(PY_FLOOR), found $$found (PYTHON=$(PYTHON));" >&2; \
	    echo "env: run \`make PYTHON=$${better:-python3.12} $(GOAL)\`" >&2; \
	    [ -n "$$better" ] || echo "env: no Python >= $(PY_FLOOR) found on PATH: install one" \
	        "(python.org, your package manager, pyenv, or \`uv python install 3.12\`)" >&2; \
	    exit 1; fi
	@why=$$($(PYTHON) -c "$$PROBE_PY" $(PYPI) 2>&1) || { echo "env: cannot reach the package" \
	    "index $(PYPI) ($$why). Making .venv downloads the pinned packages (requirements.txt)" \
	    "from it: connect to the network (or point PIP_INDEX_URL at a mirror you can reach)" \
	    "and run make again. Nothing was created." >&2; exit 1; }
	$(if $(STALE),@echo "env: removing $(VENV): $(STALE)"; rm -rf $(VENV))
	@rm -f $(STAMP); opts="--index-url $(PYPI) $(addprefix --find-links ,$(PIP_FIND_LINKS))"; \
	if [ "$(shell uname)" = Linux ] && [ -n "$(TORCH_INDEX)" ]; then \
	    if why=$$($(PYTHON) -c "$$PROBE_PY" $(TORCH_INDEX) 2>&1); then opts="$$opts \
	        --extra-index-url $(TORCH_INDEX) --index-strategy unsafe-best-match"; \
	    else echo "env: note: cannot reach TORCH_INDEX=$(TORCH_INDEX) ($$why); torch comes" \
	        "from the default index instead (see README, Troubleshooting)." >&2; fi; fi; \
	if [ $(INSTALLER) = uv ] && { [ -x $(UV) ] || $(PYTHON) -m pip install -q --target \
	        _build/uv $(UV_PIN); } && { [ -x $(BIN)/python ] || $(UV) venv -q --seed \
	        --python $(PYTHON) $(VENV); } && $(UV) pip sync --python $(BIN)/python $$opts \
	        requirements.txt && $(UV) pip install -q --python $(BIN)/python --no-deps -e .; \
	then :; else \
	    [ $(INSTALLER) = pip ] || echo "env: note: installing with uv failed (see above);" \
	        "installing with pip instead" >&2; \
	    [ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "env:" \
	        "\`$(PYTHON) -m venv\` failed (on Debian/Ubuntu: apt install python3-venv)" >&2; \
	        exit 1; }; \
	    $(BIN)/python -m pip install $${opts//--index-strategy unsafe-best-match/} \
	        -r requirements.txt && $(BIN)/python -m pip install --no-deps -e .; fi
	$(BIN)/python -c "$$EXERCISES_PTH" "$(CURDIR)/lib"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name \
	    "Python 3 (.venv)" >/dev/null
	@! ls -d $(VENV)/lib/python*/site-packages/nvidia* >/dev/null 2>&1 || echo "env: note:" \
	    "torch's CUDA build was installed, with its nvidia-* packages (README, Troubleshooting)"
	@touch $@

lock: env  ## regenerate requirements.txt and binder/requirements.txt
	TORCH_INDEX="$(TORCH_INDEX)" TORCH_CPU_INDEX=$(TORCH_CPU_INDEX) LOCK_ARGS="$(LOCK_ARGS)" \
	    bash scripts/lock.sh

clean:  ## remove _build and caches (keeps .venv)
	rm -rf _build .pytest_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o \
	    \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

distclean: clean  ## clean, and remove .venv
	rm -rf $(VENV)
