"""The chapter "A real decoder" fits Binder's 2 GB (issue 49): the kernel that runs every cell
peaks well under it (Linux's ``VmHWM``, read by a cell added at the end). The model alone is
1.07 GB of float32 (1.16 GiB resident with the libraries' files); one position's logits over
262,144 pieces are 1 MB, so the chapter reads out only the positions it needs.

The goal is 1.8 GB. Nine runs on one machine peaked at 1.69 to 1.80 GB (glibc keeps some freed
memory, and how much varies from run to run), so the test allows 1.9 GB: it fails on a chapter
that grows by a model's read-out of a few hundred positions, not on that noise. About 40 s.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "real_decoder.ipynb"
LIMIT = 1.9e9  # bytes: the goal is 1.8e9, measured 1.69e9-1.80e9 (see above)
PEAK = "print(next(line for line in open('/proc/self/status') if line.startswith('VmHWM')))"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM is Linux's")
def test_the_chapter_runs_within_1_8_gb():
    nb = nbformat.read(CHAPTER, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK))
    client = NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(CHAPTER.parent)}},
    )
    client.execute()
    line = nb.cells[-1].outputs[0]["text"]  # "VmHWM:  1712345 kB"
    peak = int(line.split()[1]) * 1024
    assert peak <= LIMIT, f"the chapter's kernel peaked at {peak / 1e9:.2f} GB > {LIMIT / 1e9} GB"
