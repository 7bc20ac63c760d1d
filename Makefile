# Attention, by hand and by library: build, test and refresh the book.
# Everything runs from the project's own virtualenv (.venv); the system python is only
# used once, to create it.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

# ---- interpreter and virtualenv ------------------------------------------------------
# PYTHON makes .venv (only that; everything else runs from .venv/bin). The floor is the
# highest Requires-Python of the pinned packages (soupsieve 4.1.2: 3.11.5; numpy, torch's
# deps, keras, matplotlib, ...: 3.11). Keep it equal to requires-python in pyproject.toml.
PYTHON    ?= python3
PY_FLOOR  := 3.11.5
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.stamp
# On Linux torch comes from PyTorch's CPU wheel index (PyPI's Linux wheel pulls several
# GB of CUDA libraries); empty it (`make TORCH_INDEX= book`) to use the default index.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(TORCH_CPU_INDEX)
# Seconds the network probe waits for the package index (and TORCH_INDEX) to answer.
NET_TIMEOUT ?= 5
PY_VERSION_CODE := import sys; print("%d.%d.%d" % sys.version_info[:3])
# ver_ge A B: true when version A >= version B (numeric, field by field).
ver_ge = awk -v a="$(1)" -v b="$(2)" 'BEGIN { split(a, x, "."); split(b, y, "."); \
    for (i = 1; i <= 3; i++) { if (x[i] + 0 != y[i] + 0) exit !(x[i] + 0 > y[i] + 0) } exit 0 }'

# A .venv made by another interpreter is replaced, not reused. Read from .venv/pyvenv.cfg
# (no Python is started), so an up-to-date .venv costs nothing here. Replaced when it is
# broken (no python or no version), older than the floor, or made by another version
# than a PYTHON given explicitly (`make PYTHON=python3.12 ...`, or in the environment).
ifneq ($(wildcard $(VENV)),)
VENV_PY := $(shell sed -n -E 's/^version(_info)? *= *([0-9]+\.[0-9]+\.[0-9]+).*/\2/p' \
    $(VENV)/pyvenv.cfg 2>/dev/null | head -n 1)
ifeq ($(wildcard $(BIN)/python),)
VENV_STALE := it has no $(BIN)/python
else ifeq ($(VENV_PY),)
VENV_STALE := $(VENV)/pyvenv.cfg names no Python version
else ifneq ($(shell $(call ver_ge,$(VENV_PY),$(PY_FLOOR)) && echo ok),ok)
VENV_STALE := it was made by Python $(VENV_PY), older than $(PY_FLOOR)
else ifneq ($(filter command line environment,$(origin PYTHON)),)
PYTHON_PY := $(shell $(PYTHON) -c '$(PY_VERSION_CODE)' 2>/dev/null)
ifneq ($(PYTHON_PY),$(VENV_PY))
VENV_STALE := it was made by Python $(VENV_PY), not by PYTHON=$(PYTHON) ($(or $(PYTHON_PY),which does not run))
endif
endif
endif
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


.PHONY: help env book test unittest nbval nbval-portable lint sitetest chromium execute clean distclean \
    odyssey-lm texts

help:
	@echo "make book       build the HTML book into _build/html (executes changed notebooks)"
	@echo "make test       unit tests, nbval on chapters/*.ipynb, ruff, full book build (-W -n),"
	@echo "                then the site test (every page in headless Chromium, offline)"
	@echo "make sitetest   only the site test, on the book already in _build/html"
	@echo "make execute    re-execute every chapters/*.ipynb in place from a fresh kernel"
	@echo "make lint       ruff check + ruff format --check"
	@echo "make clean      remove _build and caches (keeps .venv)"
	@echo "make distclean  clean, and remove .venv"
	@echo "make env        only create/refresh .venv (PYTHON=python3.12 picks the interpreter)"
	@echo "make lock       regenerate requirements.txt and binder/requirements.txt from"
	@echo "                requirements.in and binder/requirements.in (pip-compile)"
	@echo "make colab-cells  rewrite the Colab cell (cell 0) of every chapter from its template"
	@echo "make texts      rewrite data/odyssey.txt and data/iliad.txt from data/raw/"
	@echo "make odyssey-lm retrain the Odyssey language model into data/odyssey_lm/ (about"
	@echo "                an hour on 2 cores; tests/test_odyssey_lm.py checks the result)"

# ---- environment --------------------------------------------------------------------
# Made in this order, each step stopping make at once with a message saying what is
# needed: PYTHON's version is checked, the package index (and TORCH_INDEX) is probed, a
# stale .venv is removed, .venv is made and filled. The stamp is written last, so a
# failed or interrupted install is redone by the next make, never taken as complete.
env: $(STAMP)

.PHONY: FORCE lock colab-cells
FORCE:

