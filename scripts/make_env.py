"""Create or refresh the project's virtualenv, `.venv` (what `make env` runs, before any target).

Usage (the Makefile passes these; standard library only, so any Python 3 can run it)::

    python3 scripts/make_env.py --python PYTHON --floor 3.11.5 --goal book \
        [--explicit] [--torch-index URL] [--net-timeout 5] [--installer uv|pip]
    python3 scripts/make_env.py --probe --floor 3.11.5 --torch-index URL  # for `make lock`

In this order, each step stopping at once with a message that says what to do:

1. nothing to do when `.venv/.stamp` is newer than `requirements.txt` and `pyproject.toml`,
   `.venv/bin/python` exists and `.venv` was made by a Python at least ``--floor`` (and, with
   ``--explicit``, i.e. `make PYTHON=...`, by that same Python);
2. PYTHON must run and be at least ``--floor`` (else: a better one found on PATH is named);
3. pip's package index (and, on Linux, ``--torch-index``, PyTorch's CPU wheels) must answer
   within ``--net-timeout`` seconds; the probes run in parallel threads;
4. a stale `.venv` is removed (saying why), `.venv` is made and filled from the lock, by uv
   (``--installer uv``, the default; pip if uv fails) or by pip (``--installer pip``);
5. the stamp is written last, so an install that fails half-way is redone next time.
"""

import argparse
import configparser
import glob
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request

VENV = ".venv"
BIN = os.path.join(VENV, "bin")
STAMP = os.path.join(VENV, ".stamp")
UV = "uv==0.13.9"  # from PyPI, into .venv; installs the lock (see install())
VERSION_CODE = 'import sys; print("%d.%d.%d" % sys.version_info[:3])'


def say(message):
    print("env: " + message, file=sys.stderr)


def version_tuple(text):
    return tuple(int(part) for part in text.split(".")[:3])


def version_of(python):
    """The version PYTHON reports, e.g. "3.11.7", or None when it does not run."""
    try:
        run = subprocess.run([python, "-c", VERSION_CODE], capture_output=True, text=True)
    except OSError:
        return None
    return run.stdout.strip() if run.returncode == 0 and run.stdout.strip() else None


def venv_version():
    """The Python version written in .venv/pyvenv.cfg, or None."""
    try:
        with open(os.path.join(VENV, "pyvenv.cfg"), encoding="utf-8") as cfg:
            text = cfg.read()
    except OSError:
        return None
    found = re.search(r"^version(?:_info)?\s*=\s*(\d+\.\d+\.\d+)", text, re.M)
    return found.group(1) if found else None


def stale_reason(args):
    """Why the existing .venv cannot be used (a sentence), or None when it can."""
    if not os.path.exists(os.path.join(BIN, "python")):
        return f"it has no {BIN}/python"
    made_by = venv_version()
    if made_by is None:
        return f"{VENV}/pyvenv.cfg names no Python version"
    if version_tuple(made_by) < version_tuple(args.floor):
        return f"it was made by Python {made_by}, older than {args.floor}"
    if args.explicit:
        wanted = version_of(args.python)
        if wanted != made_by:
            return "it was made by Python {}, not by PYTHON={} ({})".format(
                made_by,
                args.python,
                wanted or "which does not run",
            )
    return None


def up_to_date(args):
    if not os.path.exists(VENV) or stale_reason(args):
        return False
    stamp = os.path.getmtime(STAMP) if os.path.exists(STAMP) else -1
    return all(os.path.getmtime(f) <= stamp for f in ("requirements.txt", "pyproject.toml"))


def check_python(args):
    found = version_of(args.python)
    if found is None:
        say(
            f"cannot run PYTHON={args.python}: this book needs Python >= {args.floor}; run "
            f"`make PYTHON=/path/to/python3.12 {args.goal}`"
        )
        sys.exit(1)
    if version_tuple(found) < version_tuple(args.floor):
        better = next(
            (
                name
                for name in ("python3.14", "python3.13", "python3.12", "python3.11")
                if shutil.which(name)
                and version_tuple(version_of(name) or "0") >= version_tuple(args.floor)
            ),
            None,
        )
        say(f"needs Python >= {args.floor}, found {found} (PYTHON={args.python});")
        say("run `make PYTHON={} {}`".format(better or "python3.12", args.goal))
        if better is None:
            say(
                f"no Python >= {args.floor} found on PATH: install one (python.org, your package "
                "manager, pyenv, or `uv python install 3.12`)"
            )
        sys.exit(1)
    return found


def pip_config():
    """pip's configuration files, read in pip's order (the last one wins); none when
    PIP_CONFIG_FILE is os.devnull, as in pip."""
    config = configparser.RawConfigParser()
    if os.environ.get("PIP_CONFIG_FILE") == os.devnull:
        return config
    home = os.path.expanduser("~")
    xdg = os.path.expanduser(os.environ.get("XDG_CONFIG_HOME", "~/.config"))
    dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    files = [os.path.join(d, "pip", "pip.conf") for d in dirs] + [
        "/etc/pip.conf",
        home + "/.pip/pip.conf",
        home + "/Library/Application Support/pip/pip.conf",
        os.path.join(xdg, "pip", "pip.conf"),
        os.environ.get("PIP_CONFIG_FILE", ""),
    ]
    config.read([f for f in files if f and f != os.devnull], encoding="utf-8")
    return config


def pip_setting(name, environment):
    """A pip setting: its environment variable, else pip.conf ([install], then [global])."""
    if os.environ.get(environment):
        return os.environ[environment]
    config = pip_config()
    for section in ("install", "global"):
        if config.has_option(section, name):
            return config.get(section, name)
    return ""


