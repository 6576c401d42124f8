"""Resampling a trace for repeated simulations: a seeded bootstrap of its weekly blocks.

A trace is one history; repeating a simulation on the very same jobs gives the same numbers
every time, so `isthmus simulate --repeat N` over a trace runs each repetition on a resampled
trace. The trace is cut into consecutive blocks of `block` seconds (a week by default; a day when the
trace spans less than two weeks, an hour when it spans less than two days) counted from its
first submit; a resampled trace
draws as many blocks as the trace has, uniformly with replacement (NumPy's generator seeded
with the repetition's seed), and lays them end to end in the order drawn, each job keeping its
offset inside its block. Jobs are renumbered 1..n in submit order. Blocks keep the daily and
weekly cycles and the bursts inside a week (a bootstrap of single jobs would scatter them), so
the spread over repetitions reflects how the results depend on which weeks were seen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from isthmus.model.job import Job

WEEK = 7 * 86400.0
DAY = 86400.0
HOUR = 3600.0


def block_length(jobs: Sequence[Job]) -> float:
    """The block of `resample_blocks`: a week; a day when the trace spans less than two weeks;
    an hour when it spans less than two days."""
    span = trace_span(jobs)
    return WEEK if span >= 2 * WEEK else DAY if span >= 2 * DAY else HOUR


def trace_span(jobs: Sequence[Job]) -> float:
    """Seconds from the first submit to the last (0 without jobs)."""
    return max(j.submit for j in jobs) - min(j.submit for j in jobs) if jobs else 0.0


def block_count(jobs: Sequence[Job], block: float) -> int:
    """How many blocks of `block` seconds the trace covers (the last one partly)."""
    return int(trace_span(jobs) // block) + 1 if jobs else 0


def resample_blocks(jobs: Sequence[Job], seed: int, block: float | None = None) -> list[Job]:
    """A bootstrap of `jobs`' blocks of `block` seconds (default `block_length`), seeded by `seed`."""
    if not jobs:
        return []
    size = block if block is not None else block_length(jobs)
    start = min(j.submit for j in jobs)
    by_block: dict[int, list[Job]] = {}
    for j in jobs:
        by_block.setdefault(int((j.submit - start) // size), []).append(j)
    count = max(by_block) + 1  # empty blocks (quiet weeks) are drawn too
    drawn = np.random.default_rng(seed).integers(0, count, size=count)
    out: list[tuple[float, Job]] = []
    for place, b in enumerate(drawn.tolist()):
        for j in by_block.get(b, ()):
            out.append((start + place * size + (j.submit - start - b * size), j))
    out.sort(key=lambda pair: pair[0])  # stable: equal times keep the trace's order
    return [dataclasses.replace(j, id=k, submit=t) for k, (t, j) in enumerate(out, start=1)]
