"""Bounds on what a box can make the cockpit hold or wait for (issue 13, "Exhaustion"/"YAML"):
every remote command's output is capped and a capped command is stopped and says so; a
`host: local` probe record longer than asyncio's 64 KiB stream limit is read; a Slurm array
range is never expanded past the queue; any YAML loader failure is file:line and exit 2.

Real parts throughout: OpenSSH sshd on loopback, local subprocesses, the CLI as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import asyncssh
import pytest

from cockpit.models.slurm import (
    MAX_ARRAY_TASKS,
    MAX_STEP_WORK,
    array_ranges,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
)
from cockpit.models.sweep import Instance
from cockpit.services.config.yamlfile import MAX_YAML_DEPTH
from cockpit.services.queue.launch import LaunchRefused
from cockpit.services.transport import remote
from cockpit.services.transport.remote import (
    STDERR_CAP,
    STDOUT_CAP,
    STOPPED,
    LocalBox,
    OutputTooLarge,
    SshBox,
)
from tests.sshd import Sshd, descendants
from tests.waiting import until

CLI = [sys.executable, "-m", "cockpit"]


async def _connect(sshd: Sshd) -> asyncssh.SSHClientConnection:
    """A connection to the test sshd with strict host-key checking."""
    return await asyncssh.connect(
        "127.0.0.1", port=sshd.port, username="root", client_keys=[str(sshd.client_key)],
        known_hosts=asyncssh.import_known_hosts(sshd.known_hosts_line()))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# -- every remote command's output is capped --------------------------------------------
@pytest.mark.sshd
async def test_endless_stdout_over_ssh_is_stopped_at_the_cap_and_says_so(sshd: Sshd) -> None:
    """`cat` of an endless queue file grew the cockpit to 4.1 GB in 10 s: now the command is
    stopped at STDOUT_CAP, its partial output is not handed on as if complete, and the
    remote command does not go on running."""
    conn = await _connect(sshd)
    box = SshBox(conn)
    tracemalloc.start()
    try:
        result = await box.run(["/bin/sh", "-c", "cat /dev/zero"], 120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.truncated == "stdout" and not result.complete
    assert result.status == STOPPED and result.stdout == b""
    assert f"more than {STDOUT_CAP} bytes" in result.stderr.decode() and "on stdout" in result.stderr.decode()
    assert peak < 3 * STDOUT_CAP, f"{peak >> 20} MiB held for a {STDOUT_CAP >> 20} MiB cap"
    with pytest.raises(OutputTooLarge, match="cockpit stopped this command"):
        result.require_complete()
    assert sshd.proc is not None
    await until("the remote cat ends once its channel is closed",
                lambda: not [p for p in descendants(sshd.proc.pid)  # type: ignore[union-attr]
                             if Path(f"/proc/{p}/comm").exists()
                             and Path(f"/proc/{p}/comm").read_text().strip() == "cat"], 30)
    # The connection is still good for the next command, whose output is whole.
    again = await box.run(["printf", "%s", "fine"], 30)
    assert (again.status, again.stdout, again.truncated) == (0, b"fine", "")
    conn.close()
    await conn.wait_closed()


async def test_local_command_flooding_stderr_is_stopped_with_its_whole_group(tmp_path: Path) -> None:
    """LocalBox caps stderr too, and kills the command's children (a `sh -c` pipeline would
    otherwise keep writing into a pipe nobody reads)."""
    pidfile = tmp_path / "pgid"
    result = await LocalBox().run(
        ["/bin/sh", "-c", f'echo $$ > "{pidfile}"; yes error | cat >&2'], 120)
    assert result.truncated == "stderr" and result.status == STOPPED and result.stdout == b""
    assert f"more than {STDERR_CAP} bytes" in result.stderr.decode()
    assert len(result.stderr) < 4096  # the note, not a megabyte of `error`
    pgid = int(pidfile.read_text())
    await until("the whole process group is gone", lambda: not _group_alive(pgid), 30)


async def test_local_endless_stdout_is_stopped_and_a_normal_command_is_whole(tmp_path: Path) -> None:
    capped = await LocalBox().run(["yes"], 120)
    assert capped.truncated == "stdout" and capped.stdout == b""
    whole = await LocalBox().run(["/bin/sh", "-c", "head -c 300000 /dev/zero; echo warn >&2; exit 3"], 60)
    assert (whole.status, len(whole.stdout), whole.stderr, whole.truncated) == (3, 300000, b"warn\n", "")


async def test_local_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "pgid"
    with pytest.raises(TimeoutError):
        await LocalBox().run(["/bin/sh", "-c", f'echo $$ > "{pidfile}"; sleep 600 | cat'], 1)
    pgid = int(pidfile.read_text())
    await until("the timed-out group is gone", lambda: not _group_alive(pgid), 30)


async def test_roster_from_an_endless_queue_file_is_an_error_naming_the_cap(tmp_path: Path) -> None:
    """verify's roster read (`cat QUEUE`) gets the cap through Box.run: a clear VerifyError."""
    from cockpit.services.custody.verify import VerifyError, read_roster

    inst = Instance(name="here", profile="local", host="local", queue="/dev/zero")
    with pytest.raises(VerifyError, match=f"more than {STDOUT_CAP} bytes"):
        await read_roster(LocalBox(), inst)


