"""`cockpit discover`: find a running sweep the cockpit did not launch and write its sweep file.

Read-only, one remote command per host. The queue runners are the processes whose argv runs
a `run_queue*.sh`; their argv (with their working directory) names the queue file. The master
log is the file a `tee` *beside* the runner writes (`run_queue.sh Q | tee master.log`); the
per-run logs are the `.log` files the runner's own descendants hold open (run_one's tee), so
their folder is `run_logs`. The tmux session is the one whose pane is an ancestor of the
runner. The user reviews the printed YAML (durable_root cannot be discovered) and saves it.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from cockpit.services.remote import SshBox

DISCOVER_SCRIPT = r"""
LC_ALL=C; export LC_ALL
b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
# One ps for the whole table; only the sessions that hold a queue runner are read in detail.
table=$(ps -eo pid=,ppid=,pgid=,sid=,args= 2>/dev/null)
sids=$(printf '%s\n' "$table" \
  | awk '$5 ~ /(^|\/)(ba)?sh$/ && $6 ~ /(^|\/)run_queue[^\/]*\.sh$/ {print $4}' | sort -u)
printf '%s\n' "$table" | while read -r p pp pg sd _; do
  echo "A $p $pp $pg $sd"
  for want in $sids; do
    [ "$sd" = "$want" ] || continue
    d=/proc/$p
    args=$(tr '\0' '\n' < "$d/cmdline" 2>/dev/null) || continue
    echo "P $p $pp $sd $(b64 "$args") $(b64 "$(readlink "$d/cwd" 2>/dev/null)") $pg"
    for f in "$d"/fd/*; do
      t=$(readlink "$f" 2>/dev/null) || continue
      case "$t" in *.log) echo "F $p $(b64 "$t")" ;; esac
    done
  done
done
if command -v tmux >/dev/null 2>&1; then
  tmux list-panes -a -F '#{session_name} #{pane_pid}' 2>/dev/null | while read -r s pid; do
    echo "T $pid $(b64 "$s")"
  done
fi
"""
RUNNER = re.compile(r"(^|/)run_queue[^/]*\.sh$")


def _b64(text: str) -> str:
    return base64.b64decode(text).decode("utf-8", errors="replace") if text else ""


@dataclass
class Proc:
    """One process as the discovery script saw it."""

    pid: int
    ppid: int
    sid: int
    argv: list[str]
    cwd: str
    pgid: int = 0
    logs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FoundQueue:
    """A running queue: what a sweep file needs to follow it."""

    queue: str
    start_index: int
    queue_log: str | None
    run_logs: str | None
    tmux_session: str | None
    pid: int


def parse(output: str) -> tuple[dict[int, Proc], dict[int, str]]:
    """The script's output: processes (with their open .log files) and tmux pane pids."""
    procs: dict[int, Proc] = {}
    panes: dict[int, str] = {}
    for line in output.splitlines():
        parts = line.split(" ")
        if parts[0] == "A" and len(parts) == 5 and all(x.isdigit() for x in parts[1:]):
            # Every process, for ancestry (detail only for the sessions with a runner).
            pid = int(parts[1])
            if pid not in procs:
                procs[pid] = Proc(pid, int(parts[2]), int(parts[4]), [], "", int(parts[3]))
        elif parts[0] == "P" and len(parts) >= 6:
            procs[int(parts[1])] = Proc(int(parts[1]), int(parts[2]), int(parts[3]),
                                        _b64(parts[4]).split("\n"), _b64(parts[5]),
                                        int(parts[6]) if len(parts) > 6 and parts[6].isdigit() else 0)
        elif parts[0] == "F" and len(parts) == 3 and int(parts[1]) in procs:
            procs[int(parts[1])].logs.append(_b64(parts[2]))
        elif parts[0] == "T" and len(parts) == 3:
            panes[int(parts[1])] = _b64(parts[2])
    return procs, panes


def ancestors(pid: int, procs: dict[int, Proc]) -> list[int]:
    """Parent, grandparent, ... of `pid` as far as the process table goes."""
    out: list[int] = []
    while pid in procs and pid > 1 and len(out) < 64:
        pid = procs[pid].ppid
        out.append(pid)
    return out


def find_queues(procs: dict[int, Proc], panes: dict[int, str]) -> list[FoundQueue]:
    """Every run_queue process that is not itself the child of another (bash forks for `$(...)`)."""
    found = []
    runners = {p.pid for p in procs.values()
               if len(p.argv) >= 3 and p.argv[0].endswith(("bash", "sh")) and RUNNER.search(p.argv[1])}
    for pid in sorted(runners):
        proc = procs[pid]
        if proc.ppid in runners:
            continue  # a subshell of the runner
        queue = PurePosixPath(proc.argv[2])
        if not queue.is_absolute():
            queue = PurePosixPath(proc.cwd) / queue
        start = int(proc.argv[3]) if len(proc.argv) > 3 and proc.argv[3].isdigit() else 1
        descendants = {p.pid for p in procs.values() if pid in ancestors(p.pid, procs)}
        run_logs = sorted({str(PurePosixPath(f).parent) for d in descendants for f in procs[d].logs})
        siblings = [p for p in procs.values() if p.sid == proc.sid and p.pid not in descendants
                    and p.pid != pid and p.argv and p.argv[0].endswith("tee")]
        master = next((f for p in siblings for f in p.logs), None)
        session = next((panes[a] for a in ancestors(pid, procs) if a in panes), None)
        found.append(FoundQueue(str(queue), start, master, run_logs[0] if run_logs else None,
                                session, pid))
    return found


def sweep_document(name: str, hosts: list[tuple[str, str, list[FoundQueue]]],
                   ssh_config: list[str] | None = None) -> str:
    """A sweep file for the queues found, to review and save."""
    instances: list[dict[str, Any]] = []
    for host, profile, queues in hosts:
        for index, queue in enumerate(queues, start=1):
            base = re.sub(r"[^A-Za-z0-9_.-]", "-", host.split("@")[-1]).strip("-.") or "box"
            inst: dict[str, Any] = {"name": base if len(queues) == 1 else f"{base}-{index}",
                                    "profile": profile, "host": host, "queue": queue.queue}
            for key in ("queue_log", "run_logs", "tmux_session"):
                value = getattr(queue, key)
                if value:
                    inst[key] = value
            instances.append(inst)
    head = ("# Written by `cockpit discover` from the running queue(s); review it, add\n"
            "# durable_root (where finished cells are copied) and instance_id, then save.\n")
    doc: dict[str, Any] = {"sweep": name}
    if ssh_config:
        doc["ssh"] = {"config": ssh_config}
    doc["instances"] = instances
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


async def discover_host(conn: Any) -> list[FoundQueue]:
    """Run the discovery script on one connection.

    Its output is bounded by the box's stdout cap (remote.STDOUT_CAP); past it the command is
    stopped and OutputTooLarge names the cap (a partial process table would miss runners).
    """
    result = (await SshBox(conn).run(["/bin/sh", "-c", DISCOVER_SCRIPT], 60)).require_complete()
    procs, panes = parse(result.stdout.decode(errors="replace"))
    return find_queues(procs, panes)
