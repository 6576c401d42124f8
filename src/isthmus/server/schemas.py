"""Request and response bodies of the REST API (pydantic 2); invalid requests get a 422 naming the field.

Every request model is strict: unknown fields, non-finite numbers (NaN, ±Infinity), integers
outside 64 bits, null bytes and lone UTF-16 surrogates are refused, so nothing the database,
the JSON encoder or a pilot's exec() cannot take is ever stored.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from isthmus.live.bagspec import MAX_COMMAND, MAX_PARAMS, MAX_TASKS, BagSpecError, check_command, expand_sweep
from isthmus.model.states import JobState

Priority = Literal["super-high", "high", "low", "super-low"]
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SURROGATE = re.compile("[\ud800-\udfff]")

INT64_MAX = 2**63 - 1
MAX_RUNTIME = 1e9  # seconds (about 31 years): larger estimates are mistakes, not plans


def _clean(v: str) -> str:
    """`v` unchanged; ValueError when it holds a null byte or a lone surrogate."""
    if "\x00" in v:
        raise ValueError("must not contain a null byte (\\u0000)")
    if _SURROGATE.search(v):
        raise ValueError("must not contain a lone UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode text")
    return v


# The JSON schema states what the validators check (so clients and schema-driven fuzzers see
# it); lone surrogates have no JSON-schema form: they are refused by `_clean` alone.
_NO_NUL = "^[^\\u0000]*$"
CleanStr = Annotated[str, AfterValidator(_clean), Field(json_schema_extra={"pattern": _NO_NUL})]
"""A string without null bytes or lone surrogates (what exec(), PostgreSQL and UTF-8 all accept)."""
_ENV_KEY_SCHEMA = "^(?!ISTHMUS_)[A-Za-z_][A-Za-z0-9_]*$"
EnvKey = Annotated[str, Field(max_length=256, json_schema_extra={"pattern": _ENV_KEY_SCHEMA})]
JobStateName = JobState
"""A job state by its name: the one vocabulary of model/states.py."""


def _integral(v: Any) -> Any:
    """1.0 as 1 (JSON has one number type; JSON Schema counts 1.0 as an integer); anything else unchanged."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


_INTEGRAL = BeforeValidator(_integral)
# Integers given as 3 or 3.0 (never true, "3" or 3.5: the request models are strict). The
# bounds come before the validator, so that the JSON schema carries them as minimum/maximum.
Id = Annotated[int, Field(ge=0, le=INT64_MAX), _INTEGRAL]
"""A non-negative integer that fits the database's 64-bit columns."""
Size = Annotated[int, Field(ge=1, le=1_000_000), _INTEGRAL]
Cores = Annotated[int, Field(ge=1, le=4096), _INTEGRAL]
MemoryMb = Annotated[int, Field(ge=1, le=2**40), _INTEGRAL]
ExitCode = Annotated[int, Field(ge=-(2**31), le=2**31 - 1), _INTEGRAL]
Pid = Annotated[int, Field(ge=0, le=2**31 - 1), _INTEGRAL]

# strict: no silent coercion (true is not 1, "1" is not 1): a request either matches the schema or gets 422
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


def _env_schema(schema: dict[str, Any]) -> None:
    """JSON schema of `env`: names as `propertyNames`, string values as `additionalProperties`
    (pydantic would make the name pattern a `patternProperties`, leaving other names unconstrained)."""
    values = next(iter(schema.pop("patternProperties", {}).values()), {"type": "string"})
    schema["propertyNames"] = {**schema.get("propertyNames", {}), "pattern": _ENV_KEY_SCHEMA}
    schema["additionalProperties"] = values


