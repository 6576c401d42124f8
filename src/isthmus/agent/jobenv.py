"""The environment a job (and a pilot) starts with: built explicitly, never inherited.

A job's processes get exactly (docs/live.md, "What a job sees"):

1. the documented defaults, `DEFAULTS`, taken from the environment of the process that starts
   the job when set there (PATH, HOME, USER and LOGNAME otherwise come from the account the job
   runs as, PATH falling back to `FALLBACK_PATH`);
2. the variables the user asked for (`env` of the submission);
3. the job variables (``ISTHMUS_JOB_ID``, ``ISTHMUS_RUN``, ``ISTHMUS_NODEFILE``, ...), which
   win over both.

Nothing else of the manager's or the pilot's environment reaches a job: an operator's peer
secrets (``token_env``), cloud keys (``key_env``/``secret_env``), tokens, or anything else set
where the manager runs stay there. A pilot likewise starts from the defaults, plus the
``PYTHONPATH`` it needs to import isthmus and the ``ISTHMUS_TAG`` the manager gives it.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

DEFAULTS = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
"""The variables a job inherits from the process that starts it (when set there)."""

FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH of a job started by a process that has none."""

PILOT_EXTRA = ("PYTHONPATH",)
"""What a pilot needs beyond the defaults: where its own code is, when isthmus is not installed."""


def default_environment(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The documented defaults: each of `DEFAULTS` that `source` (default: this process's
    environment) sets, with PATH, HOME, USER and LOGNAME filled in from the account when missing."""
    src = os.environ if source is None else source
    env = {k: src[k] for k in DEFAULTS if src.get(k)}
    env.setdefault("PATH", FALLBACK_PATH)
    try:
        account = pwd.getpwuid(os.getuid())
    except KeyError:  # a uid with no passwd entry (some containers): nothing to fill in
        return env
    env.setdefault("HOME", account.pw_dir)
    env.setdefault("USER", account.pw_name)
    env.setdefault("LOGNAME", account.pw_name)
    return env


def job_environment(
    requested: Mapping[str, str], job_vars: Mapping[str, str], source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A job's whole environment: the defaults, then what the user asked for (`requested`),
    then the job variables (`job_vars`), each later one winning."""
    env = default_environment(source)
    env.update({str(k): str(v) for k, v in requested.items()})
    env.update({str(k): str(v) for k, v in job_vars.items()})
    return env


def pilot_environment(tag: str | None = None, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """A pilot's whole environment: the defaults, `PILOT_EXTRA` from `source`, and
    ``ISTHMUS_TAG`` when the manager has a tag."""
    src = os.environ if source is None else source
    env = default_environment(src)
    env.update({k: src[k] for k in PILOT_EXTRA if src.get(k)})
    if tag:
        env["ISTHMUS_TAG"] = tag
    return env
