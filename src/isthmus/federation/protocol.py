"""The peer protocol's messages over HTTP (Villegas dissertation ch. 4, Table 4.1).

Every request body is a strict pydantic model (unknown fields, wrong types, non-finite numbers,
null bytes refused with a 422 naming the field), since a peer is a separate administrative
domain and its input is untrusted. Operations and their routes (isthmus.server.routers.peers):

==================  ==========================  =============================================
Table 4.1           route                       body / answer
==================  ==========================  =============================================
openConn            POST /peer/open             `OpenConn` / `OpenConnReply`
heartbeat           POST /peer/heartbeat        `Heartbeat` / `Heartbeat`
notifyConn          POST /peer/notify-conn      `NotifyConn` / 204
requestResourceData GET  /peer/resources        - / `ResourceDataBody` (full)
sendResourceData    POST /peer/resources        `ResourceDataBody` / 204 (pushed on change)
submitJob           POST /peer/jobs             `SubmitJob` / `SubmitJobReply` (local id)
notifyJob           POST /peer/jobs/notify      `NotifyJob` / 204
queryJob            POST /peer/jobs/query       `JobRef` / `JobStatus` (follows the chain; 404)
cancelJob           POST /peer/jobs/cancel      `JobRef` / `JobStatus` (follows the chain; 404)
==================  ==========================  =============================================

A request is authenticated by the secret shared with the peer it names:
``Authorization: Bearer <secret>`` and ``X-Isthmus-Peer: <its manager name>``. Every job
message is bound to that peer: a job is found only by the peer that sent it (queryJob,
cancelJob) or that it was forwarded to (notifyJob); any other answers 404.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from isthmus.model.peers import ResourceData, SiteSummary
from isthmus.model.states import JobState

PEER_HEADER = "X-Isthmus-Peer"
"""The header naming the manager a peer request comes from."""

JOB_DESCRIPTION = "isthmus-submit/1"
"""The job description language this manager speaks: the body of POST /jobs (`SubmitRequest`,
which the route validates `SubmitJob.job` against: isthmus.server.routers.peers)."""

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
INT64_MAX = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(v: str) -> str:
    if "\x00" in v or _SURROGATE.search(v):
        raise ValueError("must not contain a null byte or a lone UTF-16 surrogate")
    return v


CleanStr = Annotated[str, AfterValidator(_clean), Field(json_schema_extra={"pattern": "^[^\\u0000]*$"})]
"""Text without null bytes or lone surrogates (what the database and JSON encoder accept)."""

ManagerName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
"""A manager's name (its environment's name)."""
JobNo = Annotated[int, Field(ge=1, le=INT64_MAX)]
Count = Annotated[int, Field(ge=0, le=10**9)]
Role = Literal["consumer", "provider", "both"]
UserName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Stamp = Annotated[float, Field(ge=0, le=1e11)]


class OpenConn(BaseModel):
    """openConn: the sender proposes the role it takes towards the receiver (a *consumer*
    forwards jobs to the receiver, a *provider* runs the receiver's jobs, or both), a heartbeat
    interval and the job description languages it speaks."""

    model_config = _STRICT
    manager: ManagerName
    role: Role
    heartbeat: float = Field(gt=0, le=3600, description="seconds between heartbeats the sender proposes")
    job_description: list[Annotated[CleanStr, Field(max_length=64)]] = Field(min_length=1, max_length=16)


class OpenConnReply(BaseModel):
    """The receiver's answer to openConn: the role granted to the sender (the proposal narrowed
    to what the receiver's configuration allows), the heartbeat interval both use (the longer
    of the two proposals) and the job description language chosen."""

    model_config = _STRICT
    manager: ManagerName
    role: Role
    heartbeat: float = Field(gt=0, le=3600)
    job_description: Annotated[CleanStr, Field(max_length=64)]


class Heartbeat(BaseModel):
    """heartbeat: the sender is alive at `time` (wall seconds)."""

    model_config = _STRICT
    manager: ManagerName
    time: Stamp


class NotifyConn(BaseModel):
    """notifyConn: an error on the connection, or its graceful end (`close`): the receiver
    marks the sender down and sends it no jobs until it opens the connection again."""

    model_config = _STRICT
    manager: ManagerName
    kind: Literal["error", "close"]
    message: CleanStr = Field("", max_length=1000)


class SiteBody(BaseModel):
    """One site in a resource-data message (`isthmus.model.peers.SiteSummary`)."""

    model_config = _STRICT
    name: Annotated[CleanStr, Field(min_length=1, max_length=128)]
    is_cloud: bool
    available: bool
    processors: Count
    max_processors: Count
    idle: Count
    busy: Count
    queued_jobs: Count
    queued_processors: Count


class ResourceDataBody(BaseModel):
    """requestResourceData's answer and sendResourceData's body: a manager's resources per site."""

    model_config = _STRICT
    manager: ManagerName
    time: Stamp
    queued_jobs: Count
    queued_processors: Count
    sites: list[SiteBody] = Field(max_length=10000)

    def to_data(self) -> ResourceData:
        """The engine's `ResourceData`."""
        return ResourceData(
            manager=self.manager,
            time=self.time,
            sites=tuple(SiteSummary(**s.model_dump()) for s in self.sites),
            queued_jobs=self.queued_jobs,
            queued_processors=self.queued_processors,
        )