class VmRequest(BaseModel):
    """VM requirements of a job (Cloud Scheduler job attributes, Appendix I); every field
    optional. A job no site can ever match is refused with 400 naming the field (docs/clouds.md)."""

    model_config = _STRICT
    vm_type: CleanStr | None = Field(None, min_length=1, max_length=64, description="instance type name (VMType)")
    image: CleanStr | None = Field(None, min_length=1, max_length=256, description="image name or provider id (VMAMI)")
    cpu_arch: CleanStr | None = Field(None, min_length=1, max_length=32, description="CPU architecture (VMCPUArch)")
    cores: Cores | None = Field(None, description="cores per VM, at least (VMCPUCores)")
    memory_mb: MemoryMb | None = Field(None, description="memory per VM in MB, at least (VMMem)")
    storage_gb: float | None = Field(None, gt=0, le=1e9, description="disk per VM in GB, at least (VMStorage)")
    network: CleanStr | None = Field(None, min_length=1, max_length=64, description="network (VMNetwork)")


class RunSettings(BaseModel):
    """What a job's or a bag's processes start with: extra environment variables and the
    working directory."""

    model_config = _STRICT
    env: dict[EnvKey, Annotated[CleanStr, Field(max_length=65536)]] = Field(
        default_factory=dict, max_length=1000, description="extra environment variables", json_schema_extra=_env_schema
    )
    cwd: CleanStr | None = Field(
        None,
        max_length=4096,
        description="absolute working directory; default: the job's spool directory (a bag: its task output directory)",
        json_schema_extra={"pattern": "^/[^\\u0000]*$"},
    )

    @field_validator("env")
    @classmethod
    def _env_keys(cls, v: dict[str, str]) -> dict[str, str]:
        return _env_names(v)

    @field_validator("cwd")
    @classmethod
    def _cwd_absolute(cls, v: str | None) -> str | None:
        return _absolute_cwd(v)


class SubmitRequest(RunSettings):
    """A job: a command with arguments run on `size` processors of one site."""

    model_config = _STRICT
    command: CleanStr = Field(..., min_length=1, max_length=4096, description="program to run (PATH is searched)")
    args: list[Annotated[CleanStr, Field(max_length=65536)]] = Field(default_factory=list, max_length=10000)
    size: Size = Field(1, description="processors (slots) on one site")
    requested_runtime: float | None = Field(
        None, gt=0, le=MAX_RUNTIME, description="user's runtime estimate in seconds (finite, > 0)"
    )
    priority: Priority = "high"
    name: CleanStr | None = Field(None, max_length=128)
    vm: VmRequest | None = None
    script: str | None = Field(
        None, max_length=1_048_576, description="batch script text, run instead of `command` (copied at submission)"
    )
    output: str | None = Field(
        None,
        max_length=4096,
        description="absolute stdout file; %j job id, %x name, %u user, %A/%a array ids, %% a literal %",
    )
    error: str | None = Field(
        None, max_length=4096, description="absolute stderr file (default: the output file); %j, %% as in output"
    )

    @field_validator("script")
    @classmethod
    def _script_text(cls, v: str | None) -> str | None:
        if v is not None and "\x00" in v:
            raise ValueError("the script contains a null byte")
        return v

    @field_validator("output", "error")
    @classmethod
    def _output_path(cls, v: str | None) -> str | None:
        from isthmus.backends.jobfiles import check_template

        if v is None:
            return v
        if "\x00" in v:
            raise ValueError("the path contains a null byte")
        if not v.startswith("/"):
            raise ValueError(f"output and error paths must be absolute, got {v!r}")
        return check_template(v)


def _env_names(v: dict[str, str]) -> dict[str, str]:
    """`v` if its keys are environment variable names a user may set, else ValueError."""
    for k in v:
        if not _ENV_KEY.fullmatch(k):
            raise ValueError(f"invalid environment variable name {k!r}")
        if k.startswith("ISTHMUS_"):
            raise ValueError(f"{k!r}: ISTHMUS_* variables are set by the manager")
    return v


def _absolute_cwd(v: str | None) -> str | None:
    """`v` if it is None or an absolute path, else ValueError."""
    if v is not None and not v.startswith("/"):
        raise ValueError(f"working directory must be an absolute path, got {v!r}")
    return v


