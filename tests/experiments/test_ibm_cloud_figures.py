"""The IBM enterprise-cloud figures drawn from made-up rows: titled with the environment, the
style's palette, Table 1's delays on a linear axis (the report gives a table, not a log figure)."""

from __future__ import annotations

import math

from matplotlib.container import BarContainer

from isthmus.experiments.ibm_cloud import ENVIRONMENT, SEED_DELAY, draw_delay, draw_series
from isthmus.metrics import style

CONFIGS = ("450", "300+75")
TRACES = ("CTC-SP2", "KTH-SP2")


def _rows() -> list[dict[str, object]]:
    return [
        {
            "trace": t,
            "config": c,
            **{f"delay_p{q}": (i + 1) * q * 10.0 for q in (50, 80, 90, 95)},
            "series_time": [0.0, 100.0, 200.0],
            "series_requested": [10, 40, 0],
            "series_allocated_base": [10, 30, 0],
            "series_allocated_cloud": [0, 10, 0],
        }
        for t in TRACES
        for i, c in enumerate(CONFIGS)
    ]


def test_table1_bars_are_linear_in_the_palette_with_the_report_as_dots() -> None:
    fig = draw_delay(_rows(), TRACES, CONFIGS)
    assert ENVIRONMENT in fig.get_suptitle()
    ctc, kth = fig.axes
    for ax in (ctc, kth):
        assert ax.get_yscale() == "linear" and ax.get_ylabel() == "delay time [s]"
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert [b.patches[0].get_facecolor()[:3] for b in bars] == [
            tuple(int(h[i : i + 2], 16) / 255 for i in (1, 3, 5)) for h in style.PALETTE[:2]
        ]
        assert [p.get_height() for p in bars[1].patches] == [1000.0, 1600.0, 1800.0, 1900.0]
    # the report's Table 1 only for CTC
    assert [list(line.get_ydata()) for line in ctc.get_lines()] == [list(SEED_DELAY[c]) for c in CONFIGS]
    assert not kth.get_lines()


def test_figs_7_and_8_name_the_environment_and_shade_the_cloud_window() -> None:
    figures = draw_series(_rows(), TRACES, (50.0, 150.0))
    assert set(figures) == {"fig7_one_cluster", "fig8_with_cloud"}
    for fig in figures.values():
        assert ENVIRONMENT in fig.get_suptitle()
        for ax in fig.axes:
            assert ax.get_ylim()[0] == 0 and ax.get_ylabel() == "processors"
    (one,) = figures["fig8_with_cloud"].axes[:1]
    colours = [line.get_color() for line in one.get_lines()]
    assert colours == [style.PALETTE[3], style.PALETTE[0], style.PALETTE[2]]
    assert math.isclose(one.patches[0].get_x(), 50.0)
