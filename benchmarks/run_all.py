"""Run every benchmark script, one after the other, each in its own process.

Each prints its machine line, PyTorch's ``Compare`` table and its ratios (median over
interleaved rounds, with the range) and goals. The exit status is 1 if any goal fails.

Usage::

    python benchmarks/run_all.py [--quick]   # --quick: fewer rounds (noisier)
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
SCRIPTS = [
    "bench_mha.py",
    "bench_memory.py",
    "bench_flash_backward.py",
    "bench_decoding.py",
    "bench_glove_load.py",
    "bench_lm.py",
    "bench_gemma3.py",
]
QUICK = {"bench_mha.py": ["--rounds", "5"], "bench_gemma3.py": ["--quick"]}  # else 2 rounds

if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    failed = []
    for script in SCRIPTS:
        print(f"\n===== {script}", flush=True)
        args = QUICK.get(script, ["--rounds", "2"]) if quick else []
        if subprocess.run([sys.executable, str(HERE / script), *args]).returncode:
            failed.append(script)
    print("\nall goals met" if not failed else f"\ngoals missed in: {', '.join(failed)}")
    sys.exit(1 if failed else 0)