class SweepRequest(BaseModel):
    """A parameter sweep: `template` with ``{name}`` placeholders and ``NAME=VALUES`` parameters
    (``1..1000``, ``a,b,c`` or one value; several give their cartesian product)."""

    model_config = _STRICT
    template: CleanStr = Field(..., min_length=1, max_length=MAX_COMMAND, description="shell command line template")
    params: list[Annotated[CleanStr, Field(min_length=1, max_length=65536)]] = Field(
        ..., min_length=1, max_length=MAX_PARAMS, description="NAME=VALUES, e.g. x=1..1000 or y=a,b,c"
    )

    @model_validator(mode="after")
    def _expands(self) -> SweepRequest:
        try:
            expand_sweep(self.template, self.params)
        except BagSpecError as exc:
            raise ValueError(str(exc)) from None
        return self

    def expand(self) -> list[str]:
        """The tasks' command lines."""
        return expand_sweep(self.template, self.params)


class BagRequest(RunSettings):
    """A bag of tasks (docs/bags.md): one shell command line per task, given as `tasks` or as a
    `sweep`; it runs on processors no other job needs, growing and shrinking by the fair-share
    policy. A task exiting non-zero runs again up to `retries` times."""

    model_config = _STRICT
    tasks: list[Annotated[CleanStr, Field(min_length=1, max_length=MAX_COMMAND)]] | None = Field(
        None, min_length=1, max_length=MAX_TASKS, description="one shell command line per task"
    )
    sweep: SweepRequest | None = None
    retries: Annotated[int, Field(ge=0, le=100), _INTEGRAL] = Field(0, description="runs again of a failed task")
    name: CleanStr | None = Field(None, min_length=1, max_length=128)

    @field_validator("tasks")
    @classmethod
    def _task_lines(cls, v: list[str] | None) -> list[str] | None:
        for i, command in enumerate(v or []):
            try:
                check_command(command, f"task {i}")
            except BagSpecError as exc:
                raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _one_source(self) -> BagRequest:
        if (self.tasks is None) == (self.sweep is None):
            raise ValueError("give the tasks either as `tasks` (a list of command lines) or as a `sweep`, not both")
        return self

    def commands(self) -> list[str]:
        """The command line of every task, in task order."""
        return list(self.tasks) if self.tasks is not None else self.sweep.expand()  # type: ignore[union-attr]


class BagNode(BaseModel):
    """Processors a bag holds on one pilot node."""

    site: str
    node: str
    processors: int


class BagProgress(BaseModel):
    """Where a bag of tasks stands: its tasks by state, its throughput and what it holds now."""

    tasks: int
    done: int
    running: int
    failed: int
    queued: int
    retries: int
    throughput: float | None = Field(description="tasks completed per second since it first held a processor")
    held: dict[str, int] = Field(description="processors held per site now (those being preempted excluded)")
    nodes: list[BagNode] = Field(default_factory=list, description="the pilot nodes its launchers run on now")


class BagInfo(BaseModel):
    """A bag of tasks in a list of bags."""

    id: int
    user: str
    name: str
    state: str
    submit_time: float
    start_time: float | None
    end_time: float | None
    progress: BagProgress


class TaskResult(BaseModel):
    """One task in a bag's results index (KOALA-CS thesis §3.5.4): its command line, where its
    output went and how it ended."""

    task: int
    command: str
    state: str
    attempts: int
    exit_code: int | None
    runtime: float | None
    end_time: float | None
    node: str | None
    output: str = Field(description="its stdout file")
    error: str = Field(description="its stderr file")


class SubmitResponse(BaseModel):
    """The id of the submitted job."""

    id: int


