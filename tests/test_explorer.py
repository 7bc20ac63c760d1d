"""The attention explorer works as a reader uses it: run its notebook in a real kernel, show
the widget, change the controls from the kernel and as a front end does (comm messages).

nbval checks the explorer's static outputs; the widget cell is tagged ``skip-execution``
(no widget state is stored), so only this test exercises the live widget.
"""

import json
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"
NOTEBOOK = CHAPTERS / "attention_explorer.ipynb"


class Kernel:
    """The explorer notebook executed in a kernel, plus cells run after it."""

    def __init__(self, client: NotebookClient, nb):
        self.client, self.nb = client, nb

    def run(self, source: str) -> str:
        cell = new_code_cell(source)
        self.nb.cells.append(cell)
        self.client.execute_cell(cell, len(self.nb.cells) - 1)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, "\n".join(e.get("evalue", "") for e in errors)
        return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")

    def frontend_update(self, comm_id: str, state: dict, wait: float = 20.0) -> None:
        """Send what JupyterLab sends when the reader changes a control, then wait for the
        kernel to have handled it (a cell queued after it runs after it)."""
        msg = self.client.kc.session.msg(
            "comm_msg",
            {"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}},
        )
        self.client.kc.shell_channel.send(msg)
        deadline = time.monotonic() + wait
        key, value = next(iter(state.items()))
        probe = f"print(repr(_widgets[{comm_id!r}].{key}))"
        while time.monotonic() < deadline:
            if self.run(probe).strip() == repr(value):
                return
            time.sleep(0.2)
        raise AssertionError(f"the kernel did not apply {state} to {comm_id}")


@pytest.fixture(scope="module")
def kernel():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(CHAPTERS)}}
    )
    with client.setup_kernel():
        for index, cell in enumerate(list(nb.cells)):
            if cell.cell_type == "code" and "skip-execution" not in cell.metadata.get("tags", []):
                client.execute_cell(cell, index)
        yield Kernel(client, nb)


def test_widget_cell_runs_but_puts_no_widget_on_the_site():
    """The make_explorer() cell is executed (nbval checks it like every cell), its output is
    removed from the page, and the notebook stores no widget state: no widget scripts from a
    CDN on the site (tests/test_site.py checks no page loads anything from another host)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    widget_cells = [c for c in nb.cells if "make_explorer()" == c.source.strip()]
    assert len(widget_cells) == 1
    assert widget_cells[0].execution_count is not None
    assert widget_cells[0].metadata.tags == ["remove-output"]
    assert "widgets" not in nb.metadata


def test_explorer_updates_from_the_kernel(kernel):
    kernel.run(
        "box = make_explorer()\n"
        "text, (slider, checkbox), status, image = (\n"
        "    box.children[0], box.children[1].children, *box.children[2:]\n"
        ")\n"
        "png0 = image.value\n"
        "assert png0[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
        "slider.value = 4.0\n"
        "assert image.value != png0 and image.layout.display is None\n"
        "checkbox.value = True\n"
        "assert image.value not in (png0,)\n"
        "text.value = 'I must go back to my shhip'\n"
        "assert image.layout.display == 'none'\n"
        "assert 'shhip' in status.value and 'close matches: ship' in status.value, status.value\n"
        "text.value = ''\n"
        "assert 'at least one word' in status.value and image.layout.display == 'none'\n"
        "text.value = 'We process and ship your order'\n"
        "assert image.layout.display is None and image.value[:4] == b'\\x89PNG'\n"
    )


def test_explorer_updates_from_a_front_end(kernel):
    out = kernel.run(
        "import json\n"
        "box = make_explorer()\n"
        "text, (slider, checkbox), status, image = (\n"
        "    box.children[0], box.children[1].children, *box.children[2:]\n"
        ")\n"
        "_widgets = {w.model_id: w for w in (text, slider, checkbox)}\n"
        "print(json.dumps({'text': text.model_id, 'slider': slider.model_id,\n"
        "                  'checkbox': checkbox.model_id}))\n"
    )
    ids = json.loads(out)
    kernel.run("png_before = image.value")
    kernel.frontend_update(ids["text"], {"value": "my shhip"})
    kernel.run("assert 'shhip' in status.value and image.layout.display == 'none', status.value")
    kernel.frontend_update(ids["text"], {"value": "the cat sat on the mat"})
    kernel.frontend_update(ids["slider"], {"value": 0.1})
    kernel.frontend_update(ids["checkbox"], {"value": True})
    kernel.run(
        "assert image.layout.display is None and image.value != png_before\n"
        "assert status.value.startswith('L = 6,'), status.value\n"
    )
