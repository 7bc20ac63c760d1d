"""Check one chapter with nbval: execute it in a fresh kernel and compare every output.

Usage (from the project root; ``make nbval`` calls it for every chapter)::

    python scripts/nbval_chapter.py chapters/X.ipynb

Outputs are compared as numbers (``scripts/nbval_numbers.py``): words and integers exactly,
each decimal within one unit of its last printed digit, so a CPU that rounds a last digit the
other way passes and any larger change fails. Memory addresses are masked
(``tests/nbval_sanitize.cfg``). Exit status: 0 when every output matches (a notebook without
code cells passes), 1 when a cell fails (an error, or an output that differs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(notebook: Path) -> list[str]:
    """The pytest command line that checks ``notebook`` (nbval with the numeric comparison)."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "--nbval",
        str(notebook),
        "--nbval-sanitize-with",
        str(ROOT / "tests" / "nbval_sanitize.cfg"),
        "-p",
        "nbval_numbers",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",
        "-q",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebook", type=Path)
    args = parser.parse_args(argv)
    env = dict(os.environ)  # the plugin is imported before pytest reads its pythonpath
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT / "scripts"), env.get("PYTHONPATH")])
    )
    run = subprocess.run(command(args.notebook), cwd=ROOT, env=env, check=False)
    return 0 if run.returncode in (0, 5) else 1  # 5: nothing collected (no code cells)


if __name__ == "__main__":
    sys.exit(main())
