"""The embedded demo fleet: local SSH servers, each a sandbox "box" with a real queue.

Every box is an asyncssh server on 127.0.0.1 (random port, ephemeral host key, one client
key) that runs commands with /bin/sh inside a sandbox folder, with a simulated nvidia-smi on
its PATH. A real `run_queue.sh` runs real cells that write real tiny torch checkpoints,
per-run logs (one CUDA OOM, one disk-full) and durable copies. The cockpit reaches the
boxes through an ssh_config alias and a known_hosts file, with strict host-key checking,
through exactly the same client code as a rented box.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import asyncssh

from cockpit.demo.platforms import PlatformStandIn

ASSETS = Path(__file__).with_name("assets")
READY = "READY"


@dataclass(frozen=True)
class Cell:
    """One queue line of a demo box, with how its config behaves."""

    name: str
    task: str
    epochs: int
    seconds_per_epoch: float
    fail: str | None = None
    fail_at_epoch: int = 1
    base_metric: float = 24.0


@dataclass(frozen=True)
class BoxSpec:
    """A demo box: its profile, GPUs, where the profile's tiers live, and its queue."""

    name: str
    profile: str
    gpu_conf: str
    tiers: dict[str, str]  # tier id -> sub-path of the box folder
    cells: tuple[Cell, ...]
    price_per_hour: float
    tmux_session: str


BOXES: tuple[BoxSpec, ...] = (
    BoxSpec(
        "a1", "autodl",
        'GPU_NAME="NVIDIA A100-SXM4-80GB"\nGPU_COUNT=2\nMEM_TOTAL_MIB=81920\nPOWER_LIMIT=400\n'
        "CLOCK_MAX=1410\n",
        {"system": ".", "data": "data", "shared": "durable"},
        (
            Cell("baseline", "reconstruction", 6, 1.0, base_metric=27.1),
            Cell("no_aug", "reconstruction", 6, 1.0, base_metric=25.4),
            Cell("det_baseline", "detection", 50, 1.0, fail="cuda_oom", fail_at_epoch=3),
            Cell("aug_strong", "reconstruction", 600, 1.5, base_metric=26.2),
        ),
        1.98, "q1",
    ),
    BoxSpec(
        "r1", "runpod",
        'GPU_NAME="NVIDIA GeForce RTX 4090"\nGPU_COUNT=1\nMEM_TOTAL_MIB=24564\nPOWER_LIMIT=450\n'
        "CLOCK_MAX=2520\n",
        {"container": ".", "volume": "data", "network_volume": "durable"},
        (
            Cell("seg_baseline", "segmentation", 5, 1.2, base_metric=0.71),
            Cell("seg_big", "segmentation", 20, 1.0, fail="disk_full", fail_at_epoch=4),
            Cell("seg_small", "segmentation", 400, 2.0, base_metric=0.64),
        ),
        0.69, "q1",
    ),
    BoxSpec(
        "v1", "vastai",
        'GPU_NAME="NVIDIA H100 80GB HBM3"\nGPU_COUNT=1\nMEM_TOTAL_MIB=81559\nPOWER_LIMIT=700\n'
        "CLOCK_MAX=1980\nPOWER_NA=1\n",
        {"container": "."},
        (
            Cell("precision_fp16", "classification", 4, 0.8, base_metric=0.91),
            Cell("precision_bf16", "classification", 4, 0.8, base_metric=0.92),
            Cell("mask_rate_50", "classification", 4, 0.8, base_metric=0.88),
        ),
        2.40, "q1",
    ),
)


def _cfg_text(cell: Cell) -> str:
    lines = [f"seconds_per_epoch: {cell.seconds_per_epoch}", f"base_metric: {cell.base_metric}"]
    if cell.fail:
        lines += [f"fail: {cell.fail}", f"fail_at_epoch: {cell.fail_at_epoch}"]
    return "\n".join(lines) + "\n"