class StopRequest(BaseModel):
    """How to stop the manager: running jobs go on ("detach"), are killed ("kill"), or finish
    first while nothing new starts ("drain")."""

    model_config = _STRICT
    mode: Literal["detach", "kill", "drain"] = "detach"
    release: bool = Field(
        False,
        description="Terminate every VM this manager leased once its running jobs have ended or been "
        'requeued (a "detach" stop then kills them: they are requeued at the next start).',
    )


class StopResponse(BaseModel):
    """The stop under way and how many jobs, and bags' tasks, were running when it began."""

    mode: str
    running: int
    tasks: int = Field(0, description="bags' tasks running (a drain lets them finish; no new one starts)")


class ErrorResponse(BaseModel):
    """Every 4xx answer except 422: what was wrong, in words."""

    detail: str


class HistoryItem(BaseModel):
    """One state a job went through."""

    time: float
    state: str
    run: int
    detail: str


class JobInfo(BaseModel):
    """A job as the API shows it."""

    id: int
    user: str
    name: str
    state: str
    size: int
    priority: str
    requested_runtime: float | None
    site: str | None
    slots: list[Any]
    run: int
    restarts: int
    exit_code: int | None
    submit_time: float
    start_time: float | None
    end_time: float | None
    runtime: float | None
    spec: dict[str, Any]
    reason: str | None = None
    reason_code: str | None = Field(
        None, description="while queued: the status code of why it waits (no capacity, over budget, held, ...)"
    )
    reason_policy: str | None = Field(None, description="while queued: the policy whose decision or rule holds it")
    history: list[HistoryItem] | None = None
    forwarded: dict[str, Any] | None = Field(
        None, description="a job forwarded to a peer manager: peer, its id there, state and site there, chain"
    )
    received: dict[str, Any] | None = Field(
        None, description="a job a peer manager forwarded here: origin, its id there, sender, chain"
    )
    bag: BagProgress | None = Field(None, description="a bag of tasks: its progress")