class SubmitJob(BaseModel):
    """submitJob: run `job` (the origin's submit request) here. `chain` lists the managers it
    visited, its origin first and the sender last; `origin_id` is its id at the origin (it keeps
    it everywhere), `sender_id` its id at the sender (what notifyJob names it by). A repeated
    submitJob from the same sender for the same origin and origin id answers the same local id
    (idempotent); another sender's is another job."""

    model_config = _STRICT
    origin_id: JobNo
    sender_id: JobNo
    chain: list[ManagerName] = Field(min_length=1, max_length=16)
    user: UserName
    submit_time: Stamp
    job: Any = Field(description="the job in the agreed job description language (the API's SubmitRequest)")

    @model_validator(mode="after")
    def _no_loop(self) -> SubmitJob:
        if len(set(self.chain)) != len(self.chain):
            raise ValueError(f"the chain visits a manager twice (a forwarding loop): {' > '.join(self.chain)}")
        if len(self.chain) == 1 and self.origin_id != self.sender_id:
            raise ValueError("a job sent by its origin (a chain of one) has sender_id equal to origin_id")
        return self


class SubmitJobReply(BaseModel):
    """The receiver's local id for a job it accepted."""

    model_config = _STRICT
    id: JobNo


RETURNED = "returned"
"""notifyJob's state of a job handed back unstarted (the IBM seed's FAILED: its sender reschedules it)."""

PEER_JOB_STATES: tuple[str, ...] = (*(s.value for s in JobState if s is not JobState.UNKNOWN), RETURNED)
"""The job states notifyJob carries: every `JobState` a peer can know (not UNKNOWN), and `RETURNED`."""


def _peer_state(v: str) -> str:
    if v not in PEER_JOB_STATES:
        raise ValueError(f"expected one of {', '.join(PEER_JOB_STATES)}")
    return v


JobStateWord = Annotated[str, AfterValidator(_peer_state), Field(json_schema_extra={"enum": list(PEER_JOB_STATES)})]
"""A job state in a notifyJob message: one of `PEER_JOB_STATES` (derived from `JobState`)."""


class NotifyJob(BaseModel):
    """notifyJob: the state of a job the receiver forwarded to the sender, sent back along the
    chain. `job_id` is the receiver's id for it (`sender_id` of its submitJob), `remote_id` the
    sender's; `returned`: handed back unstarted (the IBM seed's FAILED: reschedule it)."""

    model_config = _STRICT
    job_id: JobNo
    remote_id: JobNo
    origin: ManagerName
    origin_id: JobNo
    state: JobStateWord
    where: CleanStr = Field("", max_length=300, description="manager/site it runs at, or where it went")
    exit_code: int | None = Field(None, ge=-(2**31), le=2**31 - 1)
    time: Stamp
    reason: CleanStr = Field("", max_length=2000)


class JobRef(BaseModel):
    """queryJob / cancelJob: the job the sender forwarded here, by the sender's id for it."""

    model_config = _STRICT
    sender_id: JobNo


class JobStatus(BaseModel):
    """What a manager knows of a job forwarded to it, following the chain to where it is
    (`known` False: it holds no such job; a manager answers that with a 404, and reads either
    as the peer not holding it)."""

    model_config = _STRICT
    id: Annotated[int, Field(ge=0, le=INT64_MAX)]
    state: Annotated[CleanStr, Field(max_length=16)]
    where: Annotated[CleanStr, Field(max_length=300)]
    exit_code: int | None = Field(None, ge=-(2**31), le=2**31 - 1)
    reason: Annotated[CleanStr, Field(max_length=2000)] = ""
    known: bool = True
