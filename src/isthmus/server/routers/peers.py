"""The peer protocol's routes (Villegas dissertation Table 4.1) and `GET /peers`.

Peer routes (`/peer/...`) are for peer managers only: each request names its manager in the
``X-Isthmus-Peer`` header and carries the secret shared with it as a bearer token (configured
per peer in ``[[peers]]``, by file or environment variable, never stored in the database). A
manager without peers answers 404 on them. Bodies are the strict models of
`isthmus.federation.protocol`: a malformed field gets a 422 naming it; a chain that loops or
does not end with the sender is refused. A peer finds only the jobs it sent here itself or that
were forwarded from here to it: any other job (another peer's, or none) answers 404 alike, so
its existence is not revealed. `GET /peers` is for users: each peer, its role, whether
it is up, when it was last heard and its latest resource data.
"""

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Response

from isthmus.federation.links import InvalidFieldError, PeerLink
from isthmus.federation.live import LiveFederation
from isthmus.federation.protocol import (
    PEER_HEADER,
    Heartbeat,
    JobRef,
    JobStatus,
    NotifyConn,
    NotifyJob,
    OpenConn,
    OpenConnReply,
    ResourceDataBody,
    SubmitJob,
    SubmitJobReply,
)
from isthmus.live.errors import RequestError
from isthmus.live.manager import Manager
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import errors
from isthmus.server.schemas import SubmitRequest


class SubmitJobRequest(SubmitJob):
    """submitJob's body: the job in this manager's job description language (the strict
    `SubmitRequest` of POST /jobs), with its chain and its ids at the origin and the sender."""

    job: SubmitRequest


_PEER = {
    "e401": f"missing {PEER_HEADER} header, unknown peer or wrong secret",
    "e404": "this manager has no peers",
}
_PEER_JOB = {
    **_PEER,
    "e404": "no peers here, or the sender sent no job with that id here (another peer's job answers the same)",
}
_BODY = {"e400": "the body is not UTF-8 JSON", "e413": "request body larger than the manager's limit"}


def peers_router(manager: Manager, fed: LiveFederation | None, auth: Auth) -> APIRouter:
    """The routes of the peer protocol for `manager` and its peers `fed` (None: it has none);
    `auth` authenticates users (for `GET /peers`)."""
    router = APIRouter()

    def federation() -> LiveFederation:
        if fed is None:
            raise RequestError(404, "this manager has no peers (no [[peers]] in its environment file)")
        return fed

    async def peer_of(
        authorization: Annotated[str | None, Header()] = None,
        x_isthmus_peer: Annotated[str | None, Header(description="the sending manager's name")] = None,
    ) -> PeerLink:
        return federation().authenticate(x_isthmus_peer, authorization)

    Peer = Annotated[PeerLink, Depends(peer_of)]  # noqa: N806
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806

    @router.post(
        "/peer/open",
        response_model=OpenConnReply,
        tags=["peers"],
        responses=errors(**_PEER, **_BODY, e409="no role or job description in common"),
    )
    async def open_conn(body: OpenConn, link: Peer) -> OpenConnReply:
        """openConn: negotiate the sender's role (consumer, provider or both), the heartbeat
        interval (the longer proposal) and the job description language."""
        return federation().on_open(link, body)

    @router.post("/peer/heartbeat", response_model=Heartbeat, tags=["peers"], responses=errors(**_PEER, **_BODY))
    async def heartbeat(body: Heartbeat, link: Peer) -> Heartbeat:
        """heartbeat: the sender is alive; answered with this manager's name and time."""
        if body.manager != link.name:
            raise InvalidFieldError(
                ("body", "manager"), f"the body names manager {body.manager!r}, the request comes from {link.name!r}"
            )
        return Heartbeat(manager=manager.env.name, time=time.time())

    @router.post("/peer/notify-conn", status_code=204, tags=["peers"], responses=errors(**_PEER, **_BODY))
    async def notify_conn(body: NotifyConn, link: Peer) -> Response:
        """notifyConn: an error on the connection or its graceful end; the sender is marked down
        and gets no jobs until it opens the connection again."""
        if body.manager != link.name:
            raise InvalidFieldError(
                ("body", "manager"), f"the body names manager {body.manager!r}, the request comes from {link.name!r}"
            )
        federation().on_notify_conn(link, body)
        return Response(status_code=204)

    @router.get("/peer/resources", response_model=ResourceDataBody, tags=["peers"], responses=errors(**_PEER))
    async def request_resource_data(link: Peer) -> dict[str, Any]:
        """requestResourceData: this manager's resource data now, in full, per site."""
        return federation().resources()

    @router.post(
        "/peer/resources",
        status_code=204,
        tags=["peers"],
        responses=errors(**_PEER, **_BODY, e403="the sender is configured as a consumer only"),
    )
    async def send_resource_data(body: ResourceDataBody, link: Peer) -> Response:
        """sendResourceData: a provider's resource data, pushed when it changed by its threshold."""
        federation().on_push(link, body)
        return Response(status_code=204)

    @router.post(
        "/peer/jobs",
        status_code=201,
        response_model=SubmitJobReply,
        tags=["peers"],
        responses=errors(
            **_PEER,
            **_BODY,
            e403="the sender may not forward jobs here (configured as a provider only)",
            e409="a forwarding loop, too many hops, or no site here can run the job",
            e503="the manager cannot store it now or is stopping: send it again",
        ),
    )
    async def submit_job(body: SubmitJobRequest, link: Peer) -> SubmitJobReply:
        """submitJob: run a forwarded job here; answers its local id (the same for a repeated
        request from the same sender with the same origin and origin id)."""
        spec = body.job.model_dump(exclude_none=True)
        return SubmitJobReply(id=await federation().on_submit(link, body, spec))

    @router.post(
        "/peer/jobs/notify",
        status_code=204,
        tags=["peers"],
        responses=errors(
            **{**_PEER, "e404": "no peers here, or no such job forwarded from here to the sender is open"},
            **_BODY,
            e409="the remote id does not match the one recorded",
        ),
    )
    async def notify_job(body: NotifyJob, link: Peer) -> Response:
        """notifyJob: the state of a job this manager forwarded to the sender (404: none open
        with that id and origin, also when it was forwarded to another peer)."""
        federation().on_notify_job(link, body)
        return Response(status_code=204)

    @router.post(
        "/peer/jobs/query",
        response_model=JobStatus,
        tags=["peers"],
        responses=errors(**_PEER_JOB, **_BODY),
    )
    async def query_job(body: JobRef, link: Peer) -> JobStatus:
        """queryJob: the state of a job the sender forwarded here, following the chain (404:
        the sender sent no such job here)."""
        return await federation().on_query(link, body.sender_id)

    @router.post(
        "/peer/jobs/cancel",
        response_model=JobStatus,
        tags=["peers"],
        responses=errors(**_PEER_JOB, **_BODY, e503="the next manager on the chain cannot be reached"),
    )
    async def cancel_job(body: JobRef, link: Peer) -> JobStatus:
        """cancelJob: cancel a job the sender forwarded here, following the chain (404: the
        sender sent no such job here)."""
        return await federation().on_cancel(link, body.sender_id)

    @router.get("/peers", tags=["resources"], responses=errors(e401="missing, malformed or unknown token"))
    async def peers(p: User) -> list[dict[str, Any]]:
        """The peer managers: role, up or down, last heard, heartbeat, the jobs forwarded to
        them and received from them, their latest resource data (empty without peers)."""
        return fed.describe() if fed is not None else []

    return router