class TokenRequest(BaseModel):
    """Create a token for `user` (created if missing)."""

    model_config = _STRICT
    user: str = Field(..., json_schema_extra={"pattern": _USER.pattern})
    admin: bool = False
    expires_in: float | None = Field(None, gt=0, le=100 * 365 * 86400, description="seconds until it is refused")

    @field_validator("user")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _USER.fullmatch(v):
            raise ValueError("user names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v


class TokenResponse(BaseModel):
    """A new token; it is shown only once."""

    user: str
    token: str
    admin: bool
    id: str = Field(description="what `GET /tokens` and `DELETE /tokens/{id}` name it by")
    expires: float | None = Field(None, description="wall time after which it is refused")


class TokenInfo(BaseModel):
    """A user token as the admin sees it: never the token itself."""

    id: str
    user: str
    created: float
    expires: float | None = None


class AccountingRow(BaseModel):
    """One user's, site's or policy's figures over an accounting window (see live/accounting.py)."""

    key: str
    jobs: int
    completed: int
    processor_hours: float
    vm_hours: float | None = None
    charged_cost: float | None = None
    mean_wait: float | None = None
    mean_bounded_slowdown: float | None = None


class BudgetRow(BaseModel):
    """One budget cap now: what it covers, its limit, and in its current period what it spent,
    committed and has left (docs/clouds.md, "Budgets")."""

    name: str
    sites: list[str]
    users: list[str] = Field(default_factory=list, description="users it covers (empty: everyone)")
    period: str | None
    on_limit: str = Field("requeue", description='"requeue" or "finish"')
    current: str  # the period now ("" for a total cap, "YYYY-MM-DD", "YYYY-MM")
    limit: float
    spent: float = Field(description="charged increments (each charged when it starts)")
    committed: float = Field(0.0, description="increments reserved for running jobs by finish caps, not yet charged")
    left: float = Field(description="limit - spent - committed")
    refused_leases: int = Field(0, description="VMs whose lease it refused since the manager started")
    released_vms: int = Field(0, description="VMs released at a boundary it could not pay since the manager started")


class BudgetUpdate(BaseModel):
    """A new limit for a budget cap (admin)."""

    model_config = ConfigDict(extra="forbid")

    limit: float = Field(ge=0, le=1e12, allow_inf_nan=False, description="dollars")


class ForecastRequest(BaseModel):
    """What to forecast: the live configuration, or another policy or budget ("what if")."""

    model_config = _STRICT
    allocation: str | None = Field(
        None, min_length=1, max_length=64, description="allocation policy name (default: the live one)"
    )
    provisioning: str | None = Field(
        None, min_length=1, max_length=64, description="provisioning policy name (default: the live one)"
    )
    budget: float | None = Field(None, ge=0, le=1e12, description="budget cap in $ (default: the live one)")
    no_budget: bool = Field(False, description="forecast without any budget cap")
    horizon: float = Field(7 * 86400.0, gt=0, le=366 * 86400.0, description="seconds to simulate ahead at most")
    environment: CleanStr | None = Field(
        None,
        max_length=262_144,
        description="what if the manager ran this whole environment (TOML or YAML text, its own policies); "
        "the sites running jobs or holding VMs now must be in it by name",
    )
    environment_format: Literal["toml", "yaml"] = Field("toml", description="the format of `environment`")
    add_sites: CleanStr | None = Field(
        None, max_length=65_536, description="what if these sites were added: TOML text of [[sites]] tables"
    )


class JobForecastItem(BaseModel):
    """When a job is expected to start and end (null: not within the horizon), and where."""

    job: int
    user: str
    size: int
    state: str
    start: float | None
    end: float | None
    site: str | None
    runtime_basis: str


class ForecastResponse(BaseModel):
    """A forecast of the live queue under one configuration."""

    now: float
    allocation: str
    provisioning: str
    budget: float | None
    horizon: float
    spend: float
    unfinished: int
    jobs: list[JobForecastItem]


class RunningTask(BaseModel):
    """A run a pilot is executing."""

    model_config = _STRICT
    job: Id
    run: Id
    pid: Pid | None = Field(None, description="the run's process, leader of its process group")


class PilotReport(BaseModel):
    """A task event from a pilot; `error` says why a run could not start."""

    model_config = _STRICT
    job: Id
    run: Id
    event: Literal["started", "ended"]
    time: float
    exit_code: ExitCode | None = None
    runtime: float | None = None
    error: CleanStr | None = Field(None, max_length=4096)
    pid: Pid | None = Field(None, description="started: the run's process, leader of its process group")


class TaskReport(BaseModel):
    """A bag launcher's report (docs/bags.md): a task ended (RESULT with exit code 0, FAILURE
    otherwise), or the lane obeyed a preemption."""

    model_config = _STRICT
    bag: Id
    lane: Id
    event: Literal["ended", "preempted"]
    time: float
    task: Id | None = None
    exit_code: ExitCode | None = None
    runtime: float | None = Field(None, ge=0)
    error: CleanStr | None = Field(None, max_length=4096)


class LaneInfo(BaseModel):
    """A bag lane a pilot holds when it registers."""

    model_config = _STRICT
    bag: Id
    lane: Id


class RegisterRequest(BaseModel):
    """A pilot registers (or re-registers after a manager restart)."""

    model_config = _STRICT
    pid: Pid
    host: CleanStr = Field("", max_length=256)
    slots: Size = 1
    running: list[RunningTask] = Field(default_factory=list)
    reports: list[PilotReport] = Field(default_factory=list)
    lanes: list[LaneInfo] = Field(default_factory=list, max_length=4096)
    tasks: list[TaskReport] = Field(default_factory=list)


class ReportRequest(BaseModel):
    """Task events and the last command sequence number the pilot received."""

    model_config = _STRICT
    pilot_id: CleanStr = Field(..., max_length=128)
    ack: Id = 0
    reports: list[PilotReport] = Field(default_factory=list)
    tasks: list[TaskReport] = Field(default_factory=list)
