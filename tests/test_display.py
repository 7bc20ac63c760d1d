"""attnlib.display: the seeds' tab-separated tables and labelled heatmaps."""

import matplotlib

matplotlib.use("Agg")

import math  # noqa: E402
import warnings  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from attnlib import _layout  # noqa: E402
from attnlib.display import plot_heads, plot_weights, print_weights  # noqa: E402

SHIP = "I must go back to my ship and to my crew".split()


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
        # the rows are the same along a row of the grid: labelled on its first panel only
        assert [t.get_text() for t in ax.get_yticklabels()] == (rows if h == 0 else [])
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
    with pytest.raises(ValueError, match=r"weights must be 2-D; got \(3,\)"):
        print_weights([1.0, 2.0, 3.0], ["a"])


def test_plot_weights_labels_scale_and_nan_cells():
    weights = torch.tensor([[0.5, float("nan")], [0.25, 0.75]])
    ax = plot_weights(weights, ["a", "b"], ["x", "y"], xlabel="dim", ylabel="word", vmin=0, vmax=1)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("dim", "word")
    assert ax.images[0].get_clim() == (0, 1)
    assert [t.get_text() for t in ax.texts] == ["0.50", "0.25", "0.75"]  # NaN cell left blank
    plt.close(ax.figure)


# ---------------------------------------------------------------- documented results


def test_print_weights_nan_and_infinities(capsys):
    w = torch.tensor([[math.nan, math.inf], [-math.inf, 0.125]])
    print_weights(w, ["a", "b"])
    assert capsys.readouterr().out == "\ta\tb\t\na\tnan\tinf\t\nb\t-inf\t0.12\t\n"


def test_print_weights_empty_matrix_prints_the_header(capsys):
    print_weights(torch.zeros(0, 2), [], ["x", "y"])
    assert capsys.readouterr().out == "\tx\ty\t\n"


class ArrayLike:
    """Any object NumPy can convert (a pandas DataFrame, a JAX array, ...)."""

    def __init__(self, rows):
        self.rows = rows

    def __array__(self, dtype=None, copy=None):
        return np.array(self.rows, dtype=dtype)


@pytest.mark.parametrize(
    "weights",
    [
        torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.bfloat16),  # before: TypeError
        torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float16),
        torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64),
        torch.tensor([[0.25, 0.75], [0.5, 0.5]], requires_grad=True),
        np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float16),
        [[0.25, 0.75], [0.5, 0.5]],  # before: "weights must be 2-D; got list"
        ((0.25, 0.75), (0.5, 0.5)),
        ArrayLike([[0.25, 0.75], [0.5, 0.5]]),
    ],
    ids=[
        "bfloat16",
        "float16",
        "float64",
        "requires_grad",
        "numpy-float16",
        "list",
        "tuple",
        "array-like",
    ],
)
def test_print_and_plot_weights_of_any_real_type(weights, capsys):
    expected = [[0.25, 0.75], [0.5, 0.5]]
    print_weights(weights, ["a", "b"])
    assert capsys.readouterr().out == seed_table(expected, ["a", "b"], ["a", "b"])
    ax = plot_weights(weights, ["a", "b"])
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75", "0.50", "0.50"]
    np.testing.assert_array_equal(ax.images[0].get_array(), expected)


@pytest.mark.parametrize(
    "weights",
    [torch.tensor([[True, False], [True, True]]), np.array([[1, 0], [1, 1]], dtype=np.int8)],
    ids=["bool", "int8"],
)
def test_masks_print_as_zeros_and_ones(weights, capsys):
    print_weights(weights, ["a", "b"], digits=0)
    assert capsys.readouterr().out == "\ta\tb\t\na\t1\t0\t\nb\t1\t1\t\n"