$(STAMP): requirements.txt pyproject.toml $(if $(VENV_STALE),FORCE)
	@v=$$($(PYTHON) -c '$(PY_VERSION_CODE)' 2>/dev/null) || { \
	    echo "env: cannot run PYTHON=$(PYTHON): this book needs Python >= $(PY_FLOOR);" \
	        "run \`make PYTHON=/path/to/python3.12 $(or $(MAKECMDGOALS),book)\`" >&2; exit 1; }; \
	if ! $(call ver_ge,$$v,$(PY_FLOOR)); then \
	    better=; \
	    for p in python3.14 python3.13 python3.12 python3.11; do \
	        w=$$($$p -c '$(PY_VERSION_CODE)' 2>/dev/null) && $(call ver_ge,$$w,$(PY_FLOOR)) \
	            && { better=$$p; break; }; \
	    done; \
	    echo "env: needs Python >= $(PY_FLOOR), found $$v (PYTHON=$(PYTHON));" \
	        "run \`make PYTHON=$${better:-python3.12} $(or $(MAKECMDGOALS),book)\`" >&2; \
	    [ -n "$$better" ] || echo "env: no Python >= $(PY_FLOOR) found on PATH: install one" \
	        "(python.org, your package manager, pyenv, or \`uv python install 3.12\`)" >&2; \
	    exit 1; \
	fi
	@torch_opts=; \
	where=$$($(PYTHON) -c "$$NET_PROBE_PY" "$(NET_TIMEOUT)" \
	    "$(if $(filter Linux,$(shell uname -s)),$(TORCH_INDEX))") || exit 1; \
	if [ "$$where" = cpu ]; then torch_opts="--extra-index-url $(TORCH_INDEX)"; fi; \
	if [ -n "$(VENV_STALE)" ] && [ -d $(VENV) ]; then \
	    echo "env: removing $(VENV): $(VENV_STALE)"; rm -rf $(VENV); \
	fi; \
	if [ ! -x $(BIN)/python ]; then \
	    echo "env: making $(VENV) with $(PYTHON) (Python $$($(PYTHON) -c '$(PY_VERSION_CODE)'))"; \
	    $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	        echo "env: \`$(PYTHON) -m venv\` failed (on Debian/Ubuntu: apt install" \
	            "python3-venv, or python3.X-venv for your version)" >&2; exit 1; }; \
	fi; \
	set -x; \
	$(BIN)/python -m pip install $$torch_opts -r requirements.txt; \
	$(BIN)/python -m pip install -e . --no-deps; \
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (.venv)"; \
	{ set +x; } 2>/dev/null; \
	if ls $(VENV)/lib/python*/site-packages 2>/dev/null | grep -q '^nvidia'; then \
	    echo "env: note: torch's CUDA build was installed, with its nvidia-* packages" \
	        "($$(du -sh $(VENV) | cut -f1) in $(VENV)); see README, Troubleshooting"; \
	fi
	touch $@

# The network probe (stdlib only; run by PYTHON before anything is made). argv: timeout
# in seconds, then TORCH_INDEX (empty: not used). Exits 1, saying what is needed, when
# pip's package index (PIP_INDEX_URL, else pip's configured index-url, else PyPI) does not
# answer; prints "cpu" when TORCH_INDEX answers, else "default" (with a note on stderr).
# The probes run in parallel threads, so even hanging name lookups cost at most about
# NET_TIMEOUT seconds.
define NET_PROBE_PY
import configparser, os, re, sys, threading, urllib.error, urllib.request

timeout, torch_index = float(sys.argv[1]), sys.argv[2]
answers = {}

def probe(url):
    try:
        if url.startswith("file:"):
            path = urllib.request.url2pathname(url[len("file:"):])
            answers[url] = None if os.path.isdir(path) else "no such directory"
        else:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
            answers[url] = None
    except urllib.error.HTTPError:
        answers[url] = None  # the server answered
    except Exception as error:
        answers[url] = str(getattr(error, "reason", error))

def start(url):
    thread = threading.Thread(target=probe, args=(url,), daemon=True)
    thread.start()
    return thread

threads = [start(torch_index)] if torch_index else []
# pip's index: PIP_INDEX_URL, else index-url from pip's configuration files (read here in
# pip's order, the last one wins; `pip config` would cost a second), else PyPI.
home, xdg = os.path.expanduser("~"), os.environ.get("XDG_CONFIG_HOME", "~/.config")
files = [os.path.join(d, "pip", "pip.conf")
         for d in os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)]
files += ["/etc/pip.conf", f"{home}/.pip/pip.conf", f"{home}/Library/Application Support/pip/pip.conf",
          os.path.join(os.path.expanduser(xdg), "pip", "pip.conf"), os.path.join(sys.prefix, "pip.conf"),
          os.environ.get("PIP_CONFIG_FILE", "")]
