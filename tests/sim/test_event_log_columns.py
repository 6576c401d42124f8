"""The event log's sparse columns (vm, slots, origin, task) materialized in chunks, whenever
`columns()` (vm: also `core_columns()` and `rows()`) is read, equal the values given to each
`append` (-1 when none; slots: a START's size when not given, else 0)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isthmus.model.events import EventKind, EventLog

event = st.tuples(
    st.sampled_from([int(EventKind.SUBMIT), int(EventKind.START), int(EventKind.END), int(EventKind.TASK_START)]),
    st.integers(0, 512),  # value (a START's size)
    st.sampled_from([0, 0, 1, 7, 2**31 - 1]),  # slots given (0: none)
    st.sampled_from([-1, -1, 0, 3]),  # origin
    st.sampled_from([-1, -1, 0, 2**40]),  # task
    st.booleans(),  # read the columns after this event
    st.sampled_from([-1, -1, -1, 0, 5, 2**31 - 1]),  # vm
    st.booleans(),  # read the core columns after this event
)


@settings(max_examples=80, deadline=None)
@given(st.lists(event, max_size=60))
def test_sparse_columns_hold_what_each_append_gave(
    events: list[tuple[int, int, int, int, int, bool, int, bool]],
) -> None:
    log = EventLog()
    for name in ("a", "b", "c", "d"):
        log.origin_index(name)  # origins 0-3 named
    for i, (kind, value, slots, origin, task, read, vm, read_core) in enumerate(events):
        if vm == -1 and i % 2:
            log.add(float(i), kind, i, 0, float(value), 1, -1)  # the hot path: no vm
            events[i] = (kind, value, 0, -1, -1, read, vm, read_core)
        else:
            log.append(float(i), kind, i, 0, vm, float(value), 1, -1, slots=slots, origin=origin, task=task)
        if read:
            assert len(log.columns()["slots"]) == i + 1
        if read_core:
            assert len(log.core_columns()["vm"]) == i + 1
    c = log.columns()
    start = int(EventKind.START)
    assert list(c["slots"]) == [s or (v if k == start else 0) for k, v, s, *_ in events]
    assert list(c["origin"]) == [e[3] for e in events]
    assert list(c["task"]) == [e[4] for e in events]
    assert list(c["vm"]) == list(log.core_columns()["vm"]) == [e[6] for e in events]
    assert [r[4] for r in log.rows()] == [log.event(i).vm for i in range(len(events))] == [e[6] for e in events]
    assert [log.event(i).task for i in range(len(events))] == [e[4] for e in events]
    log.append(99.0, int(EventKind.END), 1)  # the columns stay appendable after a read
    assert len(log.columns()["task"]) == len(events) + 1
    assert log.core_columns()["vm"][-1] == -1


def test_a_sparse_value_its_column_cannot_hold_is_an_error() -> None:
    log = EventLog()
    log.append(0.0, int(EventKind.START), 1, 0, -1, 4.0, 1, -1, origin=2**20)  # origin is int16
    with pytest.raises(OverflowError, match="origin"):
        log.columns()


def test_a_vm_its_column_cannot_hold_is_an_error() -> None:
    log = EventLog()
    log.append(0.0, int(EventKind.VM_LEASE), -1, 0, 2**31, 0.0)  # vm is int32
    with pytest.raises(OverflowError, match="vm"):
        log.core_columns()
