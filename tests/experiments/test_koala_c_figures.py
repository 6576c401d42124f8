"""The KOALA-C figures drawn from made-up sweep rows: titled with the trace and the environment,
in the figures' style, a logarithmic axis (the paper's) said in its label."""

from __future__ import annotations

from isthmus.experiments.koala_c import draw_limits
from isthmus.metrics import style


def _rows() -> list[dict[str, object]]:
    return [
        {
            "trace": "LCG",
            "dispatch": d,
            "chains": k,
            "limit_min": lim,
            "slowdown_mean": 10.0 * k + lim,
            "wait_mean": 100.0 * lim / k,
            "short_wait_mean": 50.0 + lim,
            "long_wait_mean": 400.0 - lim,
        }
        for d in ("rr", "rnd")
        for k in (1, 4)
        for lim in (5, 10, 15)
    ]


def test_fig3_names_trace_and_environment_and_labels_its_log_axes() -> None:
    fig = draw_limits(_rows(), "LCG", (1, 4), 4)
    title = fig.get_suptitle()
    assert "Fig. 3" in title and "LCG" in title and "koala-c-multicluster" in title
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert ax.get_yscale() == "log" and ax.get_ylabel().endswith("log scale")
        assert ax.get_xlabel() == "runtime limit of short jobs (min)"
        assert ax.title.get_fontsize() == style.FONT_SIZE
    (a, _b, c, _d) = fig.axes
    assert [line.get_label() for line in a.get_lines()] == ["1 chain", "4 chains"]
    # the style's palette and a line style per series, so RR and RND stay apart in grey print
    assert [line.get_color() for line in c.get_lines()] == list(style.PALETTE[:2])
    assert len({line.get_linestyle() for line in c.get_lines()}) == 2
    assert list(a.get_lines()[1].get_ydata()) == [45.0, 50.0, 55.0]


def test_a_free_run_keeps_a_linear_axis_and_its_plain_label() -> None:
    rows = [{**r, "slowdown_mean": 0.0} for r in _rows()]
    fig = draw_limits(rows, "LCG", (1, 4), 4)
    assert fig.axes[0].get_yscale() == "linear" and fig.axes[0].get_ylabel() == "average slowdown"