def test_labels_may_be_ints_tuples_and_generators(capsys):
    w = np.array([[0.5, 0.5]])
    print_weights(w, (np.int64(3),), (f"k{j}" for j in range(2)))
    assert capsys.readouterr().out == "\tk0\tk1\t\n3\t0.50\t0.50\t\n"
    ax = plot_weights(w, [7], range(2))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["7"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1"]
    print_weights(w, ["q"], ["a", "b"], digits=np.int64(3))  # NumPy ints are ints
    assert capsys.readouterr().out.splitlines()[1] == "q\t0.500\t0.500\t"


def test_plot_weights_infinite_cells_are_written_and_readable():
    # Before: -inf was written in white on the blank (uncoloured) cell: invisible.
    w = torch.tensor([[0.0, -math.inf], [math.inf, 1.0]])
    ax = plot_weights(w, ["a", "b"])
    assert ax.images[0].get_clim() == (0.0, 1.0)  # the finite values set the scale
    texts = {t.get_text(): t.get_color() for t in ax.texts}
    assert set(texts) == {"0.00", "-inf", "inf", "1.00"}
    assert texts["-inf"] == texts["inf"] == "black"
    assert texts["0.00"] == "white" and texts["1.00"] == "black"
    assert ax.images[0].get_array().mask.tolist() == [[False, True], [True, False]]


def test_plot_weights_of_a_constant_matrix():
    ax = plot_weights(torch.full((2, 2), 0.5), ["a", "b"])
    lo, hi = ax.images[0].get_clim()
    assert lo < 0.5 < hi  # matplotlib widens a scale of zero width around the value
    assert [t.get_text() for t in ax.texts] == ["0.50"] * 4


def test_plot_weights_with_no_finite_value():
    ax = plot_weights(torch.full((2, 2), math.nan), ["a", "b"])
    assert ax.images[0].get_clim() == (0.0, 1.0) and len(ax.texts) == 0


@pytest.mark.parametrize(
    ("vmin", "vmax", "clim"),
    [
        (None, None, (0.1, 0.4)),
        (0.2, None, (0.2, 0.4)),
        (None, 0.3, (0.1, 0.3)),
        (-1, 2, (-1.0, 2.0)),
        (np.float32(0.0), np.int64(1), (0.0, 1.0)),
    ],
)
def test_plot_weights_colour_limits(vmin, vmax, clim):
    w = np.array([[0.1, 0.2], [0.3, 0.4]])
    ax = plot_weights(w, ["a", "b"], vmin=vmin, vmax=vmax)
    assert ax.images[0].get_clim() == pytest.approx(clim)


def test_plot_weights_writes_values_up_to_400_cells():
    labels20, labels21 = [str(i) for i in range(20)], [str(i) for i in range(21)]
    assert len(plot_weights(np.zeros((20, 20)), labels20).texts) == 400
    assert len(plot_weights(np.zeros((20, 21)), labels20, labels21).texts) == 0


def test_plot_weights_title_none_and_empty():
    assert plot_weights(np.eye(2), ["a", "b"], title=None).get_title() == ""
    assert plot_weights(np.eye(2), ["a", "b"], title="x").get_title() == "x"


def test_plot_heads_more_columns_than_heads():
    # Before: ncols=10 for 2 heads drew 8 hidden axes in a 16-inch-wide figure.
    fig = plot_heads(torch.rand(2, 3, 3), ["a", "b", "c"], ncols=10)
    assert len([ax for ax in fig.axes if ax.images]) == 2
    assert all(ax.get_visible() for ax in fig.axes)
    assert fig.get_size_inches()[0] <= _layout.MAX_WIDTH


@pytest.mark.parametrize(("n", "m"), [(1, 50), (50, 2), (60, 60), (3, 3)])
def test_plot_heads_figure_size_is_bounded(n, m):
    # Before: (1, 50) gave a figure 0.16 inch tall (constrained layout collapsed, with a
    # warning), (50, 2) one 75 inches tall, and 3 heads of 11 words one 16 inches wide,
    # shrunk to half size (6 px labels) in the page's column.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_heads(torch.rand(2, n, m), list(range(n)), list(range(m)))
        fig.canvas.draw()  # constrained layout runs without a warning
    width, height = fig.get_size_inches()
    assert 2.0 <= width <= _layout.MAX_WIDTH + 1e-9
    assert 1.0 <= height <= _layout.MAX_HEIGHT + 1e-9


COLUMN_PX = 720  # the content column of a 1280 px page (sphinx-book-theme, both sidebars)


def shown_px(fig, text):
    """The height in pixels of ``text``'s font once the figure (drawn at the inline
    backend's 100 dpi) is scaled down to fit the column."""
    width_px = fig.get_size_inches()[0] * 100
    return text.get_fontsize() * 100 / 72 * min(1.0, COLUMN_PX / width_px)


@pytest.mark.parametrize("words", [SHIP, [f"{i}: {7 * i % 13}" for i in range(40)]])
@pytest.mark.parametrize("heads", [2, 5])
def test_plot_heads_labels_are_readable_at_the_column_width(words, heads):
    w = torch.softmax(torch.randn(heads, len(words), len(words)), dim=-1)
    fig = plot_heads(w, words, ncols=3)
    fig.canvas.draw()
    heatmaps = [ax for ax in fig.axes if ax.images]
    for h, ax in enumerate(heatmaps):
        labels = ax.get_xticklabels() + ax.get_yticklabels() + [ax.title]
        assert all(shown_px(fig, t) >= 11 for t in labels)
        xlabels = [t.get_text() for t in ax.get_xticklabels()]
        assert xlabels and set(xlabels) <= set(words) and xlabels[0] == words[0]
        if h % 3 == 0:  # first panel of a row of the grid: the row labels
            assert [t.get_text() for t in ax.get_yticklabels()][0] == words[0]
        # neighbouring tick labels do not overlap: horizontal ones by their boxes, rotated
        # ones (parallel lines) by the distance between them across the text
        for axis in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [t.get_window_extent() for t in axis]
            if not axis:  # the row labels, on the first panel of the row only
                continue
            if axis[0].get_rotation() == 0:
                assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
            else:
                sin = math.sin(math.radians(axis[0].get_rotation()))
                gap = min(b.x1 - a.x1 for a, b in zip(boxes, boxes[1:])) * sin
                assert gap >= axis[0].get_fontsize() * fig.dpi / 72
    if len(words) == 11:  # the Odyssey sentence: every word is shown
        assert all(len(ax.get_xticklabels()) == 11 for ax in heatmaps)
    else:  # 40 labels: thinned to every k-th, k > 1
        assert all(1 < len(ax.get_xticklabels()) < 40 for ax in heatmaps)


def test_plot_heads_one_colour_scale_for_attention_weights():
    # Before: each panel had its own scale and colour bar, so a flat head (weights near
    # 1/6) looked as contrasted as a sharp one.
    flat = torch.full((6, 6), 1 / 6) + 0.01 * torch.rand(6, 6)
    sharp = torch.eye(6) * 0.9 + 0.02
    fig = plot_heads(torch.stack([flat, sharp]), SHIP[:6])
    heatmaps = [ax for ax in fig.axes if ax.images]
    norms = [ax.images[0].norm for ax in heatmaps]
    assert [(n.vmin, n.vmax) for n in norms] == [(0.0, 1.0), (0.0, 1.0)]
    assert norms[1] is norms[0]  # one scale, not two equal ones
    bars = [ax for ax in fig.axes if not ax.images]
    assert len(bars) == 1 and bars[0] is heatmaps[-1].images[0].colorbar.ax
    assert bars[0].get_ylim() == pytest.approx((0.0, 1.0))


def test_plot_heads_one_colour_scale_for_other_values():
    # scores, biases: the smallest and largest finite values over all heads
    w = torch.tensor([[[-3.0, 0.0], [1.0, 2.0]], [[0.5, math.inf], [-math.inf, 5.0]]])
    fig = plot_heads(w, AB)
    norms = {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in fig.axes if ax.images}
    assert norms == {(-3.0, 5.0)}
    assert len([ax for ax in fig.axes if not ax.images]) == 1


@pytest.mark.parametrize(
    ("vmin", "vmax", "limits"),
    [(None, None, (0.0, 1.0)), (0.2, None, (0.2, 1.0)), (None, 0.5, (0.0, 0.5)), (-1, 2, (-1, 2))],
)
def test_plot_heads_colour_scale_override(vmin, vmax, limits):
    fig = plot_heads(torch.rand(3, 2, 2) * 0.5 + 0.25, AB, vmin=vmin, vmax=vmax)
    norms = {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in fig.axes if ax.images}
    assert len(norms) == 1 and norms.pop() == pytest.approx(limits)


def test_plot_heads_values_only_when_they_fit():
    small = plot_heads(torch.rand(2, 6, 6), SHIP[:6], digits=2)
    assert all(len(ax.texts) == 36 for ax in small.axes if ax.images)
    for ax in small.axes:
        assert all(shown_px(small, t) >= 10 for t in ax.texts)
    words = [str(i) for i in range(30)]
    big = plot_heads(torch.rand(2, 30, 30), words, digits=2)  # cells of ~0.12 inch
    assert all(len(ax.texts) == 0 for ax in big.axes)


def test_plot_heads_long_titles_are_wrapped():
    fig = plot_heads(torch.rand(3, 4, 4), list("abcd"), titles=["head 0 (random, untrained)"] * 3)
    fig.canvas.draw()
    boxes = [ax.title.get_window_extent() for ax in fig.axes if ax.images]
    assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def test_plot_heads_digits_and_nan():
    w = torch.tensor([[[0.5, math.nan]], [[0.25, 0.75]]])
    fig = plot_heads(w, ["q"], ["a", "b"], digits=1)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert [[t.get_text() for t in ax.texts] for ax in heatmaps] == [["0.5"], ["0.2", "0.8"]]


# ---------------------------------------------------------------- bad input

W2 = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
AB = ["a", "b"]

BAD_PRINT = [
    # (arguments, keyword arguments, exception, message)
    ((W2, AB), {"digits": None}, TypeError, r"digits must be an int >= 0 .*; got NoneType None"),
    (
        (W2, AB),
        {"digits": -1},
        ValueError,
        r"digits must be an int >= 0 \(the decimals shown\).*; got -1",
    ),
    ((W2, AB), {"digits": 1.5}, TypeError, r"digits must be an int >= 0 .*; got float 1.5"),
    ((W2, AB), {"digits": 2.0}, TypeError, r"digits must be an int >= 0 .*; got float 2.0"),
    ((W2, AB), {"digits": True}, TypeError, r"digits must be an int >= 0 .*; got bool True"),
    ((W2, AB), {"digits": "2"}, TypeError, r"digits must be an int >= 0 .*; got str '2'"),
    (
        (W2, "ab"),
        {},
        TypeError,
        r"rows must be a list of labels, one per row; got the string 'ab' \(split a sentence",
    ),
    (
        (W2, None),
        {},
        TypeError,
        r"rows must be a list of labels \(str or int\), one per row; got NoneType",
    ),
    (
        (W2, torch.tensor([1, 2])),
        {},
        TypeError,
        r"rows must be a list .*; got Tensor \(convert a tensor with .tolist\(\)\)",
    ),
    ((W2, ["a", None]), {}, TypeError, r"rows\[1\] must be a str \(or an int\); got NoneType None"),
    ((W2, AB, [0.5, "y"]), {}, TypeError, r"cols\[0\] must be a str \(or an int\); got float 0.5"),
    ((W2, [True, False]), {}, TypeError, r"rows\[0\] must be a str \(or an int\); got bool True"),
    (
        (W2, ["a\tb", "c"]),
        {},
        ValueError,
        r"rows\[0\] must not contain a tab or a newline .*; got 'a\\tb'",
    ),
    ((W2, AB, ["x", "y\n"]), {}, ValueError, r"cols\[1\] must not contain a tab or a newline"),
    (
        (W2.to(torch.complex64), AB),
        {},
        TypeError,
        r"weights must hold real numbers; got dtype torch.complex64",
    ),
    (
        (np.array([["a", "b"], ["c", "d"]]), AB),
        {},
        TypeError,
        r"weights must hold real numbers; got dtype <U1",
    ),
    (
        ([[1.0, 2.0], [3.0]], AB),
        {},
        ValueError,
        r"weights must be a rectangular nested list of numbers",
    ),
    (
        ("weights", AB),
        {},
        TypeError,
        r"weights must be a torch.Tensor, a NumPy array or a nested list of numbers; got str",
    ),
    ((None, AB), {}, TypeError, r"weights must be a torch.Tensor, .*; got NoneType"),
]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [pytest.param(*case, id=f"print-{i}") for i, case in enumerate(BAD_PRINT)],
)
def test_bad_print_weights(args, kwargs, error, message, capsys):
    with pytest.raises(error, match=message):
        print_weights(*args, **kwargs)
    assert capsys.readouterr().out == ""  # checked before anything is printed


