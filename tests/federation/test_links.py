"""The bookkeeping of received jobs (isthmus.federation.links.ReceivedIndex): every lookup is
keyed by the sender, so one peer's ids never find another peer's job."""

from __future__ import annotations

from isthmus.federation.links import Received, ReceivedIndex


def _rec(local: int, sender: str, sender_id: int, origin: str, origin_id: int) -> Received:
    chain = (origin, sender) if origin != sender else (sender,)
    return Received(local, origin, origin_id, sender, sender_id, chain)


def test_the_same_origin_id_from_two_senders_is_two_jobs() -> None:
    index = ReceivedIndex()
    a = _rec(10, "A", 5, "A", 5)
    index.add(a)
    # C naming A's origin id, as its own job or claiming A as the origin: not A's job
    assert index.by_origin("C", "C", 5) is None
    assert index.by_origin("C", "A", 5) is None
    c = _rec(11, "C", 900, "A", 5)
    index.add(c)
    assert index.by_origin("A", "A", 5) == 10
    assert index.by_origin("C", "A", 5) == 11
    assert index.by_sender("A", 5) == 10 and index.by_sender("C", 900) == 11
    # C's ids do not reach A's job
    assert index.by_sender("C", 5) is None and index.by_sender("B", 5) is None


def test_a_relay_forwarding_two_origins_with_the_same_id_keeps_them_apart() -> None:
    index = ReceivedIndex()
    index.add(_rec(20, "B", 1, "A", 7))
    index.add(_rec(21, "B", 2, "D", 7))
    assert index.by_origin("B", "A", 7) == 20 and index.by_origin("B", "D", 7) == 21


def test_removal_forgets_only_that_job_and_the_newest_id_is_per_sender_and_origin() -> None:
    index = ReceivedIndex()
    a, c = _rec(10, "A", 5, "A", 5), _rec(11, "C", 900, "A", 5)
    index.add(a)
    index.add(c)
    index.remove(a)
    assert index.by_origin("A", "A", 5) is None and index.by_sender("A", 5) is None
    assert index.by_origin("C", "A", 5) == 11
    # A's id 5 was delivered once (the database still answers for it); 6 surely never was
    assert index.maybe_seen("A", "A", 5) and not index.maybe_seen("A", "A", 6)
    # what C delivered says nothing of what A delivered
    index.saw("C", "A", 50)
    assert not index.maybe_seen("A", "A", 50) and index.maybe_seen("C", "A", 50)
    assert not index.maybe_seen("B", "A", 1)
