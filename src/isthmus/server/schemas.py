"""Request and response bodies of the REST API (pydantic 2); invalid requests get a 422 naming the field."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Priority = Literal["super-high", "high", "low", "super-low"]
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class VmRequest(BaseModel):
    """VM requirements of a job (Cloud Scheduler job attributes); every field optional."""

    model_config = ConfigDict(extra="forbid")
    vm_type: str | None = Field(None, max_length=64)
    image: str | None = Field(None, max_length=256)
    cpu_arch: str | None = Field(None, max_length=32)
    cores: int | None = Field(None, ge=1, le=4096)
    memory_mb: int | None = Field(None, ge=1)
    storage_gb: float | None = Field(None, gt=0)
    network: str | None = Field(None, max_length=64)


class SubmitRequest(BaseModel):
    """A job: a command with arguments run on `size` processors of one site."""

    model_config = ConfigDict(extra="forbid")
    command: str = Field(..., min_length=1, max_length=4096, description="program to run (PATH is searched)")
    args: list[str] = Field(default_factory=list, max_length=10000)
    size: int = Field(1, ge=1, le=1_000_000, description="processors (slots) on one site")
    requested_runtime: float | None = Field(None, gt=0, description="user's runtime estimate in seconds")
    priority: Priority = "high"
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    cwd: str | None = Field(None, description="absolute working directory; default: the job's spool directory")
    name: str | None = Field(None, max_length=128)
    vm: VmRequest | None = None
    script: str | None = Field(
        None, max_length=1_048_576, description="batch script text, run instead of `command` (copied at submission)"
    )
    output: str | None = Field(
        None, max_length=4096, description="absolute stdout file; %j is the job id, %% a literal %"
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
        from isthmus.live.jobfiles import check_template

        if v is None:
            return v
        if "\x00" in v:
            raise ValueError("the path contains a null byte")
        if not v.startswith("/"):
            raise ValueError(f"output and error paths must be absolute, got {v!r}")
        return check_template(v)

    @field_validator("env")
    @classmethod
    def _env_keys(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not _ENV_KEY.match(k):
                raise ValueError(f"invalid environment variable name {k!r}")
            if k.startswith("ISTHMUS_"):
                raise ValueError(f"{k!r}: ISTHMUS_* variables are set by the manager")
        return v

    @field_validator("cwd")
    @classmethod
    def _cwd_absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"working directory must be an absolute path, got {v!r}")
        return v


class SubmitResponse(BaseModel):
    """The id of the submitted job."""

    id: int


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
    history: list[HistoryItem] | None = None


class TokenRequest(BaseModel):
    """Create a token for `user` (created if missing)."""

    model_config = ConfigDict(extra="forbid")
    user: str
    admin: bool = False

    @field_validator("user")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _USER.match(v):
            raise ValueError("user names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v


class TokenResponse(BaseModel):
    """A new token; it is shown only once."""

    user: str
    token: str
    admin: bool


class RunningTask(BaseModel):
    """A run a pilot is executing."""

    job: int
    run: int


class PilotReport(BaseModel):
    """A task event from a pilot."""

    model_config = ConfigDict(extra="allow")
    job: int
    run: int
    event: Literal["started", "ended"]
    time: float
    exit_code: int | None = None
    runtime: float | None = None


class RegisterRequest(BaseModel):
    """A pilot registers (or re-registers after a manager restart)."""

    pid: int
    host: str = ""
    slots: int = Field(1, ge=1)
    running: list[RunningTask] = Field(default_factory=list)
    reports: list[PilotReport] = Field(default_factory=list)


class ReportRequest(BaseModel):
    """Task events and the last command sequence number the pilot received."""

    pilot_id: str
    ack: int = 0
    reports: list[PilotReport] = Field(default_factory=list)
