"""A box run the public runbook's way, on the real loopback sshd: a harness for end-to-end tests.

The runbook's own scripts (`run_queue.sh.template`, `run_one.sh.template`, `aggregate_to_fs.sh`,
`build_pull_manifest.py`, `verify_local.py`) are used from `../shared/reference/seed-scripts/`
beside the checkout, exactly as published; they are never copied into the repository. On the
box they are installed the way the runbook's users do it: the two templates copied to
`run_queue.sh` / `run_one.sh` byte for byte and parameterised only through the environment
variables of their PROFILE BLOCK. Where `../shared` is absent (a user's own clone) the tests
that use this module skip, saying so.

A `RunbookBox` is one directory tree on this machine, reached only through `ssh` to the loopback
sshd (the commands a user would type), holding:

    project/src/train.py            a tiny real torch trainer with run_one.sh's command line
    project/configs/ablation/*.yaml one config per cell (crash or hold switches live here)
    durable/run_queue.sh, run_one.sh the templates, copied verbatim
    durable/queue.txt, master.log   a queue in the runbook's format and the nohup master log
    durable/final_ckpts/            the durable root (run_one.sh's sync, aggregate_to_fs.sh)
    data/                           DATA_DIR: checkpoints/, runs/logs/, q1_master.log (tee recipe)

Issue 12's custody test and issue 14's queue tests share it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.sshd import Sshd, descendants

SHARED = Path(__file__).resolve().parents[2] / "shared"
"""`../shared` beside the repository checkout (present in the project's workspace, absent in a
user's own clone)."""
SEEDS = SHARED / "reference" / "seed-scripts"
SEED_FILES = ("run_queue.sh.template", "run_one.sh.template", "aggregate_to_fs.sh",
              "build_pull_manifest.py", "verify_local.py")
SKIP_REASON = (f"../shared is absent beside the checkout ({SHARED} does not exist): the runbook's "
               "scripts are used from ../shared/reference/seed-scripts/, never copied into the repo")

QUEUE_DEADLINE = 120.0
"""Longest wait for a queue to reach QUEUE DONE (3 tiny cells take a few seconds; the deadline
only bounds how long a broken run hangs the suite, it is not a timing assertion)."""
SSH_TIMEOUT = 60.0
"""Longest a single ssh command (a launch, an aggregation) may take before the test fails."""
CLI_TIMEOUT = 120.0
"""Longest one `cockpit` CLI run may take (verify spawns workers that import torch)."""
HOLD_SECONDS = 120
"""A held cell waits this long for its release file and then fails, so a broken test never
leaves a trainer waiting for good."""
POLL = 0.1
"""Seconds between two looks at a log while waiting (polling, never a fixed sleep)."""


def require_seeds() -> Path:
    """The seed-scripts folder; skip the calling module when `../shared` is genuinely absent.

    Called at module level, so the skip is a collection-time skip (conftest's CI=true hook only
    rewrites test-call skips): a user's own clone skips with this reason even under CI=true.
    Where `../shared` exists but a script is missing, that is a broken workspace: a failure,
    never a skip."""
    if not SHARED.exists():
        pytest.skip(SKIP_REASON, allow_module_level=True)
    missing = [name for name in SEED_FILES if not (SEEDS / name).is_file()]
    if missing:
        pytest.fail(f"{SEEDS} lacks {missing}: ../shared is there but incomplete", pytrace=False)
    return SEEDS


def sha256(path: Path) -> str:
    """SHA-256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def poll(what: str, done: Callable[[], bool], seconds: float = QUEUE_DEADLINE) -> None:
    """Poll `done` until true; after `seconds` fail naming `what` (a deadline, not a timing
    assertion: it only bounds how long a broken run hangs)."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"{what}: not after {seconds:.0f} s"
        time.sleep(POLL)


TRAINER = '''\
"""A tiny real trainer with exactly the command line the runbook's run_one.sh passes:

    python -m src.train --no-strict -o key=value ... -c CFG --task TASK --epochs N \\
        --experiment-name NAME

It trains a small autoencoder for N epochs, prints per-epoch lines, and after every epoch writes
best.pth (torch.save of {'model_state_dict', 'epoch'}), latest.pth and best_metrics.json into
training.checkpoint_dir. Config switches: `crash_after_epoch: K` raises a CUDA-OOM-shaped
torch.OutOfMemoryError in the forward pass of epoch K+1 (exit 1, epoch-K checkpoint left
behind); `hold_after_epoch: K` + `hold_file: PATH` waits after epoch K until PATH exists.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import yaml

HOLD_SECONDS = @HOLD_SECONDS@
STEPS = 8
BATCH = 32
OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
       "of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.07 GiB memory "
       "in use. Of the allocated memory 75.12 GiB is allocated by PyTorch, and 1.44 GiB is reserved "
       "by PyTorch but unallocated.")


class TinyAutoencoder(torch.nn.Module):
    def __init__(self, width: int, oom_from_epoch: int | None) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(16, width)
        self.decoder = torch.nn.Linear(width, 16)
        self.oom_from_epoch = oom_from_epoch
        self.epoch = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.oom_from_epoch is not None and self.epoch >= self.oom_from_epoch:
            raise torch.OutOfMemoryError(OOM)
        return self.decoder(torch.relu(self.encoder(x)))


def train_one_epoch(model, opt, data, epoch: int, epochs: int) -> float:
    model.train()
    model.epoch = epoch
    total = 0.0
    for step in range(1, STEPS + 1):
        x = data[(step - 1) * BATCH: step * BATCH]
        loss = torch.nn.functional.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        if step % 4 == 0:
            lr = opt.param_groups[0]["lr"]
            print(f"Epoch {epoch}/{epochs} | step {step}/{STEPS} | loss={loss.item():.4f} | lr={lr:.1e}")
    return total / STEPS


def evaluate(model, data) -> tuple[float, float]:
    model.eval()
    with torch.no_grad():
        mse = torch.nn.functional.mse_loss(model(data), data).item()
    return mse, 10 * math.log10(4.0 / max(mse, 1e-12))


def main() -> None:
    parser = argparse.ArgumentParser(prog="src.train")
    parser.add_argument("--no-strict", dest="strict", action="store_false")
    parser.add_argument("-o", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("-c", dest="config", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--experiment-name", required=True)
    args = parser.parse_args()
    overrides = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"-o {item!r}: expected key=value")
        overrides[key] = value
    ckpt = Path(overrides["training.checkpoint_dir"])
    ckpt.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load(Path(args.config).read_text()) or {}
    torch.set_num_threads(1)
    torch.manual_seed(int(cfg.get("seed", 0)))
    crash = cfg.get("crash_after_epoch")
    model = TinyAutoencoder(int(cfg.get("width", 8)), None if crash is None else int(crash) + 1)
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg.get("lr", 0.05)))
    train, val = torch.rand(STEPS * BATCH, 16) * 2 - 1, torch.rand(64, 16) * 2 - 1
    print(f"[{args.experiment_name}] task={args.task} cfg={args.config} epochs={args.epochs} "
          f"strict={args.strict} group={overrides.get('wandb.group')} ckpt={ckpt}")
    for epoch in range(1, args.epochs + 1):
        started = time.monotonic()
        loss = train_one_epoch(model, opt, train, epoch, args.epochs)
        val_loss, psnr = evaluate(model, val)
        print(f"Epoch {epoch}/{args.epochs} done | train_loss={loss:.4f} val_loss={val_loss:.4f} "
              f"psnr={psnr:.2f} | {time.monotonic() - started:.2f}s")
        state = {"model_state_dict": model.state_dict(), "epoch": epoch}
        torch.save(state, ckpt / "latest.pth")
        torch.save(state, ckpt / "best.pth")
        (ckpt / "best_metrics.json").write_text(json.dumps(
            {"epoch": epoch, "psnr": round(psnr, 4), "loss": round(val_loss, 6)}))
        print(f"saved best.pth (epoch {epoch}, psnr={psnr:.2f})")
        if epoch == cfg.get("hold_after_epoch"):
            release = Path(cfg["hold_file"])
            deadline = time.monotonic() + HOLD_SECONDS
            while not release.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{release} never appeared")
                time.sleep(0.05)
    print("Training completed")


if __name__ == "__main__":
    main()
'''.replace("@HOLD_SECONDS@", str(HOLD_SECONDS))


@dataclass(frozen=True)
class Cell:
    """One queue line: `configs/ablation/<name>.yaml <task> <epochs>`, and its config."""

    name: str
    task: str = "reconstruction"
    epochs: int = 2
    crash_after_epoch: int | None = None
    """Raise a CUDA-OOM-shaped error in the epoch after this one (its checkpoint is left)."""
    hold_after_epoch: int | None = None
    """Wait after this epoch until `RunbookBox.release(name)` (a cell caught mid-run)."""

    @property
    def cfg(self) -> str:
        """The config path as the queue line names it (relative to PROJECT_REPO_DIR)."""
        return f"configs/ablation/{self.name}.yaml"


@dataclass
class RunbookBox:
    """One box on the loopback sshd, set up and driven the runbook's way (see the module doc)."""

    root: Path
    sshd: Sshd
    alias: str = "gpu-box-1"
    python: str = sys.executable
    """The box's PY: this venv's python (it has torch and yaml)."""
    seeds: Path = SEEDS
    ssh_config: Path = field(init=False)
    runners: list[int] = field(default_factory=list)
    """Pids of the queue runners this box started (killed with their trees on close)."""
    sessions: list[str] = field(default_factory=list)
    """tmux sessions this box started (killed on close)."""

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        client = self.root.parent / f"{self.root.name}-client"
        client.mkdir(exist_ok=True)
        self.ssh_config = self.sshd.write_client_files(self.alias, client)
        self.project.mkdir(exist_ok=True)
        self.data.mkdir(exist_ok=True)
        self.durable.mkdir(exist_ok=True)
        src = self.project / "src"
        src.mkdir(exist_ok=True)
        (src / "__init__.py").write_text("")
        (src / "train.py").write_text(TRAINER)
        (self.project / "configs" / "ablation").mkdir(parents=True, exist_ok=True)

    # --- layout -------------------------------------------------------------------------------
    @property
    def project(self) -> Path:
        """PROJECT_REPO_DIR: the code, `python -m src.train` runs from here."""
        return self.root / "project"

    @property
    def data(self) -> Path:
        """DATA_DIR: per-instance scratch (checkpoints/, runs/logs/)."""
        return self.root / "data"

    @property
    def durable(self) -> Path:
        """DURABLE_DIR: the runbook's durable mount; run_queue.sh and run_one.sh live here."""
        return self.root / "durable"

    @property
    def final(self) -> Path:
        """The durable root the cockpit pulls from: `$DURABLE_DIR/final_ckpts`."""
        return self.durable / "final_ckpts"

    @property
    def run_logs(self) -> Path:
        """Where run_one.sh tees each cell's log."""
        return self.data / "runs" / "logs"

    @property
    def checkpoints(self) -> Path:
        """Where run_one.sh points training.checkpoint_dir (one folder per cell)."""
        return self.data / "checkpoints"

    def release_file(self, cell: str) -> Path:
        """The file a held cell waits for."""
        return self.root / f"release-{cell}"

    def profile_env(self) -> dict[str, str]:
        """The PROFILE BLOCK of run_one.sh.template (and RUN_ONE of run_queue.sh.template)."""
        return {
            "PROJECT_REPO_DIR": str(self.project),
            "DATA_DIR": str(self.data),
            "DURABLE_DIR": str(self.durable),
            "PROXY_HOOK": ":",
            "CRED_FILE": "",
            "PY": self.python,
            "WANDB_MODE": "disabled",
            "RUN_ONE": str(self.durable / "run_one.sh"),
        }

    # --- setting up ---------------------------------------------------------------------------
    def install_scripts(self) -> dict[str, Path]:
        """Copy the templates to run_queue.sh / run_one.sh as users do (byte for byte)."""
        installed = {}
        for template, name in (("run_queue.sh.template", "run_queue.sh"),
                               ("run_one.sh.template", "run_one.sh")):
            target = self.durable / name
            shutil.copyfile(self.seeds / template, target)
            target.chmod(0o755)
            installed[template] = target
        return installed

    def write_cell_config(self, cell: Cell) -> Path:
        """The cell's config yaml in the project (its switches decide crash and hold)."""
        lines = [f"# ablation {cell.name}", "model: tiny_autoencoder", "width: 8", "lr: 0.05",
                 f"seed: {sum(map(ord, cell.name)) % 997}"]
        if cell.crash_after_epoch is not None:
            lines.append(f"crash_after_epoch: {cell.crash_after_epoch}")
        if cell.hold_after_epoch is not None:
            lines += [f"hold_after_epoch: {cell.hold_after_epoch}",
                      f"hold_file: {json.dumps(str(self.release_file(cell.name)))}"]
        path = self.project / cell.cfg
        path.write_text("\n".join(lines) + "\n")
        return path

    def write_queue(self, cells: Sequence[Cell], name: str = "queue.txt") -> Path:
        """A queue file in the runbook's format (a comment line, aligned columns) and the cells'
        configs."""
        width = max(len(c.cfg) for c in cells) + 2
        text = "# one ablation cell per line: <cfg_path> <task> [epochs]\n"
        text += "".join(f"{c.cfg.ljust(width)}{c.task.ljust(16)}{c.epochs}\n" for c in cells)
        for cell in cells:
            self.write_cell_config(cell)
        path = self.durable / name
        path.write_text(text)
        return path

    def write_roster(self, cells: Iterable[str], name: str = "expected_roster.txt") -> Path:
        """EXPECTED_ROSTER_FILE for aggregate_to_fs.sh: one result folder per line."""
        path = self.root / name
        path.write_text("# expected result directories\n" + "".join(f"{c}\n" for c in cells))
        return path

    def release(self, cell: str) -> None:
        """Let a held cell go on."""
        self.release_file(cell).touch()

    # --- commands, through ssh ----------------------------------------------------------------
    def ssh(self, command: str, *, check: bool = True,
            timeout: float = SSH_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run a shell command on the box with the real ssh client, as a user types it."""
        result = subprocess.run(
            ["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", self.alias, command],
            capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"ssh {command!r} exited {result.returncode}:\n"
                                 f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
        return result

    def exports(self, extra: dict[str, str] | None = None) -> str:
        """`export K=V ...` for the profile environment (and `extra`)."""
        env = {**self.profile_env(), **(extra or {})}
        return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())

    def launch_nohup(self, queue: Path, log: str = "master.log", start: int | None = None,
                     append: bool = False) -> int:
        """The runbook's fallback recipe, typed in DURABLE_DIR:
        `nohup bash run_queue.sh queue.txt </dev/null >master.log 2>&1 &` (a resume passes
        START_INDEX and appends: `>>master.log`). Returns the runner's pid."""
        args = " ".join(shlex.quote(a) for a in (queue.name, *(() if start is None else (str(start),))))
        redirect = ">>" if append else ">"
        command = (f"cd {shlex.quote(str(queue.parent))} || exit 1; {self.exports()}; "
                   f"nohup bash run_queue.sh {args} </dev/null {redirect}{shlex.quote(log)} 2>&1 & "
                   f"echo $!")
        pid = int(self.ssh(command).stdout.split()[-1])
        self.runners.append(pid)
        return pid

    def resume_nohup(self, queue: Path, start: int, log: str = "master.log") -> int:
        """The runbook's resume under nohup: `bash run_queue.sh QUEUE START_INDEX >>master.log`."""
        return self.launch_nohup(queue, log, start=start, append=True)

    def launch_tmux(self, queue: Path, session: str, log: Path | None = None,
                    start: int | None = None) -> Path:
        """The runbook's tmux recipe, typed in DURABLE_DIR:
        `tmux new -d -s q1 'bash run_queue.sh queue_1.txt 2>&1 | tee <data>/q1_master.log'`
        (a resume adds START_INDEX; its tee truncates the master log). The profile environment
        is handed to the session with `-e` (a tmux server already running would not pass the
        caller's exports on). Returns the master log."""
        log = log or self.data / "q1_master.log"
        args = " ".join(shlex.quote(a) for a in (queue.name, *(() if start is None else (str(start),))))
        inner = f"bash run_queue.sh {args} 2>&1 | tee {shlex.quote(str(log))}"
        env = " ".join(f"-e {shlex.quote(f'{k}={v}')}" for k, v in self.profile_env().items())
        where = shlex.quote(str(queue.parent))
        self.ssh(f"cd {where} || exit 1; tmux new -d -s {shlex.quote(session)} -c {where} {env} "
                 f"{shlex.quote(inner)}")
        if session not in self.sessions:
            self.sessions.append(session)
        return log

    def aggregate(self, run_id: str, roster: Path) -> subprocess.CompletedProcess[str]:
        """The runbook's `aggregate_to_fs.sh` (from ../shared), then its build_pull_manifest.py:
        copies every checkpoint folder to the durable root and writes PULL_MANIFEST.json."""
        env = {"DATA_DIR": str(self.data), "DURABLE_DIR": str(self.durable), "PY": self.python,
               "RUN_ID": run_id, "EXPECTED_ROSTER_FILE": str(roster)}
        exports = "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        return self.ssh(f"{exports}; bash {shlex.quote(str(self.seeds / 'aggregate_to_fs.sh'))}",
                        check=False)

    # --- waiting ------------------------------------------------------------------------------
    def runner_alive(self, pid: int) -> bool:
        """Whether a runner process still runs (a zombie does not)."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def session_alive(self, session: str) -> bool:
        """Whether a tmux session still exists."""
        return subprocess.run(["tmux", "has-session", "-t", f"={session}"],
                              capture_output=True, check=False).returncode == 0

    def wait_queue_done(self, log: Path, times: int = 1, *, pid: int | None = None,
                        session: str | None = None, seconds: float = QUEUE_DEADLINE) -> str:
        """Wait until `log` holds `times` QUEUE DONE lines and the runner (pid or tmux session)
        has exited; returns the log."""
        def done() -> bool:
            text = log.read_text(errors="replace") if log.exists() else ""
            if text.count("=== QUEUE DONE") < times:
                return False
            if pid is not None and self.runner_alive(pid):
                return False
            return session is None or not self.session_alive(session)

        poll(f"QUEUE DONE x{times} in {log}", done, seconds)
        return log.read_text(errors="replace")

    def wait_for(self, path: Path, text: str, seconds: float = QUEUE_DEADLINE) -> None:
        """Wait until `path` contains `text`."""
        poll(f"{text!r} in {path}",
             lambda: path.exists() and text in path.read_text(errors="replace"), seconds)

    # --- the cockpit's view -------------------------------------------------------------------
    def write_sweep(self, path: Path, *, sweep: str, queue: Path, queue_log: Path | None,
                    pull_dir: Path, instance: str = "b1") -> Path:
        """A cockpit sweep for this box: durable_root `$DURABLE_DIR/final_ckpts`, the queue and
        (unless None, as `cockpit discover` printed it for a nohup queue) the master log."""
        lines = [
            f"sweep: {sweep}",
            f"pull_dir: {json.dumps(str(pull_dir))}",
            "ssh:",
            f"  config: [{json.dumps(str(self.ssh_config))}]",
            "  connect_timeout: 10s",
            "instances:",
            f"  - name: {instance}",
            "    profile: generic-ssh",
            f"    host: {self.alias}",
            f"    queue: {json.dumps(str(queue))}",
            *([f"    queue_log: {json.dumps(str(queue_log))}"] if queue_log is not None else []),
            f"    run_logs: {json.dumps(str(self.run_logs))}",
            f"    checkpoints: {json.dumps(str(self.checkpoints))}",
            f"    durable_root: {json.dumps(str(self.final))}",
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    # --- cleaning up --------------------------------------------------------------------------
    def close(self) -> None:
        """Kill what this box started (runner trees, tmux sessions); release held cells."""
        for cell_release in self.root.glob("release-*"):
            cell_release.unlink(missing_ok=True)
        for pid in self.runners:
            for victim in [*descendants(pid), pid]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(victim, signal.SIGKILL)
        for session in self.sessions:
            subprocess.run(["tmux", "kill-session", "-t", f"={session}"], capture_output=True,
                           check=False)


@contextlib.contextmanager
def runbook_box(root: Path, sshd: Sshd, **kwargs: Any) -> Iterator[RunbookBox]:
    """A RunbookBox that kills whatever it started when the test ends."""
    box = RunbookBox(root, sshd, **kwargs)
    try:
        yield box
    finally:
        box.close()


def cockpit(*args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """The real `cockpit` CLI as a subprocess, with this test's HOME and state dirs."""
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=timeout, check=False)


