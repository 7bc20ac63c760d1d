"""attnlib.display: the seeds' tab-separated tables and labelled heatmaps."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from attnlib.display import plot_heads, plot_weights, print_weights  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def seed_table(weights, rows, cols):
    """Seed 000's print_attn_weights, written out: the format to reproduce."""
    lines = ["\t" + "".join(f"{c}\t" for c in cols)]
    for label, row in zip(rows, weights):
        lines.append(f"{label}\t" + "".join(f"{v:.2f}\t" for v in row))
    return "\n".join(lines) + "\n"


def test_print_weights_exact_string(capsys):
    w = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
    print_weights(w, ["a", "b"])
    assert capsys.readouterr().out == "\ta\tb\t\na\t0.25\t0.75\t\nb\t0.50\t0.50\t\n"


def test_print_weights_rows_and_cols(capsys):
    w = np.array([[0.123, 0.456, 0.421], [1.0, 0.0, 0.005]])
    print_weights(w, ["ship", "crew"], ["we", "process", "order"])
    out = capsys.readouterr().out
    assert out == seed_table(w, ["ship", "crew"], ["we", "process", "order"])
    assert out.splitlines()[1] == "ship\t0.12\t0.46\t0.42\t"
    print_weights(w, ["ship", "crew"], ["we", "process", "order"], digits=3)
    assert capsys.readouterr().out.splitlines()[2] == "crew\t1.000\t0.000\t0.005\t"


def test_print_weights_glove_ship_row(glove, capsys):
    from attnlib import attention_weights, tokenize

    words = tokenize("We process and ship your order")
    X = glove.matrix(words)
    print_weights(attention_weights(X, X), words)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "\twe\tprocess\tand\tship\tyour\torder\t"
    assert lines[4] == "ship\t0.04\t0.03\t0.04\t0.78\t0.05\t0.06\t"


def test_plot_weights_labels_and_values():
    w = torch.tensor([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    ax = plot_weights(w, ["q1", "q2"], ["k1", "k2", "k3"], title="demo")
    assert isinstance(ax, matplotlib.axes.Axes)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["k1", "k2", "k3"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["q1", "q2"]
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6
    assert texts == ["0.10", "0.20", "0.70", "0.30", "0.30", "0.40"]
    assert ax.get_title() == "demo"
    np.testing.assert_allclose(ax.images[0].get_array(), w.numpy())


def test_plot_weights_into_given_axes_and_without_values():
    fig, (left, right) = plt.subplots(1, 2)
    ax = plot_weights(np.eye(3), ["a", "b", "c"], ax=right, digits=None)
    assert ax is right and len(ax.texts) == 0 and len(left.images) == 0
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]


def test_plot_heads():
    w = torch.softmax(torch.randn(3, 4, 5), dim=-1)
    rows, cols = ["a", "b", "c", "d"], ["v", "w", "x", "y", "z"]
    fig = plot_heads(w, rows, cols, digits=2)
    assert isinstance(fig, matplotlib.figure.Figure)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in heatmaps] == ["head 0", "head 1", "head 2"]
    for h, ax in enumerate(heatmaps):
        assert [t.get_text() for t in ax.get_xticklabels()] == cols
        assert [t.get_text() for t in ax.get_yticklabels()] == rows
        assert len(ax.texts) == 20
        assert ax.texts[0].get_text() == f"{w[h, 0, 0].item():.2f}"
        np.testing.assert_allclose(ax.images[0].get_array(), w[h].numpy())


def test_plot_heads_grid_and_titles():
    w = torch.rand(5, 2, 2)
    fig = plot_heads(w, ["a", "b"], titles=[f"h{i}" for i in range(5)], ncols=3)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in heatmaps] == ["h0", "h1", "h2", "h3", "h4"]
    assert all(len(ax.texts) == 0 for ax in heatmaps)  # digits=None by default
    hidden = [ax for ax in fig.axes if not ax.get_visible()]
    assert len(hidden) == 1  # a 2 x 3 grid for 5 heads


def test_bad_print_weights_labels():
    with pytest.raises(
        ValueError, match=r"weights must have shape \(len\(rows\)=3, len\(cols\)=3\); got \(2, 3\)"
    ):
        print_weights(torch.zeros(2, 3), ["a", "b", "c"])
    with pytest.raises(
        ValueError, match=r"weights must have shape \(len\(rows\)=2, len\(cols\)=2\); got \(2, 3\)"
    ):
        print_weights(torch.zeros(2, 3), ["a", "b"], ["x", "y"])


def test_bad_display_ranks():
    with pytest.raises(ValueError, match=r"weights must be 2-D; got \(2, 2, 2\)"):
        plot_weights(torch.zeros(2, 2, 2), ["a", "b"])
    with pytest.raises(ValueError, match=r"weights must be 3-D; got \(2, 2\)"):
        plot_heads(torch.zeros(2, 2), ["a", "b"])
    with pytest.raises(ValueError, match="weights must be 2-D; got list"):
        print_weights([[1.0]], ["a"])


def test_plot_weights_labels_scale_and_nan_cells():
    weights = torch.tensor([[0.5, float("nan")], [0.25, 0.75]])
    ax = plot_weights(weights, ["a", "b"], ["x", "y"], xlabel="dim", ylabel="word", vmin=0, vmax=1)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("dim", "word")
    assert ax.images[0].get_clim() == (0, 1)
    assert [t.get_text() for t in ax.texts] == ["0.50", "0.25", "0.75"]  # NaN cell left blank
    plt.close(ax.figure)
