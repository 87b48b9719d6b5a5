"""The sweep file: the boxes of one experiment and where each keeps its queue and results.

Validated as strictly as profiles. Paths end up inside remote shell commands, so they may
not contain control characters (a newline would split the probe's request protocol); they
are always shell-quoted, never interpolated raw.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from cockpit.models.durations import parse_duration, parse_size
from cockpit.models.profile import repeated

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _check_path(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("paths may not contain control characters (newline, tab, NUL, ...)")
    if value != value.strip():
        raise ValueError("paths may not start or end with whitespace")
    return value


def _check_remote_path(value: str) -> str:
    _check_path(value)
    if not value.startswith(("/", "~")):
        raise ValueError(f"use an absolute path (or one starting with ~), got {value!r}")
    return value


def _check_duration(value: str) -> str:
    parse_duration(value)
    return value


def _as_text(value: Any) -> Any:
    # YAML turns an unquoted 2026-11-12 into a date: accept it as the text it was.
    return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else (
        value.isoformat() if isinstance(value, dt.date) else value)


def _check_moment(value: str) -> str:
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"use a date and time like '2026-11-12 10:00', got {value!r}") from None
    return value


def moment_epoch(value: str) -> float:
    """Epoch seconds of a validated moment; without a zone it is this machine's local time."""
    return dt.datetime.fromisoformat(value).timestamp()


RemotePath = Annotated[str, Field(min_length=1), AfterValidator(_check_remote_path)]
LocalPath = Annotated[str, Field(min_length=1), AfterValidator(_check_path)]
Duration = Annotated[str, AfterValidator(_check_duration)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)]
Moment = Annotated[str, BeforeValidator(_as_text), AfterValidator(_check_moment)]

LOCAL_HOST = "local"


class Strict(BaseModel):
    """Base: frozen, strict, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _check_size(value: str) -> str:
    parse_size(value)
    return value


Size = Annotated[str, BeforeValidator(_as_text), AfterValidator(_check_size)]


class ExpectGpu(Strict):
    """The GPUs the sweep rented (checked by preflight against nvidia-smi)."""

    model: Annotated[str, Field(min_length=1)] | None = None
    """A substring of the reported name, case-insensitive (`A100`, `RTX 4090`)."""
    count: Annotated[int, Field(ge=1, le=64)] | None = None


class Budget(Strict):
    """What the queue will write, for preflight's room check."""

    checkpoint: Size | None = None
    """Durable bytes per cell (best.pth and what is copied with it)."""
    scratch: Size | None = None
    """Extra bytes the run needs on the data mount (latest.pth, eval outputs, caches)."""
    inodes_per_cell: Annotated[int, Field(ge=0)] | None = None


class Launch(Strict):
    """How `cockpit launch` runs one cell: the user's own command, run by our cell runner with
    CFG, TASK, EPOCHS, NAME and CKPT_DIR in its environment."""

    command: Annotated[str, Field(min_length=1)]
    """e.g. `python train.py --config "$CFG" --epochs "$EPOCHS" --out "$CKPT_DIR"`."""
    workdir: RemotePath | None = None
    """Where the queue runs (default: the queue file's folder)."""
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str] = {}
    """Environment for the queue and for Slurm's commands (e.g. `SLURM_CONF`)."""
    sbatch_args: tuple[str, ...] = ()
    """Extra `#SBATCH` options for a Slurm instance (`--gres=gpu:1`, `--time=04:00:00`)."""


RUNNER_ENV = ("PROJECT_REPO_DIR", "DATA_DIR", "DURABLE_DIR", "PROXY_HOOK", "CRED_FILE", "PY",
              "RUN_ONE", "WANDB_MODE")
"""The only environment variables `cockpit discover` reads from a hand-started runner
(/proc/PID/environ) and a `runner:` block may set: the runbook template's PROFILE BLOCK and its
knobs. A fixed allow-list, never widened from the box: a process environment holds API keys."""