BAD_PLOT = [
    (
        (torch.zeros(0, 2), [], ["x", "y"]),
        {},
        r"weights must have at least one row and one column to plot; got \(0, 2\)",
    ),
    (
        (torch.zeros(2, 0), AB, []),
        {},
        r"weights must have at least one row and one column to plot; got \(2, 0\)",
    ),
    ((torch.zeros(0, 0), []), {}, r"at least one row and one column to plot; got \(0, 0\)"),
    ((W2, AB), {"vmin": 1, "vmax": 0}, r"vmin must be < vmax; got vmin=1, vmax=0"),
    ((W2, AB), {"vmin": 0.5, "vmax": 0.5}, r"vmin must be < vmax; got vmin=0.5, vmax=0.5"),
    (
        (W2, AB),
        {"vmin": 0.8},  # before: a scale from 0.36 to 0.8
        r"vmin must be below the largest finite value of weights, 0.75; got vmin=0.8 "
        r"\(give vmax too\)",
    ),
    (
        (W2, AB),
        {"vmax": 0.25},
        r"vmax must be above the smallest finite value of weights, 0.25; got vmax=0.25 "
        r"\(give vmin too\)",
    ),
    ((W2, AB), {"vmin": math.nan}, r"vmin must be a finite number or None; got nan"),
    ((W2, AB), {"vmax": math.inf}, r"vmax must be a finite number or None; got inf"),
    ((W2, AB), {"digits": -2}, r"digits must be an int >= 0 \(the decimals shown\).*; got -2"),
]