config = configparser.RawConfigParser()
config.read([f for f in files if f and f != os.devnull], encoding="utf-8")
index = os.environ.get("PIP_INDEX_URL") or next(
    (config.get(section, "index-url") for section in ("install", "global")
     if config.has_option(section, "index-url")), "https://pypi.org/simple/")
index = index.split()[0]
threads.append(start(index))
for thread in threads:
    thread.join(timeout + 0.5)
shown = lambda url: re.sub(r"//[^/@]*@", "//***@", url)
reason = answers.get(index, f"no answer in {timeout:g} s")
if reason is not None:
    print(f"env: cannot reach the package index {shown(index)} ({reason}).\n"
          "env: making .venv downloads the pinned packages (requirements.txt) from it: connect to "
          "the network (or point PIP_INDEX_URL or pip.conf at a mirror you can reach) and run "
          "make again. Nothing was created.",
          file=sys.stderr)
    sys.exit(1)
if torch_index:
    reason = answers.get(torch_index, f"no answer in {timeout:g} s")
    if reason is None:
        print("cpu")
    else:
        print(f"env: note: cannot reach TORCH_INDEX={shown(torch_index)} ({reason}); torch comes "
              "from the default index instead (see README, Troubleshooting).", file=sys.stderr)
        print("default")
else:
    print("default")
endef
export NET_PROBE_PY

# ---- the lock -----------------------------------------------------------------------
# requirements.txt (everything, exact) from requirements.in, and binder/requirements.txt
# (what the chapters import, at the same versions) from binder/requirements.in, with
# pip-compile (pip-tools, itself pinned in requirements.txt). Pins already in an output
# file are kept: to move one, edit requirements.in or run `make lock LOCK_ARGS="-P NAME"`
# (--upgrade-package). torch is resolved from TORCH_INDEX when it answers (the CPU build,
# whose dependencies name no nvidia-* package) and written without its +cpu tag.
LOCK_COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet \
    --no-emit-index-url --no-emit-find-links --strip-extras --annotation-style=line $(LOCK_ARGS)
lock: $(STAMP)
	@torch_opts=; \
	where=$$($(BIN)/python -c "$$NET_PROBE_PY" "$(NET_TIMEOUT)" \
	    "$(if $(filter Linux,$(shell uname -s)),$(TORCH_INDEX))") || exit 1; \
	if [ "$$where" = cpu ]; then torch_opts="--extra-index-url $(TORCH_INDEX)"; fi; \
	sed -i.bak '/^--extra-index-url/d' binder/requirements.txt && rm -f binder/requirements.txt.bak; \
	set -x; \
	$(LOCK_COMPILE) $$torch_opts --output-file requirements.txt requirements.in; \
	$(LOCK_COMPILE) $$torch_opts --output-file binder/requirements.txt \
	    binder/requirements.in; \
	{ set +x; } 2>/dev/null; \
	for f in requirements.txt binder/requirements.txt; do \
	    sed -i.bak -E -e 's/^(torch==[^ +]+)\+cpu /\1     /' \
	        -e 's/^(torch==[^ +]+)\+cpu$$/\1/' -e 's/ -c binder\/\.\.\/requirements\.txt,//' \
	        $$f && rm -f $$f.bak; \
	    if grep -q '^nvidia-' $$f; then \
	        echo "lock: $$f names nvidia-* packages (torch's CUDA build): run make lock" \
	            "where TORCH_INDEX=$(TORCH_INDEX) answers" >&2; exit 1; \
	    fi; \
	done; \
	{ echo '# Binder (repo2docker) installs this file, made by `make lock` from'; \
	  echo '# binder/requirements.in: the runtime pins of ../requirements.txt only. PyTorch'"'"'s'; \
	  echo '# CPU index gives Binder the CPU build of torch (+cpu sorts after the plain version).'; \
	  echo '--extra-index-url $(TORCH_CPU_INDEX)'; \
	  cat binder/requirements.txt; } > binder/requirements.txt.new; \
	mv binder/requirements.txt.new binder/requirements.txt

# Colab: write the first cell of every chapter from the one template (scripts/colab_cells.py;
# tests/test_colab.py fails when a chapter's cell differs from it).
colab-cells: $(STAMP)
	$(BIN)/python scripts/colab_cells.py

# ---- book ---------------------------------------------------------------------------
# The site shows the outputs stored in the notebooks (execute_notebooks: off), and those
# are the outputs nbval has just checked: `make book` first re-executes every chapter
# changed since its last check (nbval, below), then builds. With nothing changed, a
# second `make book` only re-writes nothing and takes seconds.
# A failed build forgets Sphinx's saved environment, so the next (incremental) build
# re-reads every page and reports the same warnings again instead of passing.
book: $(STAMP)
	@$(MAKE) --no-print-directory nbval NBVAL_LENIENT=1
	$(JB_BUILD) || { rm -f _build/.doctrees/environment.pickle; exit 1; }
	@echo "Book: $(CURDIR)/_build/html/index.html"