def _check_value(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("values may not contain control characters (newline, tab, NUL, ...)")
    return value


class Runner(Strict):
    """How a queue started by hand with the runbook's own `run_queue.sh` runs again the same
    way (written by `cockpit discover`): `resume` runs `SHELL SCRIPT QUEUE START` and `rerun`
    `SHELL SCRIPT RERUN_QUEUE 1 QUEUE` in `cwd` with exactly `env` set, its output appended to
    the master log (`queue_log`), detached as it was (tmux session `tmux_session`, else nohup)."""

    script: RemotePath
    """The runner script's absolute path (the runbook's `run_queue.sh`, never our copy)."""
    shell: Literal["bash", "sh", "dash"] = "bash"
    """The shell that ran it (the runner's argv[0])."""
    cwd: RemotePath
    """The runner's working directory (relative queue and config paths are read from it)."""
    output: Literal["tee", "redirect"]
    """How its output reached the master log: `2>&1 | tee -a LOG`, or `>>LOG 2>&1`."""
    env: dict[Literal[RUNNER_ENV], Annotated[str, AfterValidator(_check_value)]] = {}  # type: ignore[valid-type]
    """The runner's PROFILE BLOCK variables, exactly as it had them (only names in RUNNER_ENV)."""


class Instance(Strict):
    """One box of the sweep."""

    name: Name
    profile: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
    host: Annotated[str, Field(min_length=1), AfterValidator(_check_path)]
    """An ~/.ssh/config alias, a hostname or address, or `local` for this machine."""
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    user: Name | None = None
    instance_id: str | None = None
    region: str | None = None
    price_per_hour: Annotated[float, Field(ge=0)] | None = None
    currency: Literal["USD", "CNY"] | None = None
    """The currency of `price_per_hour` when it is not the profile's (a reseller, a card
    billed in another currency); by default the profile's `currency`."""
    queue: RemotePath | None = None
    queue_log: RemotePath | None = None
    run_logs: RemotePath | None = None
    checkpoints: RemotePath | None = None
    durable_root: RemotePath | None = None
    durable_mount: RemotePath | None = None
    """A mounted volume you declare survives teardown (a network volume, NFS, a provider's
    persistent disk) where the profile knows none (generic-ssh): preflight checks that
    durable_root is on it and that it is really mounted."""
    tmux_session: Name | None = None
    metric: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The headline metric key of `best_metrics.json` (e.g. `val_mIoU`), shown by verify; by
    default the file's own `"metric"` key, then a preference list (README)."""
    mounts: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")], RemotePath] = {}
    """Override a profile tier's path by tier id (e.g. `data: /mnt/big`)."""
    extra_mounts: tuple[RemotePath, ...] = ()
    stall_after: Duration = "30m"
    launch: Launch | None = None
    expect_gpu: ExpectGpu | None = None
    budget: Budget | None = None
    clocks_started: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")], Moment] = {}
    """When one of the profile's danger clocks started for this box, by clock id (e.g.
    `auto_release: 2026-11-12 10:00` after a power-off). The cockpit cannot see a
    powered-off box, so the user records it and the cockpit counts the clock down."""

    runner: Runner | None = None
    """A hand-started runbook queue's runner (from `cockpit discover`): how `resume` and `rerun`
    start it again when there is no `launch:`."""

    @model_validator(mode="after")
    def _runner_needs_log(self) -> Instance:
        if self.runner is not None and (not self.queue or not self.queue_log):
            raise ValueError("`runner` needs `queue` and `queue_log` (its output is appended there)")
        return self

    @property
    def is_local(self) -> bool:
        """True for `host: local` (this machine, read directly)."""
        return self.host == LOCAL_HOST


class SshSettings(Strict):
    """How to reach the boxes. Defaults are OpenSSH's own files."""

    config: tuple[LocalPath, ...] = ()
    """Extra ssh_config files, read after ~/.ssh/config (relative to the sweep file)."""
    known_hosts: tuple[LocalPath, ...] = ()
    """Extra known_hosts files (relative to the sweep file); ~/.ssh/known_hosts is always read."""
    identity_files: tuple[LocalPath, ...] = ()
    connect_timeout: Duration = "10s"
    keepalive_interval: Duration = "3s"
    keepalive_count_max: Annotated[int, Field(ge=1, le=100)] = 1
    """With these defaults a frozen link is found within twice the interval (~6 s): after one
    silent interval a keepalive goes out, after the next the connection is dropped. Records
    every `interval` keep the link busy, so the keepalive fires only when data stopped; sshd
    answers it even while the probe's shell is slow."""


MAX_NOTIFY_URL = 2048
"""Characters of one `alerts.notify` URL: webhook URLs with tokens run to ~200; a longer
value is a paste error, and the URL is parsed again on every delivery."""


class _DropOwnThread(logging.Filter):
    """Drops the records the current thread logs (apprise's own logging while a URL is
    checked: its messages quote parts of the URL, which holds tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


def _check_notify_url(value: str) -> str:
    """An apprise URL whose scheme apprise knows and which apprise can load.

    Imports apprise only when a sweep lists a URL (it loads ~250 plugins, ~0.2 s). The error
    names the scheme, never the URL: its path and user parts are tokens."""
    if _CONTROL.search(value) or any(c.isspace() for c in value):
        raise ValueError("a notify URL may not contain spaces or control characters")
    scheme, sep, _ = value.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,31}", scheme):
        raise ValueError("use an apprise URL such as slack://…, dingtalk://…, json://host/path")
    import apprise  # lazy: only sweeps that notify pay for it
    from apprise.manager_plugins import NotificationManager

    plugins = NotificationManager()  # type: ignore[no-untyped-call]  # apprise leaves it untyped
    known = scheme.lower() in plugins or scheme.lower() in ("http", "https")
    if not known:
        raise ValueError(f"{scheme}:// is not a scheme apprise knows (see "
                         f"https://appriseit.com/services/ for the list)")
    drop = _DropOwnThread()
    log = logging.getLogger("apprise")
    log.addFilter(drop)
    try:
        loaded = apprise.Apprise.instantiate(value)
    finally:
        log.removeFilter(drop)
    if loaded is None:
        hint = (" (a Slack webhook URL is; for a plain JSON POST use json:// or jsons://, or "
                "the `webhook` key)") if scheme.lower() in ("http", "https") else \
            " (a token or field is missing or malformed)"
        raise ValueError(f"apprise cannot use this {scheme}:// URL{hint}")
    return value


MAX_NOTIFY_URLS = 16
"""Channels one sweep may list: every alert goes to each, so more is a paste error (and
bounds the threads one alert can start)."""

NotifyUrl = Annotated[str, Field(min_length=1, max_length=MAX_NOTIFY_URL),
                      AfterValidator(_check_notify_url)]


class AlertSettings(Strict):
    """Where material events go besides the terminal bell and a toast."""

    desktop: bool = True
    """A desktop notification through `notify-send`, when it is installed."""
    webhook: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = None
    """POST one JSON document per event here (timeout and bounded retry)."""
    notify: Annotated[tuple[NotifyUrl, ...], Field(max_length=MAX_NOTIFY_URLS)] = ()
    """Apprise URLs (`slack://…`, `dingtalk://…`, `feishu://…`, `tgram://…`, `ntfy://…`,
    `mailto://…`, `json://…`): one short plain-text message per event to each, rate-limited
    per channel. Each URL's scheme is checked against apprise's plugins when the sweep loads."""


MAX_WORLD_SIZE = 4096
"""Ranks one job may declare: the largest public training runs use a few thousand GPUs; a
bigger number is a typo, and the job view keeps one row per rank."""
LAUNCHERS = ("torchrun", "deepspeed", "accelerate", "horovod", "mpirun", "other")


class JobMember(Strict):
    """One box of a distributed job and the global ranks it runs (in local-rank order)."""

    instance: Name
    ranks: Annotated[tuple[Annotated[int, Field(ge=0, lt=MAX_WORLD_SIZE)], ...],
                     Field(min_length=1, max_length=MAX_WORLD_SIZE)]


class Job(Strict):
    """A job group: instances that run ONE distributed training (torchrun, DeepSpeed,
    accelerate over a rendezvous). The cockpit judges it as one job: one root cause across its
    boxes, stalled-in-a-collective, one alert, and no member torn down before all are N/N."""

    name: Name
    launcher: Literal[LAUNCHERS] = "torchrun"  # type: ignore[valid-type]
    world_size: Annotated[int, Field(ge=1, le=MAX_WORLD_SIZE)]
    cell: Name | None = None
    """The queue cell that is this job on every member (its log is `<run_logs>/<cell>.log`);
    by default the job's name."""
    stall_after: Duration = "5m"
    """No rank progressed for this long while every member's process lives: stalled in a
    collective. Well under the NCCL watchdog (1800 s by default, MN3), so the verdict comes
    first."""
    members: Annotated[tuple[JobMember, ...], Field(min_length=1, max_length=MAX_WORLD_SIZE)]

    @model_validator(mode="after")
    def _ranks(self) -> Job:
        dupes = repeated([m.instance for m in self.members])
        if dupes:
            raise ValueError(f"job {self.name}: instance(s) listed twice: {', '.join(dupes)}")
        ranks = [r for m in self.members for r in m.ranks]
        twice = repeated([str(r) for r in ranks])
        if twice:
            raise ValueError(f"job {self.name}: rank(s) on more than one box: {', '.join(twice)}")
        missing = sorted(set(range(self.world_size)) - set(ranks))
        extra = sorted(r for r in ranks if r >= self.world_size)
        if missing or extra:
            raise ValueError(f"job {self.name}: ranks must be 0..{self.world_size - 1} exactly "
                             f"(missing {missing[:8]}, beyond world_size {extra[:8]})")
        return self

    @property
    def log_cell(self) -> str:
        """The cell whose log is this job on each member."""
        return self.cell or self.name


MAX_API_URL = 512
"""Characters of one `platform_api` URL: a loopback base URL is ~40; more is a paste error."""
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
"""The only hosts `platform_api` may name: a key is sent there, so never off this machine."""
API_PLATFORMS = ("vastai", "runpod", "lambda")


def _check_loopback_url(value: str) -> str:
    """An http(s) URL on this machine (the demo's stand-in, a local proxy): a platform key is
    sent to it, so any other host is refused."""
    from urllib.parse import urlsplit

    if _CONTROL.search(value) or any(c.isspace() for c in value):
        raise ValueError("a platform_api URL may not contain spaces or control characters")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a bad port
    except ValueError:
        raise ValueError(f"not a URL: {value[:80]!r}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("use an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a platform_api URL may not carry a user or password")
    if parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"platform_api must point at this machine ({', '.join(LOOPBACK_HOSTS)}): "
                         f"the platform's API key is sent there, got host {parts.hostname!r}")
    if port == 0:
        raise ValueError("port 0 is not a port to connect to")
    return value


LoopbackUrl = Annotated[str, Field(min_length=1, max_length=MAX_API_URL),
                        AfterValidator(_check_loopback_url)]


class Sweep(Strict):
    """A whole sweep file."""

    sweep: Name
    pull_dir: LocalPath = "./pulled"
    interval: Duration = "2s"
    ssh: SshSettings = SshSettings()
    alerts: AlertSettings = AlertSettings()
    cli_path: tuple[LocalPath, ...] = ()
    """Folders searched first for platform CLIs (vastai, runpodctl) when an approved teardown
    runs (relative to the sweep file)."""
    platform_api: dict[Literal[API_PLATFORMS], LoopbackUrl] = {}  # type: ignore[valid-type]
    """Base URL per platform (`runpod: http://127.0.0.1:PORT/runpod`; RunPod's GraphQL is
    `<base>/graphql`), loopback only: the demo fleet's API stand-in, or a local proxy. Wins
    over `COCKPIT_<PLATFORM>_API`."""
    instances: tuple[Instance, ...]
    jobs: tuple[Job, ...] = ()
    """Job groups: boxes that run one distributed job together (see `Job`)."""

    @model_validator(mode="after")
    def _jobs(self) -> Sweep:
        names = {inst.name for inst in self.instances}
        seen: dict[str, str] = {}
        for job in self.jobs:
            for member in job.members:
                if member.instance not in names:
                    raise ValueError(f"job {job.name}: no instance called {member.instance}")
                if member.instance in seen:
                    raise ValueError(f"{member.instance} is in two jobs ({seen[member.instance]}, "
                                     f"{job.name}): a box runs one job group at a time")
                seen[member.instance] = job.name
        dupes = repeated([job.name for job in self.jobs])
        if dupes:
            raise ValueError(f"duplicate job name(s): {', '.join(dupes)}")
        return self

    def job_of(self, instance: str) -> Job | None:
        """The job group `instance` belongs to, if any."""
        return next((j for j in self.jobs if any(m.instance == instance for m in j.members)),
                    None)

    @field_validator("instances")
    @classmethod
    def _instances(cls, instances: tuple[Instance, ...]) -> tuple[Instance, ...]:
        # Not Field(min_length=1): pydantic counts only the items that validated, so one bad
        # instance would add a false "at least 1 item" error.
        if not instances:
            raise ValueError("list at least one instance")
        dupes = repeated([inst.name for inst in instances])
        if dupes:
            raise ValueError(f"duplicate instance name(s): {', '.join(dupes)}")
        return instances

    def instance(self, name: str) -> Instance:
        """The instance called `name` (KeyError if none)."""
        for inst in self.instances:
            if inst.name == name:
                return inst
        raise KeyError(name)
