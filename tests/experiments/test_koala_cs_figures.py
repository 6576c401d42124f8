"""The KOALA-CS figures drawn from made-up rows: titled with the environment, the style's
palette and a line style per series, linear axes from 0 (the thesis draws no log axis here)."""

from __future__ import annotations

from matplotlib.container import BarContainer

from isthmus.experiments.koala_cs import DELAY_POLICIES, IDEAL_MAKESPAN, draw_delay_vs_preemption, draw_launcher
from isthmus.metrics import style


def test_table41_bars_name_the_cluster_and_colour_launcher_and_direct_apart() -> None:
    rows = [
        {"method": "launcher", "pull_latency": 0.5, "period": None, "makespan": 480.0},
        {"method": "direct", "pull_latency": None, "period": 0, "makespan": 470.0},
        {"method": "direct", "pull_latency": None, "period": 30, "makespan": 700.0},
    ]
    fig = draw_launcher(rows)
    assert "delft" in fig.get_suptitle() and "68-node" in fig.get_suptitle()
    (ax,) = fig.axes
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [p.get_height() for p in bars.patches] == [480.0, 470.0, 700.0]
    colours = {p.get_facecolor()[:3] for p in bars.patches}
    assert len(colours) == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["launcher\npull 0.5 s", "direct\nevent", "direct\n30 s"]
    assert IDEAL_MAKESPAN in [line.get_ydata()[0] for line in ax.get_lines()]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and ax.get_ylabel() == "makespan [s]"


def test_delay_figure_is_linear_with_a_style_per_policy() -> None:
    ps = (0.0, 10.0, 30.0)
    rows = [
        {"allocation": label, "preemption_time": p, "shrink_wait_max": p + i, "delay_mean": p / 2 + i}
        for i, (label, _, _) in enumerate(DELAY_POLICIES)
        for p in ps
    ]
    fig = draw_delay_vs_preemption(rows, ps)
    assert "das3" in fig.get_suptitle()
    wait, delay = fig.axes
    for ax in (wait, delay):
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and ax.get_ylabel().endswith("[s]")
    n = len(DELAY_POLICIES)
    lines = delay.get_lines()[:n]
    assert [line.get_label() for line in lines] == [label for label, _, _ in DELAY_POLICIES]
    assert [line.get_color() for line in lines] == list(style.PALETTE[:n])
    assert len({line.get_marker() for line in lines}) == n
    assert list(lines[1].get_ydata()) == [1.0, 6.0, 16.0]