def pip_index():
    """pip's index: PIP_INDEX_URL, else index-url from pip's configuration files, else PyPI."""
    return (pip_setting("index-url", "PIP_INDEX_URL") or "https://pypi.org/simple/").split()[0]


def probe(urls, timeout):
    """{url: None if it answered, else the reason}, all probed at once."""
    answers = {}

    def one(url):
        try:
            if url.startswith("file:"):
                path = urllib.request.url2pathname(url[len("file:") :])
                answers[url] = None if os.path.isdir(path) else "no such directory"
            else:
                request = urllib.request.Request(url, method="HEAD")
                urllib.request.urlopen(request, timeout=timeout).close()
                answers[url] = None
        except urllib.error.HTTPError:
            answers[url] = None  # the server answered
        except Exception as error:  # noqa: BLE001 - any failure means "does not answer"
            answers[url] = str(getattr(error, "reason", error))

    threads = [threading.Thread(target=one, args=(url,), daemon=True) for url in urls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 0.5)
    return {url: answers.get(url, f"no answer in {timeout:g} s") for url in urls}


def shown(url):
    return re.sub(r"//[^/@]*@", "//***@", url)


def torch_options(args):
    """pip options for torch's CPU index, after checking that the package index answers."""
    index = pip_index()
    torch_index = args.torch_index if platform.system() == "Linux" else ""
    answers = probe([index] + ([torch_index] if torch_index else []), args.net_timeout)
    if answers[index] is not None:
        say(
            f"cannot reach the package index {shown(index)} ({answers[index]}).\n"
            "env: making .venv downloads the pinned "
            "packages (requirements.txt) from it: connect to the network (or point "
            "PIP_INDEX_URL or pip.conf at a mirror you can reach) and run make again. Nothing "
            "was created."
        )
        sys.exit(1)
    if not torch_index:
        return []
    if answers[torch_index] is None:
        return ["--extra-index-url", torch_index]
    say(
        f"note: cannot reach TORCH_INDEX={shown(torch_index)} ({answers[torch_index]}); "
        "torch comes from the default index instead "
        "(see README, Troubleshooting)."
    )
    return []


def attempt(command):
    """Run ``command``, echoed first; True when it succeeds."""
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command).returncode == 0


def run(command):
    if not attempt(command):
        sys.exit(1)


def install(python, options, installer):
    """Install the lock and attnlib into .venv: with uv (from PyPI), else with pip.

    uv installs the same lock about five times faster than pip (README, Dependencies). It
    reads no pip configuration, so pip's index and find-links are passed on; with torch's CPU
    index it must look at every index for every package (unsafe-best-match). If uv fails,
    pip does the work, saying so.
    """
    if installer == "uv":
        uv = [python, "-m", "uv", "pip", "install", "--python", python]
        uv += ["--index-url", pip_index()]
        for link in pip_setting("find-links", "PIP_FIND_LINKS").split():
            uv += ["--find-links", link]
        if options:
            uv += options + ["--index-strategy", "unsafe-best-match"]
        if (
            attempt([python, "-m", "pip", "install", "--quiet", UV])
            and attempt(uv + ["-r", "requirements.txt"])
            and attempt(uv + ["-e", ".", "--no-deps"])
        ):
            return
        say("note: installing with uv failed (see above); installing with pip instead")
    run([python, "-m", "pip", "install"] + options + ["-r", "requirements.txt"])
    run([python, "-m", "pip", "install", "-e", ".", "--no-deps"])


def main(argv=None):
    parser = argparse.ArgumentParser(description="Create or refresh .venv.")
    parser.add_argument("--python", default="python3")
    parser.add_argument("--floor", required=True)
    parser.add_argument("--goal", default="book")
    parser.add_argument("--explicit", action="store_true", help="PYTHON was given by the user")
    parser.add_argument("--torch-index", default="")
    parser.add_argument("--net-timeout", type=float, default=5.0)
    parser.add_argument("--installer", choices=("uv", "pip"), default="uv")
    parser.add_argument(
        "--probe", action="store_true", help='only probe the indexes; print "cpu" or "default"'
    )
    args = parser.parse_args(argv)
    if args.probe:
        print("cpu" if torch_options(args) else "default")
        return
    if up_to_date(args):
        return
    found = check_python(args)
    options = torch_options(args)
    reason = stale_reason(args) if os.path.exists(VENV) else None
    if reason:
        print(f"env: removing {VENV}: {reason}", flush=True)
        shutil.rmtree(VENV)
    if not os.path.exists(os.path.join(BIN, "python")):
        print(f"env: making {VENV} with {args.python} (Python {found})", flush=True)
        if subprocess.run([args.python, "-m", "venv", VENV]).returncode != 0:
            shutil.rmtree(VENV, ignore_errors=True)
            say(
                f"`{args.python} -m venv` failed (on Debian/Ubuntu: apt install python3-venv, or "
                "python3.X-venv for your version)"
            )
            sys.exit(1)
    python = os.path.join(BIN, "python")
    if os.path.exists(STAMP):
        os.remove(STAMP)
    install(python, options, args.installer)
    kernel = ["--sys-prefix", "--name", "python3", "--display-name", "Python 3 (.venv)"]
    run([python, "-m", "ipykernel", "install"] + kernel)
    if glob.glob(os.path.join(VENV, "lib", "python*", "site-packages", "nvidia*")):
        say(
            "note: torch's CUDA build was installed, with its nvidia-* packages; see README, "
            "Troubleshooting"
        )
    with open(STAMP, "w"):
        pass


if __name__ == "__main__":
    main()
