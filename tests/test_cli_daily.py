"""The CLI as a daily driver: the real `cockpit` process in pipes, a tmux terminal, with Ctrl-C.

Width (full when piped, the terminal's in a terminal), the status queue column (k/N, failed
cells), `--json` on the printing commands, a closed pipe, teardown without --dry-run, the
profile table with CJK names, `profiles check` exit codes, and clean Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from rich.cells import cell_len

from tests.sshd import Sshd, free_port, require

REPO_ROOT = Path(__file__).parents[1]
LONG_NAME = "exp-2026-11-ablation-warmup-cosine-lr3e-4-seed1234-node-a100-x8-01"[:64]
DEADLINE_S = 90.0


def cockpit(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def write_sweep(path: Path, name: str, port: int, profile: str = "generic-ssh") -> Path:
    path.write_text(yaml.safe_dump({
        "sweep": "daily", "ssh": {"connect_timeout": "5s"},
        "instances": [{"name": name, "profile": profile, "host": "127.0.0.1", "port": port,
                       "user": "root"}]}))
    return path


# -- width ------------------------------------------------------------------------------------


def test_piped_status_is_full_width_with_whole_names(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "s.yaml", LONG_NAME, free_port())
    ran = cockpit("status", str(sweep), "--timeout", "10")
    assert ran.returncode == 1  # nothing listens there
    rows = [line for line in ran.stdout.splitlines() if LONG_NAME in line]
    assert len(rows) == 1, ran.stdout  # one row, the name whole (not folded at 80 columns)
    assert cell_len(rows[0]) > 80 and "unreachable" in rows[0]


def test_status_in_a_terminal_fits_the_terminal(tmp_path: Path) -> None:
    require(shutil.which("tmux") or "/usr/bin/tmux", "tmux")
    sweep = write_sweep(tmp_path / "s.yaml", LONG_NAME, free_port())
    done = tmp_path / "done"
    sock = f"cockpit-cli-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    command = (f"cd {REPO_ROOT} && {sys.executable} -m cockpit status {sweep} --timeout 10; "
               f"touch {done}; sleep 60")
    env = {"HOME": os.environ["HOME"], "COCKPIT_STATE_DIR": os.environ["COCKPIT_STATE_DIR"],
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color"}
    env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "24", *env_args, command],
                   check=True, timeout=15)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not done.exists():
            assert time.monotonic() < deadline, "status did not finish in the terminal"
            time.sleep(0.3)
        # -J joins lines the terminal wrapped: a table wider than 80 columns would show here.
        screen = subprocess.run([*tmux, "capture-pane", "-p", "-J"], capture_output=True,
                                text=True, check=True, timeout=15).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=15, capture_output=True)
    table = [line.rstrip() for line in screen.splitlines() if line and line[0] in "┏┃┡│└"]
    assert table, screen
    assert all(cell_len(line) <= 80 for line in table), screen
    assert table[0].endswith("┓") and table[-1].endswith("┘")


def test_status_queue_column_shows_k_of_n_and_failed_cells(demo: Path) -> None:
    sweep = demo / "sweep.yaml"
    deadline = time.monotonic() + DEADLINE_S
    while True:
        ran = cockpit("status", str(sweep))
        rows = {line.split("│")[1].strip(): line for line in ran.stdout.splitlines()
                if line.startswith("│")}
        if "failed:" in rows.get("r1", ""):
            break
        assert time.monotonic() < deadline, f"r1's failed cell never showed:\n{ran.stdout}"
        time.sleep(1)
    assert set(rows) == {"a1", "r1", "v1"}
    for row in rows.values():
        assert re.search(r"│ \d+/\d+ ", row), row  # k/N, not only "running"
    assert re.search(r"│ \d+/3 [^│]*; 1 failed: seg_big", rows["r1"])


# -- --json, teardown, profiles ------------------------------------------------------------------


def test_teardown_without_dry_run_says_where_teardown_runs(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "s.yaml", "a1", 2222, profile="autodl")
    ran = cockpit("teardown", str(sweep), "--instance", "a1")
    assert ran.returncode == 2
    assert "teardown runs only from the TUI's teardown screen" in ran.stderr
    assert "usage:" not in ran.stderr and ran.stdout == ""

    plan = cockpit("teardown", str(sweep), "--instance", "a1", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["dry_run"] is True and doc["instance"] == "a1" and "LOCKED" in doc["gate"]
    release = next(a for a in doc["actions"] if a["id"] == "release")
    assert release["reversible"] is False and release["keeps"] == ["/root/autodl-fs"]
    assert release["destroys"]
    text = cockpit("teardown", str(sweep), "--instance", "a1", "--dry-run")
    assert text.returncode == 0 and "[release]" in text.stdout


def test_profiles_list_aligns_cjk_names_and_has_json() -> None:
    rows = json.loads(cockpit("profiles", "list", "--json").stdout)["profiles"]
    assert any(cell_len(r["display_name"]) > len(r["display_name"]) for r in rows)  # CJK there
    lines = cockpit("profiles", "list").stdout.splitlines()
    starts = set()
    for row in rows:
        (line,) = [ln for ln in lines if ln.startswith(row["name"] + " ")]
        starts.add(cell_len(line[:line.index(row["meter_stop"], len(row["name"]) +
                                                 len(row["display_name"]))]))
    assert len(starts) == 1, lines  # the meter-stop column starts at one terminal column


def test_profiles_show_json_is_the_profile() -> None:
    doc = json.loads(cockpit("profiles", "show", "runpod", "--json").stdout)
    text = yaml.safe_load(cockpit("profiles", "show", "runpod").stdout)
    assert doc == text and doc["platform"] == "runpod"


def test_profiles_check_exit_codes(tmp_path: Path) -> None:
    fresh = cockpit("profiles", "check", "--today", "2026-11")
    assert fresh.returncode == 0, fresh.stdout  # the shipped stamps are re-checked
    assert "STALE" not in fresh.stdout
    stale = cockpit("profiles", "check", "--today", "2027-06", "--json")
    assert stale.returncode == 1
    doc = json.loads(stale.stdout)
    assert doc["valid"] is True and {"platform": "autodl", "group": "storage",
                                     "verified": "2026-06", "age_months": 12} in doc["stale"]
    (tmp_path / "broken.yaml").write_text("platform: broken\nkind: nope\n")
    bad = cockpit("profiles", "check", "--dir", str(tmp_path), "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["valid"] is False


@pytest.mark.sshd
def test_trust_and_discover_have_json(sshd: Sshd, tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    line = f"ssh -p {sshd.port} -i {sshd.client_key} root@127.0.0.1"
    assert cockpit("add", str(sweep), line, "--profile", "generic-ssh", "--name", "b1",
                   "--offline").returncode == 0
    fp = subprocess.run(["ssh-keygen", "-lf", f"{sshd.host_key}.pub"], capture_output=True,
                        text=True, check=True).stdout.split()[1]
    trusted = cockpit("trust", str(sweep), "b1", "--fingerprint", fp, "--json")
    assert trusted.returncode == 0, trusted.stderr
    assert json.loads(trusted.stdout) == {"instance": "b1", "host": "127.0.0.1",
                                          "port": sshd.port, "algorithm": "ssh-ed25519",
                                          "fingerprint": fp, "trusted": True}
    config = sshd.write_client_files("box-1", tmp_path)
    found = cockpit("discover", "box-1", "--ssh-config", str(config), "--json")
    doc = json.loads(found.stdout)
    assert [h["host"] for h in doc["hosts"]] == ["box-1"]
    assert (doc["sweep"] is None) == (found.returncode == 1 and not doc["hosts"][0]["queues"])


# -- a closed pipe, Ctrl-C -------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("profiles", "list"), ("profiles", "show", "runpod"),
                                  ("profiles", "check", "--json")])
def test_a_closed_pipe_ends_quietly(args: tuple[str, ...]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte (`| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert "Exception ignored" not in err


def test_head_on_a_real_pipeline_prints_no_traceback(tmp_path: Path) -> None:
    ran = subprocess.run(
        f"{sys.executable} -m cockpit profiles show runpod --json | head -c 1",
        shell=True, capture_output=True, text=True, timeout=60)
    assert ran.stdout == "{"
    assert "Traceback" not in ran.stderr and "BrokenPipe" not in ran.stderr


def test_ctrl_c_on_status_exits_130_without_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts TCP, never sends an SSH banner
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        silent.settimeout(DEADLINE_S)
        sweep = write_sweep(tmp_path / "s.yaml", "a1", silent.getsockname()[1])
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "status", str(sweep)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        conn, _ = silent.accept()  # status is inside asyncio, waiting on this box
        try:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            conn.close()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err


def test_ctrl_c_on_demo_serve_is_clean(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    root.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "demo", "--serve", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not (root / "READY").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no demo fleet"
            time.sleep(0.2)
        # Sessions that ran and ended left asyncssh's pipe cleanups behind (the warning).
        assert cockpit("status", str(root / "sweep.yaml")).returncode in (0, 1)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert "never awaited" not in text and "Traceback" not in text, text
    assert proc.returncode == 0