def verify_json(sweep: Path) -> tuple[int, dict[str, Any]]:
    """`cockpit verify SWEEP --json`: its exit code and its one instance's document."""
    result = cockpit("verify", str(sweep), "--json")
    assert result.returncode in (0, 1), (result.returncode, result.stderr[-3000:])
    try:
        doc = json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"verify --json printed no JSON ({exc}):\n{result.stdout[-2000:]}\n"
                             f"{result.stderr[-2000:]}") from None
    (inst,) = doc["instances"]
    return result.returncode, inst


def cells_by_name(inst: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The verify document's cells keyed by name."""
    return {c["cell"]: c for c in inst["cells"]}


# --- more launch recipes (issue 14: `cockpit discover` finds a queue however it was started) ---
# Module-level functions, so RunbookBox itself is unchanged. Each recipe is typed in DURABLE_DIR
# through ssh with the profile environment exported, as a user would.


def find_runner(queue: Path, seconds: float = QUEUE_DEADLINE) -> int:
    """The pid of the `bash run_queue.sh <queue>` running in the queue's folder (the runner
    itself, not one of its `$(...)` subshells), read from /proc; waits until it appears."""
    found: list[int] = []

    def look() -> bool:
        runners: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(entry / "cwd")
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if (len(argv) >= 3 and argv[0].endswith(b"bash") and argv[1] == b"run_queue.sh"
                    and argv[2] == queue.name.encode() and cwd == str(queue.parent)):
                runners[int(entry.name)] = ppid
        found[:] = [pid for pid, ppid in runners.items() if ppid not in runners]
        return len(found) == 1

    poll(f"one runner of {queue}", look, seconds)
    return found[0]


def launch_tmux_no_tee(box: RunbookBox, queue: Path, session: str, log: Path) -> int:
    """tmux without tee: `tmux new -d -s q1 'bash run_queue.sh queue_1.txt > log 2>&1'` (the
    runner's own stdout is the master log). Returns the runner's pid."""
    inner = f"bash run_queue.sh {shlex.quote(queue.name)} > {shlex.quote(str(log))} 2>&1"
    env = " ".join(f"-e {shlex.quote(f'{k}={v}')}" for k, v in box.profile_env().items())
    where = shlex.quote(str(queue.parent))
    box.ssh(f"cd {where} || exit 1; tmux new -d -s {shlex.quote(session)} -c {where} {env} "
            f"{shlex.quote(inner)}")
    if session not in box.sessions:
        box.sessions.append(session)
    pid = find_runner(queue)
    box.runners.append(pid)
    return pid


def launch_setsid(box: RunbookBox, queue: Path, log: str = "master.log") -> int:
    """setsid + nohup: `setsid nohup bash run_queue.sh q.txt > master.log 2>&1 < /dev/null &`
    (the runner leads a session of its own). Returns the runner's pid."""
    box.ssh(f"cd {shlex.quote(str(queue.parent))} || exit 1; {box.exports()}; "
            f"setsid nohup bash run_queue.sh {shlex.quote(queue.name)} > {shlex.quote(log)} 2>&1 "
            f"< /dev/null &")
    pid = find_runner(queue)
    box.runners.append(pid)
    return pid


def launch_screen(box: RunbookBox, queue: Path, name: str, log: Path) -> int:
    """GNU screen + tee:
    `screen -dmS q1 bash -c 'bash run_queue.sh q.txt 2>&1 | tee master.log'`. Returns the
    runner's pid (`quit_screen(name)` ends the screen session)."""
    inner = f"bash run_queue.sh {shlex.quote(queue.name)} 2>&1 | tee {shlex.quote(str(log))}"
    box.ssh(f"cd {shlex.quote(str(queue.parent))} || exit 1; {box.exports()}; "
            f"screen -dmS {shlex.quote(name)} bash -c {shlex.quote(inner)}")
    pid = find_runner(queue)
    box.runners.append(pid)
    return pid


def quit_screen(name: str) -> None:
    """End a screen session this test started (by its exact name)."""
    subprocess.run(["screen", "-S", name, "-X", "quit"], capture_output=True, check=False,
                   timeout=SSH_TIMEOUT)


def trainers(box: RunbookBox) -> list[int]:
    """Pids of trainers running in this box's project (cwd = PROJECT_REPO_DIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == str(box.project) and \
                        b"src.train" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def status_cells(sweep: Path, name: str | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """`cockpit status --json`: the instance's queue_view (the only one, or the one called
    `name`) and its cells by name."""
    result = cockpit("status", str(sweep), "--json")
    assert result.returncode in (0, 1), (result.returncode, result.stderr[-3000:])
    found = [i for i in json.loads(result.stdout)["instances"] if name is None or i["name"] == name]
    assert len(found) == 1, [i["name"] for i in json.loads(result.stdout)["instances"]]
    assert "queue_view" in found[0], f"no queue_view in status --json: {sorted(found[0])}"
    view = found[0]["queue_view"]
    return view, {c["name"]: c for c in view["cells"]}


def mtimes(paths: list[Path]) -> dict[str, int]:
    """Nanosecond mtimes of files that must not change."""
    return {str(p): p.stat().st_mtime_ns for p in paths}