BAD_PLOT_TYPES = [
    ((W2, AB), {"vmin": "0"}, r"vmin must be a finite number or None; got str '0'"),
    ((W2, AB), {"vmax": torch.tensor([1.0])}, r"vmax must be a finite number or None; got Tensor"),
    (
        (W2, AB),
        {"ax": "left"},
        r"ax must be a matplotlib Axes \(e.g. from plt.subplots\(\)\) or None; got str",
    ),
    (
        (W2, AB),
        {"digits": 0.5},
        r"digits must be an int >= 0 \(the decimals shown\) or None \(no values\); got float 0.5",
    ),
    ((W2, "ab"), {}, r"rows must be a list of labels, one per row; got the string 'ab'"),
    ((W2, [None, "b"]), {}, r"rows\[0\] must be a str \(or an int\); got NoneType None"),
]


@pytest.mark.parametrize(
    ("error", "args", "kwargs", "message"),
    [pytest.param(ValueError, *case, id=f"value-{i}") for i, case in enumerate(BAD_PLOT)]
    + [pytest.param(TypeError, *case, id=f"type-{i}") for i, case in enumerate(BAD_PLOT_TYPES)],
)
def test_bad_plot_weights(error, args, kwargs, message):
    with pytest.raises(error, match=message):
        plot_weights(*args, **kwargs)