# ---- tests --------------------------------------------------------------------------
# The book is built with --all (a fresh Sphinx environment) so that warnings of pages
# unchanged since the last build are reported again. The site test needs the built
# book, so it runs last. Independent work runs on every core (pytest-xdist).
test: $(STAMP)
	$(MAKE) --no-print-directory lint unittest nbval nbval-portable
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
# `make execute` does) and compares every output with the stored one
# (scripts/nbval_chapter.py). A chapter is checked again only when it, attnlib, the data or
# the environment changed since its last check (stamp: $(NBVAL_DIR)/<chapter>.ok). Chapters
# run $(JOBS) at a time, the slowest first; --output-sync keeps each report in one piece.
# NBVAL_ENV sets the machine settings of a run; NBVAL_LENIENT=1 (make book) warns instead of
# failing when an output prints differently on this machine, and writes no stamp then.
NBVAL_DIR ?= _build/nbval
NBVAL_ENV ?=
SLOW_FIRST := $(filter %/language_model.ipynb %/induction_heads.ipynb %/08_efficient_attention.ipynb \
    %/09_positions.ipynb %/10_training_attention.ipynb %/11_inference.ipynb,$(NOTEBOOKS))
NBVAL_ORDER := $(SLOW_FIRST) $(filter-out $(SLOW_FIRST),$(NOTEBOOKS))
NBVAL_OKS := $(patsubst chapters/%.ipynb,$(NBVAL_DIR)/%.ok,$(NBVAL_ORDER))
NBVAL_DEPS := $(wildcard lib/attnlib/*.py) $(wildcard data/*) tests/nbval_sanitize.cfg \
    scripts/nbval_chapter.py $(STAMP)

nbval: $(STAMP)
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(NBVAL_OKS)
	@echo "nbval: $(if $(NBVAL_LENIENT),checked (a WARNING above names any output that prints \
	    differently here),every chapter's stored outputs match a fresh run) $(NBVAL_ENV)"

$(NBVAL_DIR)/%.ok: chapters/%.ipynb $(NBVAL_DEPS)
	@echo "nbval $< $(NBVAL_ENV)"
	@rc=0; env $(NBVAL_ENV) $(BIN)/python scripts/nbval_chapter.py $< \
	    $(if $(NBVAL_LENIENT),--lenient) || rc=$$?; \
	if [ $$rc -eq 0 ]; then mkdir -p $(@D) && touch $@; elif [ $$rc -ne 3 ]; then exit $$rc; fi

# The stored outputs must not depend on the machine. A reader's computer may give torch one
# thread, lack AVX2 (ATen's default kernels stand in for ARM and older CPUs), or run another
# BLAS kernel: every chapter is checked again under two such settings (own stamps).
PORTABLE_1 := OMP_NUM_THREADS=1 MKL_CBWR=COMPATIBLE
PORTABLE_2 := ATEN_CPU_CAPABILITY=default OPENBLAS_CORETYPE=Sandybridge
nbval-portable: $(STAMP)
	@$(MAKE) --no-print-directory nbval NBVAL_DIR=_build/nbval-portable-1 NBVAL_ENV="$(PORTABLE_1)"
	@$(MAKE) --no-print-directory nbval NBVAL_DIR=_build/nbval-portable-2 NBVAL_ENV="$(PORTABLE_2)"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# ---- refresh stored notebook outputs ------------------------------------------------
# Widget state (the explorer's model ids and PNG, different on every run) is not stored.
execute: $(STAMP)
ifneq ($(NOTEBOOKS),)
	for nb in $(NOTEBOOKS); do \
	    echo "executing $$nb"; \
	    $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	        --ExecutePreprocessor.kernel_name=python3 \
	        --ExecutePreprocessor.timeout=$(EXEC_TIMEOUT) \
	        --ExecutePreprocessor.record_timing=False \
	        --ExecutePreprocessor.store_widget_state=False \
	        "$$nb"; \
	done
else
	@echo "execute: no chapters/*.ipynb yet"
endif

# ---- data and the trained model -----------------------------------------------------
# Butler's Odyssey and Iliad, cleaned from the Project Gutenberg files in data/raw/.
texts: $(STAMP)
	$(BIN)/python scripts/prepare_texts.py

# The chapter "A language model on the Odyssey" loads this model; the script trains it and
# five variants deterministically (seeded draws) and writes data/odyssey_lm/ atomically.
odyssey-lm: $(STAMP)
	$(BIN)/python scripts/train_odyssey.py

# ---- cleaning -----------------------------------------------------------------------
clean:
	rm -rf _build .pytest_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o \
	    \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 \
	    | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
