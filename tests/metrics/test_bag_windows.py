"""Bag figures over a window and the launchers' preemption delays, from hand-built event logs."""

from __future__ import annotations

import math

import pytest

from isthmus.metrics.bags import bag_windows, preemption_delays, spread
from isthmus.model.events import EventKind, EventLog


def log() -> EventLog:
    """Bag 7 grows by 2 at 0 on site 0 (slots 1, 2); task 0 ends at 3 and 1 at 4; slot 2 is
    preempted at 5 and released at 5.25; bag 8 grows by 1 at 6 and its task ends at 9."""
    g = EventLog()
    g.append(0.0, EventKind.BAG_SUBMIT, 7, -1, -1, 10.0)
    g.append(0.0, EventKind.GROW, 7, 0, -1, 2.0)
    g.append(3.0, EventKind.TASK_END, 7, 0, 1, 3.0, task=0)
    g.append(4.0, EventKind.TASK_END, 7, 0, 2, 4.0, task=1)
    g.append(5.0, EventKind.SHRINK, 7, 0, -1, 1.0)
    g.append(5.0, EventKind.TASK_PREEMPT, 7, 0, 2, 1.0, task=2)
    g.append(5.25, EventKind.BAG_RELEASE, 7, 0, 2, 1.0)
    g.append(6.0, EventKind.GROW, 8, 0, -1, 1.0)
    g.append(9.0, EventKind.TASK_END, 8, 0, 3, 3.0, task=0)
    return g


def test_bag_windows_count_ends_and_preemptions_and_average_the_processors_held() -> None:
    a, b = bag_windows(log(), [7, 8], 2.0, 8.0)
    # bag 7: ends at 3 and 4, one preemption; held 2 from 2 to 5.25, then 1 until 8: (6.5 + 2.75) / 6
    assert (a.bag, a.done, a.preemptions) == (7, 2, 1)
    assert a.per_minute == pytest.approx(20.0)
    assert a.mean_held == pytest.approx(9.25 / 6)
    # bag 8: no end before 8; held 1 from 6 to 8
    assert (b.done, b.preemptions, b.mean_held) == (0, 0, pytest.approx(2 / 6))
    # the end of the window is left out, its start counted
    assert [w.done for w in bag_windows(log(), [7, 8], 3.0, 9.0)] == [2, 0]
    with pytest.raises(ValueError, match="must end after it starts"):
        bag_windows(log(), [7], 5.0, 5.0)


def test_preemption_delays_pair_each_preempted_slot_with_its_release() -> None:
    assert preemption_delays(log()) == [0.25]


def test_spread_is_relative_to_the_slowest() -> None:
    assert spread([10.0, 12.0, 15.0]) == pytest.approx(0.5)
    assert spread([0.0, 1.0]) == math.inf
    assert math.isnan(spread([]))