W3 = torch.rand(3, 2, 2)

BAD_HEADS = [
    (
        (W3, AB),
        {"titles": ["x"]},
        ValueError,
        r"titles must have one title per head, H=3; got 1: \['x'\]",
    ),
    (
        (W3, AB),
        {"titles": ["x", "y", "z", "t"]},
        ValueError,
        r"titles must have one title per head, H=3; got 4",
    ),
    ((W3, AB), {"titles": []}, ValueError, r"titles must have one title per head, H=3; got 0"),
    (
        (W3, AB),
        {"titles": "xyz"},
        TypeError,
        r"titles must be a list of H=3 strings, one per head; got str 'xyz'",
    ),
    ((W3, AB), {"titles": ["x", 1, "z"]}, TypeError, r"titles\[1\] must be a str; got int 1"),
    (
        (W3, AB),
        {"ncols": 0},
        ValueError,
        r"ncols must be an int >= 1 \(heads per row of the grid\) or None; got 0",
    ),
    (
        (W3, AB),
        {"ncols": -1},
        ValueError,
        r"ncols must be an int >= 1 \(heads per row of the grid\) or None; got -1",
    ),
    (
        (W3, AB),
        {"ncols": 1.5},
        TypeError,
        r"ncols must be an int >= 1 \(heads per row of the grid\) or None; got float 1.5",
    ),
    ((W3, AB), {"ncols": True}, TypeError, r"ncols must be an int >= 1 .*; got bool True"),
    (
        (W3, AB),
        {"digits": -1},
        ValueError,
        r"digits must be an int >= 0 \(the decimals shown\).*; got -1",
    ),
    (
        (torch.zeros(0, 2, 2), AB),
        {},
        ValueError,
        r"weights must have at least one head, one row and one column to plot; got \(0, 2, 2\)",
    ),
    (
        (torch.zeros(2, 0, 2), [], AB),
        {},
        ValueError,
        r"at least one head, one row and one column to plot; got \(2, 0, 2\)",
    ),
    (
        (torch.zeros(2, 2, 0), AB, []),
        {},
        ValueError,
        r"at least one head, one row and one column to plot; got \(2, 2, 0\)",
    ),
    (
        (torch.zeros(2, 2, 2), AB, ["x", "y", "z"]),
        {},
        ValueError,
        r"weights must have shape \(len\(rows\)=2, len\(cols\)=3\); got \(2, 2, 2\)",
    ),
    ((W3, 7), {}, TypeError, r"rows must be a list of labels \(str or int\), one per row; got int"),
    ((W3, AB), {"vmin": 1, "vmax": 0}, ValueError, r"vmin must be < vmax; got vmin=1, vmax=0"),
    ((W3, AB), {"vmin": math.nan}, ValueError, r"vmin must be a finite number or None; got nan"),
    ((W3, AB), {"vmax": "1"}, TypeError, r"vmax must be a finite number or None; got str '1'"),
    (
        (W3 - 2, AB),
        {"vmin": 0},  # every value is below 0: nothing to show
        ValueError,
        r"vmin must be below the largest finite value of weights, -1.\d+; got vmin=0 ",
    ),
]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [pytest.param(*case, id=f"heads-{i}") for i, case in enumerate(BAD_HEADS)],
)
def test_bad_plot_heads(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        plot_heads(*args, **kwargs)


def test_print_weights_splits_wide_tables(capsys):
    w = torch.arange(6.0).reshape(2, 3) / 10
    print_weights(w, ["a", "b"], ["x", "y", "z"], digits=1, max_cols=2)
    assert capsys.readouterr().out.splitlines() == [
        "columns 0 to 1:",
        "\tx\ty\t",
        "a\t0.0\t0.1\t",
        "b\t0.3\t0.4\t",
        "columns 2 to 2:",
        "\tz\t",
        "a\t0.2\t",
        "b\t0.5\t",
    ]
    print_weights(w, ["a", "b"], ["x", "y", "z"], digits=1, max_cols=3)
    assert capsys.readouterr().out.splitlines()[0] == "\tx\ty\tz\t"  # fits: one table


@pytest.mark.parametrize(
    ("max_cols", "error", "match"),
    [
        (0, ValueError, r"max_cols must be an int >= 1 \(columns per table\) or None; got 0"),
        (2.0, TypeError, "max_cols must be an int >= 1 .* got float 2.0"),
        (True, TypeError, "max_cols must be an int >= 1"),
    ],
)
def test_print_weights_max_cols_errors(max_cols, error, match, capsys):
    with pytest.raises(error, match=match):
        print_weights(torch.eye(2), ["a", "b"], max_cols=max_cols)
    assert capsys.readouterr().out == ""  # nothing printed half-way