# -- host: local reads a record longer than asyncio's default 64 KiB limit -------------
def test_local_status_reads_a_master_log_line_longer_than_64_KiB(tmp_path: Path) -> None:
    """A 141 KB master-log line made the local probe's record overrun asyncio's default
    stream limit: `cockpit status` failed. LOCAL_STREAM_LIMIT is set on that stream."""
    box = tmp_path / "box"
    (box / "runs" / "logs").mkdir(parents=True)
    (box / "q1_master.log").write_text("x" * 141_000 + "\n")
    sweep = tmp_path / "local.yaml"
    sweep.write_text(f"""sweep: local-test
instances:
  - name: here
    profile: local
    host: local
    queue_log: "{box}/q1_master.log"
    run_logs: "{box}/runs/logs"
""")
    result = subprocess.run([*CLI, "status", str(sweep), "--json", "--timeout", "30"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (inst,) = json.loads(result.stdout)["instances"]
    assert inst["reachability"] == "connected"
    assert inst["queue"]["queue_log"]["size"] == 141_001
    assert remote.LOCAL_STREAM_LIMIT > 141_001


# -- Slurm array ranges are capped at the queue -----------------------------------------
def test_a_huge_squeue_range_is_capped_at_the_queue_length() -> None:
    """`5_[0-3000000]` (33 bytes) took 800 MB: now only tasks up to the queue's length (or
    MAX_ARRAY_TASKS when it is unknown) exist, and memory stays small."""
    tracemalloc.start()
    try:
        unknown = parse_squeue("5_[0-3000000]|PENDING|Priority\n", 5)
        huge = parse_squeue("5_[0-200000000]|PENDING|Priority\n", 5, cells=4)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(unknown) == MAX_ARRAY_TASKS + 1 and max(unknown) == MAX_ARRAY_TASKS
    assert sorted(huge) == [0, 1, 2, 3, 4] and huge[4].text == "PENDING (Priority)"
    assert peak < 32 << 20, f"{peak >> 20} MiB"


def test_normal_array_ranges_parse_exactly() -> None:
    tasks = parse_squeue("5_[0-3,7,9-12%2]|PENDING|JobArrayTaskLimit\n5_13|RUNNING|None\n", 5)
    assert sorted(tasks) == [0, 1, 2, 3, 7, 9, 10, 11, 12, 13]
    assert tasks[13].state == "RUNNING" and tasks[9].reason == "JobArrayTaskLimit"
    assert array_ranges("1-11:3", 100) == [range(1, 12, 3)]
    assert sorted(parse_squeue("5_[1-11:3]|PENDING|x\n", 5)) == [1, 4, 7, 10]
    # Clipped to the queue, and a later line wins over an earlier one for the same task.
    later = parse_squeue("5_[1-9]|PENDING|Priority\n5_2|RUNNING|None\n", 5, cells=3)
    assert {t: s.state for t, s in later.items()} == {1: "PENDING", 2: "RUNNING", 3: "PENDING"}


def test_hostile_slurm_listings_neither_raise_nor_blow_up() -> None:
    """5000-digit ids, codes and a range repeated a million times: read as data, bounded."""
    huge = "9" * 5000
    assert parse_squeue(f"5_{huge}|RUNNING|x\n{huge}_[1-3]|PENDING|x\n5_[1-{huge}]|PENDING|x\n", 5) == {}
    sacct = parse_sacct(f"5_1|FAILED|{huge}:{huge}|1\n5_{huge}|FAILED|1:0|1\n", 5)
    assert list(sacct) == [1] and sacct[1].exit_code is None and sacct[1].signal is None
    scontrol = parse_scontrol(f"ArrayJobId=5 ArrayTaskId={huge} JobState=FAILED\n"
                              f"ArrayJobId=5 ArrayTaskId=2 JobState=FAILED ExitCode={huge}:0\n"
                              "ArrayJobId=5 ArrayTaskId=99999999 JobState=FAILED\n", 5)
    assert list(scontrol) == [2] and scontrol[2].exit_code is None
    # Each task is set once, however often a listing repeats a range over it.
    repeated = parse_squeue("5_[0-200000000]|PENDING|x\n" * 200_000, 5, cells=50)
    assert len(repeated) == 51
    stepped = parse_squeue("5_[1-200000000:2]|PENDING|x\n" * 2_000, 5)
    assert len(stepped) == MAX_ARRAY_TASKS // 2 and MAX_STEP_WORK >= MAX_ARRAY_TASKS


def _stand_in(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


async def test_slurm_states_through_real_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """services.slurm.states runs squeue/sacct stand-ins as real subprocesses: a range from
    the box is clipped to the queue, and a listing that never ends is a refusal naming the
    cap, never a partial listing shown as if every missing task were pending."""
    from cockpit.services.queue import slurm

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    _stand_in(bin_dir, "squeue", "echo '5_[2-3000000]|PENDING|Priority'; echo '5_1|RUNNING|None'")
    _stand_in(bin_dir, "sacct", "echo '5_1|RUNNING|0:0|00:01:00'")
    inst = Instance(name="here", profile="slurm", host="local", queue="/q.txt")
    tasks = await slurm.states(LocalBox(), inst, 5, cells=3)
    assert {t: s.state for t, s in tasks.items()} == {1: "RUNNING", 2: "PENDING", 3: "PENDING"}
    _stand_in(bin_dir, "squeue", "yes '5_[1-3]|PENDING|Priority'")
    with pytest.raises(LaunchRefused, match=f"squeue: cockpit stopped this command.*{STDOUT_CAP}") as refused:
        await slurm.states(LocalBox(), inst, 5, cells=3)
    assert isinstance(refused.value, OutputTooLarge)  # what a caller other than launch catches


# -- YAML: any loader failure is file:line and exit 2 -----------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def _assert_config_error(result: subprocess.CompletedProcess[str], path: Path, line: int,
                         words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"{path}:{line}:" in result.stderr and words in result.stderr, result.stderr[-2000:]


SWEEP_HEAD = "sweep: x\ninstances:\n  - name: a\n    profile: local\n    host: local\n"


CASES = {  # name: (what follows the sweep's first five lines, line reported, words in the message)
    "huge_int": ("    queue_log: /q\nextra_port: " + "9" * 100_000 + "\n", 7,
                 "extra_port: an integer of 100000 characters"),
    "deep_flow": ("extra: " + "[" * 50_000 + "]" * 50_000 + "\n", 6,
                  f"more than {MAX_YAML_DEPTH} levels"),
    "deep_block": ("extra:\n" + "".join("  " * i + "- \n" for i in range(3000)),
                   7 + MAX_YAML_DEPTH - 1, "nested more than"),
    "self_alias": ("extra: &a [1, *a]\n", 6, "extra[1]: an alias refers to a list"),
    "month_13": ("    started: 2026-13-01\n", 6, "instances[0].started: cannot read this timestamp"),
    "huge_key": ("    ? " + "7" * 10_000 + "\n    : x\n", 6, "an integer of 10000 characters"),
}


# ids keep the multi-megabyte parameters out of the test id (and out of PYTEST_CURRENT_TEST,
# which the CLI subprocess would inherit: E2BIG).
@pytest.mark.parametrize("name", list(CASES))
def test_a_sweep_the_loader_cannot_build_is_file_line_exit_2(tmp_path: Path, name: str) -> None:
    tail, line, words = CASES[name]
    sweep = tmp_path / f"{name}.yaml"
    sweep.write_text(SWEEP_HEAD + tail)
    _assert_config_error(_cli("status", str(sweep)), sweep, line, words)


def test_a_profile_and_a_rule_file_the_loader_cannot_build_are_file_line_exit_2(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    bad_profile = profiles / "deep.yaml"
    bad_profile.write_text("platform: deep\nstorage: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n")
    _assert_config_error(_cli("profiles", "check", "--dir", str(profiles)), bad_profile, 2,
                         "nested more than")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - id: X1\n    weight: " + "1" * 50_000 + "\n")
    log = tmp_path / "run.log"
    log.write_text("hello\n")
    _assert_config_error(_cli("classify", "--rules", str(rules), str(log)), rules, 3,
                         "rules[0].weight: an integer of 50000 characters")
