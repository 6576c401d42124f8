"""What a live manager keeps per peer and per forwarded or received job, and the small rules
of the peer protocol's connection: reading a peer's secret, granting a role at openConn
(Villegas dissertation Table 4.1). Used by `isthmus.federation.live`."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isthmus.engine.peering import PeerState
from isthmus.live.errors import RequestError
from isthmus.model.peers import PeerRole, PeerSettings, ResourceData
from isthmus.tls import check_plain_http, client_context

MIRROR = {PeerRole.PROVIDER: PeerRole.CONSUMER, PeerRole.CONSUMER: PeerRole.PROVIDER, PeerRole.BOTH: PeerRole.BOTH}
"""What a role is seen from the other side (a provider's peer is its consumer)."""


class InvalidFieldError(RequestError):
    """A field of a peer's message that is well-formed but wrong (the chain does not end with its
    sender, the body names another manager): answered 422 naming the field, like a schema error."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(422, message)
        self.loc = loc


class PeerConfigError(ValueError):
    """A peer's secret or CA file cannot be read (its variable is unset, its file missing or
    empty), or its address is plain HTTP outside loopback without `insecure_http`."""


def peer_verify(peer: PeerSettings) -> ssl.SSLContext | bool:
    """How an https `peer` is verified: an SSL context of its `ca_file`, else True (the trusted
    CAs). PeerConfigError when its CA file cannot be read, or its address is http:// to a host
    outside loopback and its entry does not set `insecure_http`."""
    try:
        check_plain_http(peer.address, peer.insecure_http, "its address", "insecure_http = true")
        return client_context(peer.ca_file) if peer.ca_file else True
    except ValueError as exc:
        raise PeerConfigError(f"peer {peer.name!r}: {exc}") from None


def load_secret(peer: PeerSettings) -> str:
    """The secret shared with `peer`, from its environment variable or file (never logged)."""
    if peer.token_env:
        value = os.environ.get(peer.token_env, "").strip()
        if not value:
            raise PeerConfigError(
                f"peer {peer.name!r}: environment variable {peer.token_env} (its token_env) is unset or empty"
            )
        return value
    try:
        value = Path(peer.token_file).expanduser().read_text().strip()
    except OSError as exc:
        raise PeerConfigError(
            f"peer {peer.name!r}: cannot read its token_file {peer.token_file}: {exc.strerror}"
        ) from None
    if not value:
        raise PeerConfigError(f"peer {peer.name!r}: its token_file {peer.token_file} is empty")
    return value


def grant(proposed: PeerRole, allowed: PeerRole) -> PeerRole | None:
    """The role a peer gets: what it proposed narrowed to what this manager's configuration
    allows it (None: nothing in common, e.g. it wants to consume from a manager that only
    consumes from it)."""
    if proposed is allowed or allowed is PeerRole.BOTH:
        return proposed
    if proposed is PeerRole.BOTH:
        return allowed
    return None


@dataclass
class PeerLink:
    """This manager's connection to one peer: the engine-visible `PeerState` (up, role, data,
    distance) and what the protocol needs (secret, agreed heartbeat, last heard, last error)."""

    settings: PeerSettings
    state: PeerState
    secret: str
    heartbeat: float
    opened: bool = False
    last_heard: float = -1.0
    error: str = ""
    sent: ResourceData | None = None
    beats: int = 0
    reconciling: bool = False

    @property
    def name(self) -> str:
        """The peer's manager name."""
        return self.settings.name


@dataclass
class Forwarded:
    """A job sent from here to a peer and not yet ended there (a row of `forwarded_jobs`)."""

    job_id: int
    peer: str
    chain: tuple[str, ...]
    spec: dict[str, Any]
    user: str
    submit: float
    remote_id: int | None = None
    state: str = "sending"
    site: str = ""
    sending: bool = False


@dataclass
class Received:
    """A job a peer forwarded here (a row of `received_jobs`)."""

    local_id: int
    origin: str
    origin_id: int
    sender: str
    sender_id: int
    chain: tuple[str, ...]


class ReceivedIndex:
    """Where the active received jobs are found by what a peer's message names them with. Every
    key starts with the sender, the peer authenticated for the request that delivered the job:
    a peer finds only the jobs it sent itself, so knowing (or guessing) the ids another peer
    uses neither merges its job into theirs nor lets it act on theirs."""

    def __init__(self) -> None:
        self._by_sender: dict[tuple[str, int], int] = {}
        self._by_origin: dict[tuple[str, str, int], int] = {}
        self._newest: dict[tuple[str, str], int] = {}

    def add(self, rec: Received) -> None:
        """Index a job received from `rec.sender`."""
        self._by_sender[(rec.sender, rec.sender_id)] = rec.local_id
        self._by_origin[(rec.sender, rec.origin, rec.origin_id)] = rec.local_id
        self.saw(rec.sender, rec.origin, rec.origin_id)

    def remove(self, rec: Received) -> None:
        """Forget an ended or handed-back job (the database still answers for it)."""
        self._by_sender.pop((rec.sender, rec.sender_id), None)
        self._by_origin.pop((rec.sender, rec.origin, rec.origin_id), None)

    def saw(self, sender: str, origin: str, origin_id: int) -> None:
        """Record that `sender` delivered origin id `origin_id` of `origin` (now or before a restart)."""
        key = (sender, origin)
        self._newest[key] = max(self._newest.get(key, 0), origin_id)

    def by_sender(self, sender: str, sender_id: int) -> int | None:
        """The local id of the active job `sender` sent as its job `sender_id`."""
        return self._by_sender.get((sender, sender_id))

    def by_origin(self, sender: str, origin: str, origin_id: int) -> int | None:
        """The local id of the active job `sender` sent for origin `origin`'s job `origin_id`."""
        return self._by_origin.get((sender, origin, origin_id))

    def maybe_seen(self, sender: str, origin: str, origin_id: int) -> bool:
        """False when `sender` surely never delivered this origin id (it is larger than any it
        delivered for `origin`), so the database need not be asked."""
        return origin_id <= self._newest.get((sender, origin), 0)