class Box:
    """One sandbox folder and its SSH server."""

    def __init__(self, spec: BoxSpec, root: Path) -> None:
        self.spec = spec
        self.root = root / "boxes" / spec.name
        self.server: Any = None
        self.port = 0

    # -- layout ------------------------------------------------------------------------
    def lay_out(self) -> None:
        """Create the box's folders, scripts, configs and queue file."""
        for sub in ("bin", "run", "tmp", "data/runs/logs", "data/checkpoints", "durable",
                    "configs/ablation"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "tmp", 0o700)
        shutil.copy(ASSETS / "nvidia-smi", self.root / "bin" / "nvidia-smi")
        os.chmod(self.root / "bin" / "nvidia-smi", 0o755)
        # The queue runner is the cockpit's own (the one `cockpit launch` deploys); the cell
        # runner is the demo's, which runs the demo trainer.
        shutil.copy(ASSETS.parent.parent / "data" / "run_queue.sh", self.root / "run_queue.sh")
        shutil.copy(ASSETS / "run_one.sh", self.root / "run_one.sh")
        (self.root / "gpu.conf").write_text(self.spec.gpu_conf)
        lines = ["# demo queue: <cfg> <task> [epochs]"]
        for cell in self.spec.cells:
            cfg = self.root / "configs" / "ablation" / f"{cell.name}.yaml"
            cfg.write_text(_cfg_text(cell))
            lines.append(f"configs/ablation/{cell.name}.yaml {cell.task} {cell.epochs}")
        (self.root / "queue_1.txt").write_text("\n".join(lines) + "\n")

    def env(self) -> dict[str, str]:
        """The environment every command in the box runs with."""
        env = {
            key: value for key, value in os.environ.items()
            if key in {"LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL"}
        }
        env.update(
            HOME=str(self.root),
            PATH=f"{self.root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            COCKPIT_BOX=str(self.root),
            TMUX_TMPDIR=str(self.root / "tmp"),
            PY=sys.executable,
            DEMO_HOSTNAME=f"demo-{self.spec.name}",
            DATA_DIR=str(self.root / "data"),
            DURABLE_DIR=str(self.root / "durable"),
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        )
        return env

    # -- ssh -----------------------------------------------------------------------------
    async def _handle(self, process: Any) -> None:
        command = process.command or "exec /bin/sh -i"
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, cwd=self.root, env=self.env(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
        try:
            # send_eof=False: an SSH EOF ends stdout and stderr together, so the end of one
            # pipe must not send it. stdout ending first sent EOF while tmux's "can't find
            # session" was still on its way on stderr; writing it raised in asyncssh's
            # forwarding task, which dropped the whole connection (flaky under load).
            await process.redirect(stdin=proc.stdin, stdout=proc.stdout, stderr=proc.stderr,
                                   send_eof=False)
            status = await proc.wait()
            for stream in (process.stdout, process.stderr):  # both pipes forwarded, then exit
                with contextlib.suppress(Exception):
                    await stream.drain()
            process.exit(status)
            # asyncssh queues a `Queue.join()` per redirected pipe as cleanup, awaited only by
            # wait_closed(); left alone they surfaced at exit (Ctrl-C) as "coroutine
            # 'Queue.join' was never awaited".
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait_closed(), 10)
        except (asyncio.CancelledError, OSError, asyncssh.Error):
            if proc.returncode is None:
                proc.kill()
            raise
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()

    async def start_server(self, host_key: Any, client_pub: Path) -> None:
        """Listen on 127.0.0.1 with a random port."""
        self.server = await asyncssh.listen(
            "127.0.0.1", 0,
            server_host_keys=[host_key],
            authorized_client_keys=str(client_pub),
            process_factory=self._handle,
            sftp_factory=True,
            encoding=None,
            allow_scp=True,
        )
        self.port = int(self.server.sockets[0].getsockname()[1])

    # -- queue ---------------------------------------------------------------------------
    def start_queue(self) -> None:
        """Start run_queue.sh like a user would: in tmux when there is tmux, else nohup."""
        master = self.root / "data" / "q1_master.log"
        run = f"bash run_queue.sh queue_1.txt 2>&1 | tee {master}"
        if shutil.which("tmux"):
            subprocess.run(
                ["tmux", "new-session", "-d", "-s", self.spec.tmux_session, run],
                cwd=self.root, env=self.env(), check=True,
            )
        else:
            subprocess.Popen(
                ["/bin/sh", "-c", f"exec {run}"], cwd=self.root, env=self.env(),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

    def stop_processes(self) -> None:
        """Stop the box's tmux server and every process that carries this box's marker."""
        if shutil.which("tmux"):
            subprocess.run(["tmux", "kill-server"], env=self.env(), cwd=self.root,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        kill_marked(f"COCKPIT_BOX={self.root}")


def kill_marked(marker: str) -> None:
    """SIGTERM, then SIGKILL, every process whose environment contains `marker`."""
    needle = marker.encode() + b"\0"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ + b"\0":
                pids.append(int(entry.name))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if not pids:
            return
        time.sleep(0.3)


class DemoFleet:
    """All demo boxes plus the client files (key, known_hosts, ssh_config, sweep.yaml)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.boxes = [Box(spec, self.root) for spec in BOXES]
        self.platforms: PlatformStandIn | None = None
        """The RunPod and vast.ai API stand-in (platform truth for the demo's billing view)."""

    async def start(self) -> Path:
        """Lay out the boxes, start their servers and queues, write sweep.yaml."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / READY).unlink(missing_ok=True)
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = self.root / "client_key"
        key_path.write_bytes(client_key.export_private_key())
        os.chmod(key_path, 0o600)
        client_key.write_public_key(str(key_path) + ".pub")
        known_lines = []
        for box in self.boxes:
            host_key = asyncssh.generate_private_key("ssh-ed25519")
            box.lay_out()
            await box.start_server(host_key, Path(str(key_path) + ".pub"))
            public = host_key.export_public_key("openssh").decode().strip()
            known_lines.append(f"[127.0.0.1]:{box.port} {public}")
        (self.root / "known_hosts").write_text("\n".join(known_lines) + "\n")
        self._write_ssh_config(key_path)
        self._write_cli_stand_ins()
        self.platforms = PlatformStandIn(self.root / "platform-api-calls.log")
        self.platforms.start()
        sweep = self._write_sweep()
        for box in self.boxes:
            box.start_queue()
        (self.root / READY).write_text(str(os.getpid()))
        return sweep

    def _write_ssh_config(self, key_path: Path) -> None:
        blocks = []
        for box in self.boxes:
            blocks.append(
                f"Host demo-{box.spec.name}\n"
                f"  HostName 127.0.0.1\n  Port {box.port}\n  User demo\n"
                f"  IdentityFile {key_path}\n"
                f"  UserKnownHostsFile {self.root / 'known_hosts'}\n"
            )
        (self.root / "ssh_config").write_text("\n".join(blocks))

    def _write_cli_stand_ins(self) -> None:
        """`vastai` and `runpodctl` stand-ins in DIR/bin (the sweep's cli_path): an approved
        teardown of a demo box runs one, which records the call in DIR/teardown-calls.log."""
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        calls = shlex.quote(str(self.root / "teardown-calls.log"))
        for tool in ("vastai", "runpodctl"):
            script = bin_dir / tool
            script.write_text(
                "#!/bin/sh\n"
                f"# cockpit demo stand-in for the {tool} CLI: records the call, touches nothing.\n"
                f"printf '%s %s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" \"{tool} $*\" >> {calls}\n"
                f"echo \"(demo) {tool} $*: recorded in teardown-calls.log; no real instance exists\"\n")
            script.chmod(0o755)

    def _write_sweep(self) -> Path:
        import yaml

        instances = []
        for box in self.boxes:
            data = box.root / "data"
            instances.append({
                "name": box.spec.name,
                "profile": box.spec.profile,
                "host": f"demo-{box.spec.name}",
                "instance_id": f"demo-{box.spec.name}-0001",
                "price_per_hour": box.spec.price_per_hour,
                "queue": str(box.root / "queue_1.txt"),
                "queue_log": str(data / "q1_master.log"),
                "run_logs": str(data / "runs" / "logs"),
                "checkpoints": str(data / "checkpoints"),
                "durable_root": str(box.root / "durable"),
                "tmux_session": box.spec.tmux_session,
                # For `cockpit launch`/`resume` (our runners); PY is in every demo box's env.
                "launch": {"command": '"$PY" -m cockpit.demo.trainer --config "$CFG" --task '
                                      '"$TASK" --epochs "$EPOCHS" --name "$NAME" --ckpt-dir '
                                      '"$CKPT_DIR"',
                           "workdir": str(box.root)},
                "mounts": {tier: str((box.root / sub).resolve())
                           for tier, sub in box.spec.tiers.items()},
            })
        doc = {
            "sweep": "demo-fleet",
            "pull_dir": str(self.root / "pulled"),
            "interval": "2s",
            "ssh": {"config": ["ssh_config"], "known_hosts": ["known_hosts"]},
            "cli_path": ["bin"],
            # The API stand-in: the demo's (demo-…) instances are asked there with the demo
            # key, never the user's.
            "platform_api": self.platforms.bases() if self.platforms is not None else {},
            "instances": instances,
        }
        path = self.root / "sweep.yaml"
        header = "# Written by `cockpit demo --serve`; the boxes live under boxes/.\n"
        path.write_text(header + yaml.safe_dump(doc, sort_keys=False))
        return path

    async def stop(self) -> None:
        """Stop queues and servers; leave no process behind."""
        for box in self.boxes:
            if box.server is not None:
                box.server.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(box.server.wait_closed(), 3)
        for box in self.boxes:
            box.stop_processes()
        if self.platforms is not None:
            self.platforms.stop()
            self.platforms = None
        (self.root / READY).unlink(missing_ok=True)


async def serve(root: Path) -> None:
    """Run the demo fleet until SIGINT or SIGTERM."""
    fleet = DemoFleet(root)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGHUP too: closing the terminal of `cockpit demo` must not leak the boxes' queues.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()

    async def orphaned() -> None:
        # The TUI that started us died without stopping us (SIGKILL): stop on our own.
        while os.getppid() == parent:  # noqa: ASYNC110 - no event exists for "parent died"
            await asyncio.sleep(1)
        stop.set()

    watchdog = asyncio.create_task(orphaned())
    try:
        sweep = await fleet.start()
        print(f"demo fleet: {len(fleet.boxes)} boxes on 127.0.0.1 "
              f"({', '.join(str(b.port) for b in fleet.boxes)})", flush=True)
        print(f"sweep file: {sweep}", flush=True)
        print("try: cockpit status " + str(sweep) + "   (Ctrl-C stops the fleet)", flush=True)
        await stop.wait()
    finally:
        watchdog.cancel()
        await fleet.stop()


def start_serving(root: Path, stdout: IO[bytes] | int, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    """Spawn `cockpit demo --serve ROOT` and return once it has written ROOT/READY.

    If it exits or is not ready within `timeout`, it is stopped and RuntimeError raised
    (with its output when `stdout` is a pipe; otherwise the output is wherever it went).
    """
    child = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "demo", "--serve", str(root)],
        stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout
    while not (root / READY).exists():
        if child.poll() is not None or time.monotonic() > deadline:
            if child.poll() is None:
                child.kill()
            child.wait()
            output = child.stdout.read().decode(errors="replace") if child.stdout else ""
            raise RuntimeError("the demo fleet did not start" + (f":\n{output}" if output else ""))
        time.sleep(0.1)
    return child


@contextlib.contextmanager
def serving_in_child(root: Path, log_path: Path) -> Iterator[Path]:
    """Serve the demo fleet from `root` in a child process; yields the sweep file.

    The child is stopped with SIGTERM (it stops its queues and servers) when the block ends.
    Raises RuntimeError with the child's output if the fleet does not come up in 60 s.
    """
    with open(log_path, "wb") as log:
        try:
            child = start_serving(root, log)
        except RuntimeError as exc:
            log.flush()
            raise RuntimeError(f"{exc}:\n{log_path.read_text(errors='replace')}") from None
        try:
            yield root / "sweep.yaml"
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(20)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()


def run_demo(serve_dir: Path | None, theme: str | None = None) -> int:
    """`cockpit demo`: serve only (`--serve DIR`), or serve in a child process and open the TUI."""
    if serve_dir is not None:
        asyncio.run(serve(serve_dir))
        return 0
    with tempfile.TemporaryDirectory(prefix="cockpit-demo-") as tmp:
        root = Path(tmp)
        try:
            with serving_in_child(root, root / "server.log") as sweep:
                from cockpit.services.config.sweepfile import load_sweep
                from cockpit.ui.app import run_app

                return run_app(load_sweep(sweep), theme=theme)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
