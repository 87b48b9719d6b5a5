"""`cockpit discover`: find a running sweep the cockpit did not launch and write its sweep file.

Read-only, one remote command per host. The queue runners are the processes whose argv runs
a `run_queue*.sh`; their argv (with their working directory) names the queue file. The rest
comes from the open files in /proc, the same whichever way the user launched the queue
(tmux + tee, tmux with `> log 2>&1`, `nohup … >master.log 2>&1 &`, `setsid`, `screen`):

- the master log is the runner's stdout when that is a regular file (nohup, `> log`), else the
  file the process reading the runner's stdout pipe writes (the `tee` of `… | tee log`);
- `run_logs` is the folder the *cells'* logs are written to: the files written by the
  processes under the runner that are not the runner itself (run_one.sh and its tee), never
  the master log they inherit as stdout. A file named after the running cell (`<cell>.log`,
  the cell runner's config argument) decides; else a file a cell's tee or stdout writes; when
  that names more than one folder, or no cell runs at that moment, the field is NOT FOUND;
- the tmux session is the one whose pane is the runner or an ancestor of it.

Nothing is guessed: a field without that evidence is printed as a `# FIELD: NOT FOUND — …`
comment saying what it is and how to fill it.

`runner:` records how to run the queue again the same way, so `cockpit resume` / `rerun` need
no hand edit: the runner script's absolute path and shell, its working directory, how its
output reached the master log (`tee`, or `redirect`: its stdout is the file), and from the
runner's /proc/PID/environ ONLY the names in `RUNNER_ENV` (the runbook's PROFILE BLOCK): the
box filters them (`grep -z`) and the cockpit checks each name again; every other variable
(API keys) never leaves the box. A value with control characters is not printed (NOT FOUND,
with the reason). durable_root is still for the user to add (DURABLE_DIR is where the runbook
keeps its scripts, not necessarily the cockpit's durable root).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from cockpit.models.sweep import RUNNER_ENV
from cockpit.models.text import visible
from cockpit.services.transport.remote import SshBox

MAX_FILES_PER_PROCESS = 64
"""Regular files (beyond stdin/stdout/stderr) reported per process: a cell's logs are among
its first few; a trainer with thousands of open dataset files must not flood the output
(which Box.run caps at remote.STDOUT_CAP in any case)."""
MAX_ANCESTRY = 64
"""Parent links followed from one process (a process table is a forest; this bounds a loop
that a table read while processes exit could otherwise contain)."""
MAX_CANDIDATES = 4
"""Candidate folders named in a NOT FOUND note (the rest are counted)."""
CANDIDATE_CHARS = 160
"""Characters of one candidate path shown in a note (a path from the box may be 4 KiB)."""
YAML_WIDTH = 4096
"""Line width for the printed YAML: a long path stays on one line (PyYAML folds at 80)."""
MAX_ENV_VALUE = 4096
"""Characters of one runner environment value printed into the sweep (a PROFILE BLOCK value is
a path or a short hook; a longer one is NOT FOUND, for the user to add by hand)."""
DISCOVER_TIMEOUT = 60.0
"""Seconds the discovery command may run on one box (ps, then /proc reads of a few sessions)."""

DISCOVER_SCRIPT = r"""
LC_ALL=C; export LC_ALL
b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
# One ps for the whole table. The runners' sessions and descendants are read in detail (argv,
# cwd, open files), their ancestors by argv only (tmux, screen above them).
table=$(ps -eo pid=,ppid=,pgid=,sid=,args= 2>/dev/null)
pick=$(printf '%s\n' "$table" | awk '
  { n++; pid[n]=$1; ppid[n]=$2; sid[n]=$4; up[$1]=$2
    if ($5 ~ /(^|\/)(ba|da)?sh$/ && index($0, "run_queue") > 0) { run[$1]=1; mark[$1]=1; msid[$4]=1 } }
  END {
    changed=1; rounds=0
    while (changed && rounds < @MAX_ANCESTRY@) {
      changed=0; rounds++
      for (i=1; i<=n; i++) if (!(pid[i] in mark) && (ppid[i] in mark)) { mark[pid[i]]=1; changed=1 }
    }
    for (i=1; i<=n; i++) if ((pid[i] in mark) || (sid[i] in msid)) { print "D", pid[i]; seen[pid[i]]=1 }
    for (r in run) print "R", r
    for (r in run) { p=up[r]; k=0
      while (p != "" && p > 1 && !(p in seen) && k < @MAX_ANCESTRY@) {
        print "U", p; seen[p]=1; p=up[p]; k++ } }
  }')
# A: every process, for ancestry; P: a picked one's argv and cwd; F: its open files.
printf '%s\n' "$table" | while read -r p pp pg sd _; do echo "A $p $pp $pg $sd"; done
printf '%s\n' "$pick" | while read -r kind p; do
  [ -n "$p" ] || continue
  d=/proc/$p
  if [ "$kind" = R ]; then
    # A runner's environment: only the allow-listed names leave the box (grep -z: one
    # NUL-terminated entry per record; the cockpit checks each name again).
    if [ -r "$d/environ" ] && printf 'a\0' | grep -qz a 2>/dev/null; then
      echo "E $p $(grep -zE '^(@ENV@)=' "$d/environ" 2>/dev/null | base64 | tr -d '\n')"
    else
      echo "E $p -"  # unreadable, or no grep -z (busybox): not read, never guessed empty
    fi
    continue
  fi
  nums=$(printf '%s\n' "$table" | awk -v p="$p" '$1 == p {print $2, $4, $3; exit}')
  [ -n "$nums" ] || continue
  args=$(tr '\0' '\n' < "$d/cmdline" 2>/dev/null) || continue
  set -- $nums
  echo "P $p $1 $2 $(b64 "$args") $(b64 "$(readlink "$d/cwd" 2>/dev/null)") $3"
  [ "$kind" = D ] || continue
  n=0
  for f in "$d"/fd/*; do
    fd=${f##*/}
    if [ -f "$f" ]; then ft=f; else ft=o; fi
    case $fd in
      0|1|2) ;;
      *) [ "$ft" = f ] || continue; n=$((n+1)); [ "$n" -le @MAX_FILES@ ] || continue ;;
    esac
    t=$(readlink "$f" 2>/dev/null) || continue
    fl=x
    while read -r k v; do [ "$k" = flags: ] && { fl=$v; break; }; done 2>/dev/null < "$d/fdinfo/$fd"
    echo "F $p $fd $ft $fl $(b64 "$t")"
  done
done
if command -v tmux >/dev/null 2>&1; then
  tmux list-panes -a -F '#{session_name} #{pane_pid}' 2>/dev/null | while read -r s pid; do
    echo "T $pid $(b64 "$s")"
  done
fi
""".replace("@ENV@", "|".join(RUNNER_ENV)).replace(
    "@MAX_FILES@", str(MAX_FILES_PER_PROCESS)).replace("@MAX_ANCESTRY@", str(MAX_ANCESTRY))
RUNNER = re.compile(r"(^|/)run_queue[^/]*\.sh$")
SHELLS = ("bash", "sh", "dash")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""A tmux session name the sweep's `tmux_session` accepts (models/sweep.py's Name)."""
_NUMBER = re.compile(r"^[0-9]{1,10}$")
"""A pid, fd or session number as the script prints it (10 digits: beyond any pid_max)."""
_OCTAL = re.compile(r"^[0-7]{1,12}$")
"""fdinfo's `flags:` field (octal; 12 digits hold every open flag)."""


def _b64(text: str) -> str:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", errors="replace") if text else ""
    except ValueError:
        return ""


@dataclass(frozen=True)
class OpenFile:
    """One open file descriptor: where its link points, whether that is a regular file, and
    whether it was opened for writing (None: fdinfo unreadable)."""

    target: str
    regular: bool
    writing: bool | None


@dataclass
class Proc:
    """One process as the discovery script saw it."""

    pid: int
    ppid: int
    sid: int
    argv: list[str]
    cwd: str
    pgid: int = 0
    fds: dict[int, OpenFile] = field(default_factory=dict)
    environ: dict[str, str] | None = None
    """The allow-listed (RUNNER_ENV) part of a runner's environment; None: not read."""

    @property
    def logs(self) -> list[str]:
        """The `.log` files it holds open (regular files only)."""
        return [f.target for _, f in sorted(self.fds.items())
                if f.regular and f.target.endswith(".log")]

    @property
    def command(self) -> str:
        """The basename of argv[0] (`tee`, `bash`, `SCREEN`)."""
        return PurePosixPath(self.argv[0]).name if self.argv and self.argv[0] else ""


@dataclass(frozen=True)
class FoundQueue:
    """A running queue: what a sweep file needs to follow it, and why a field is missing.

    `missing` maps each field that could not be found to what it is and how to fill it;
    `launch` says how the queue was seen to run (tmux, screen, its own session; stdout)."""

    queue: str | None
    start_index: int
    queue_log: str | None
    run_logs: str | None
    tmux_session: str | None
    pid: int
    launch: str = ""
    missing: dict[str, str] = field(default_factory=dict)
    runner: dict[str, Any] | None = None
    """The sweep's `runner:` block (script, shell, cwd, output, env), or None (see missing)."""
    rendezvous: Rendezvous | None = None
    """A distributed launcher seen under the runner (torchrun, DeepSpeed, accelerate): boxes
    whose launchers meet at the same endpoint are proposed as one job group (issue 21)."""


@dataclass(frozen=True)
class Rendezvous:
    """What a distributed launcher's argv says about the job it is part of."""

    launcher: str
    """`torchrun`, `deepspeed` or `accelerate`."""
    endpoint: str
    """Where the ranks meet (`--rdzv-endpoint`, `--master-addr[:port]`, a DeepSpeed hostfile,
    an accelerate config): boxes with the same endpoint run one job."""
    nnodes: int | None = None
    node_rank: int | None = None
    nproc: int | None = None

    @property
    def ranks(self) -> tuple[int, ...] | None:
        """This box's global ranks (node_rank x nproc_per_node ...), when the argv says."""
        if self.node_rank is None or self.nproc is None:
            return None
        return tuple(range(self.node_rank * self.nproc, (self.node_rank + 1) * self.nproc))


_RDZV_FLAGS = {
    "endpoint": ("--rdzv-endpoint", "--rdzv_endpoint"),
    "addr": ("--master-addr", "--master_addr", "--main_process_ip"),
    "port": ("--master-port", "--master_port", "--main_process_port"),
    "nnodes": ("--nnodes", "--num_nodes", "--num_machines"),
    "node_rank": ("--node-rank", "--node_rank", "--machine_rank"),
    "nproc": ("--nproc-per-node", "--nproc_per_node", "--num_gpus"),
    "hostfile": ("--hostfile",),
    "config": ("--config_file", "--config-file"),
}
MAX_ARGV_SCAN = 256
"""Arguments of one launcher's argv read for rendezvous flags (they come first; a training
script's own arguments after them may be many)."""


def rendezvous(argv: list[str]) -> Rendezvous | None:
    """The rendezvous a launcher's argv names, or None when it is no distributed launcher or
    names no endpoint. Total: a value out of shape is left out, never guessed."""
    words = argv[:MAX_ARGV_SCAN]
    names = [PurePosixPath(w).name for w in words[:3]]
    if "torchrun" in names or "torch.distributed.run" in words[:3] or \
            "torch.distributed.launch" in words[:3]:
        launcher = "torchrun"
    elif "deepspeed" in names:
        launcher = "deepspeed"
    elif "accelerate" in names and "launch" in words[:4]:
        launcher = "accelerate"
    else:
        return None
    found: dict[str, str] = {}
    for index, word in enumerate(words):
        flag, eq, value = word.partition("=")
        for key, flags in _RDZV_FLAGS.items():
            if flag in flags and key not in found:
                value = value if eq else (words[index + 1] if index + 1 < len(words) else "")
                if value and not _CONTROL.search(value) and len(value) <= 256:
                    found[key] = value

    def number(key: str) -> int | None:
        text = found.get(key, "").split(":")[-1]  # torchrun's elastic `--nnodes 1:4`
        return int(text) if _NUMBER.match(text) else None

    endpoint = found.get("endpoint") or (
        f"{found['addr']}:{found.get('port', '29500')}" if "addr" in found else
        f"hostfile {found['hostfile']}" if "hostfile" in found else
        f"config {found['config']}" if "config" in found else "")
    if not endpoint:
        return None
    return Rendezvous(launcher, endpoint, number("nnodes"), number("node_rank"), number("nproc"))


def _int(text: str) -> int | None:
    return int(text) if _NUMBER.match(text) else None


def parse(output: str) -> tuple[dict[int, Proc], dict[int, str]]:
    """The script's output: processes (with their open files) and tmux pane pids.

    Total: a line that does not have its kind's shape is skipped."""
    procs: dict[int, Proc] = {}
    panes: dict[int, str] = {}
    for line in output.splitlines():
        parts = line.split(" ")
        kind, nums = parts[0], [_int(x) for x in parts[1:]]
        if kind == "A" and len(parts) == 5 and None not in nums:
            # Every process, for ancestry (detail only for the runners' sessions and kin).
            pid, ppid, pgid, sid = (n for n in nums if n is not None)
            if pid not in procs:
                procs[pid] = Proc(pid, ppid, sid, [], "", pgid)
        elif kind == "P" and len(parts) == 7 and None not in (nums[0], nums[1], nums[2]):
            pid, ppid, sid = (n for n in nums[:3] if n is not None)
            old = procs.get(pid)
            procs[pid] = Proc(pid, ppid, sid, _b64(parts[4]).split("\n"), _b64(parts[5]),
                              nums[5] or 0, old.fds if old else {}, old.environ if old else None)
        elif kind == "E" and len(parts) == 3 and nums[0] in procs:
            procs[nums[0]].environ = None if parts[2] == "-" else environ(parts[2])
        elif kind == "F" and len(parts) == 6 and nums[0] in procs and nums[1] is not None:
            flags = int(parts[4], 8) if _OCTAL.match(parts[4]) else None
            writing = None if flags is None else (flags & 3) in (1, 2)
            procs[nums[0]].fds[nums[1]] = OpenFile(_b64(parts[5]), parts[3] == "f", writing)
        elif kind == "T" and len(parts) == 3 and nums[0] is not None:
            panes[nums[0]] = _b64(parts[2])
    return procs, panes


def environ(text: str) -> dict[str, str]:
    """The RUNNER_ENV entries of a base64 NUL-separated environment; any other name is dropped
    (the box already filtered: this is the second check). Total: bad base64 gives {}."""
    try:
        raw = base64.b64decode(text, validate=True) if text else b""
    except ValueError:
        return {}
    out: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        key = name.decode("ascii", errors="replace")
        if sep and key in RUNNER_ENV and key not in out:
            out[key] = value.decode("utf-8", errors="replace")
    return out


def runner_block(proc: Proc, master: str | None, how: str) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The sweep's `runner:` block for a runner, and NOT FOUND notes: the whole block when the
    queue cannot be run again the same way from what was seen, `runner.env.NAME` for a value
    that is not printed."""
    notes: dict[str, str] = {}
    out = proc.fds.get(1)
    mode = "redirect" if out is not None and out.regular else (
        "tee" if how.startswith("the file `tee` writes") else None)
    cwd_why = unusable(proc.cwd) if proc.cwd else "the working directory could not be read"
    script = str(PurePosixPath(proc.cwd) / proc.argv[1]) if proc.cwd else proc.argv[1]
    why = ("no master log was found (the re-run's output would go nowhere)" if master is None
           else "its output goes to neither a file nor a tee" if mode is None
           else f"its working directory: {cwd_why}" if cwd_why
           else f"the runner script {shown(script)}: {w}" if (w := unusable(script))
           else "its environment could not be read (/proc/PID/environ)" if proc.environ is None
           else None)
    if why:
        notes["runner"] = (f"{why}. How `cockpit resume`/`rerun` run the queue again without a "
                           "`launch:`; without it they refuse")
        return None, notes
    env: dict[str, str] = {}
    for key, value in (proc.environ or {}).items():
        if len(value) > MAX_ENV_VALUE:
            notes[f"runner.env.{key}"] = (f"its value is longer than {MAX_ENV_VALUE} characters; "
                                          "add it by hand")
        elif _CONTROL.search(value) or visible(value, limit=0) != value:
            notes[f"runner.env.{key}"] = ("its value holds control characters or characters the "
                                          "terminal is not shown as they are; add it by hand")
        else:
            env[key] = value
    return {"script": script, "shell": proc.command, "cwd": proc.cwd, "output": mode,
            "env": env}, notes


def ancestors(pid: int, procs: dict[int, Proc]) -> list[int]:
    """Parent, grandparent, ... of `pid` as far as the process table goes."""
    out: list[int] = []
    while pid in procs and pid > 1 and len(out) < MAX_ANCESTRY:
        pid = procs[pid].ppid
        out.append(pid)
    return out


def _is_runner(proc: Proc) -> bool:
    return (len(proc.argv) >= 3 and PurePosixPath(proc.argv[0]).name in SHELLS
            and RUNNER.search(proc.argv[1]) is not None)


def unusable(path: str) -> str | None:
    """Why `path` (read from the box) cannot go into a sweep as it is, or None when it can."""
    if path.endswith(" (deleted)"):
        return "the file was deleted while open"
    if not path.startswith("/"):
        return "not an absolute path"
    if _CONTROL.search(path) or path != path.strip():
        return "its name holds control characters or edge whitespace, which a sweep path may not"
    if visible(path, limit=0) != path:
        # The CLI prints through visible(): a bidi override or other unsafe character would be
        # printed escaped, and the saved sweep would name a different file.
        return "its name holds characters the terminal is not shown as they are"
    return None


def shown(path: str) -> str:
    """A path from the box for a one-line YAML comment: JSON-quoted ASCII, cut to a bound."""
    text = json.dumps(path, ensure_ascii=True)
    return text if len(text) <= CANDIDATE_CHARS else text[:CANDIDATE_CHARS] + "…\""


def _folders(paths: Iterable[str]) -> list[str]:
    return sorted({str(PurePosixPath(p).parent) for p in paths})


def master_log(runner: Proc, procs: dict[int, Proc],
               tree: set[int]) -> tuple[str | None, str]:
    """The queue's master log and how it was found, or None and why not.

    The runner's stdout when that is a regular file (nohup, `> log 2>&1`); else, when stdout
    is a pipe, the file written by the process reading that pipe outside the runner's `tree`:
    a `tee`'s output file, or the reader's own stdout file (`| cat >> log`)."""
    out = runner.fds.get(1)
    if out is None:
        return None, "the runner's stdout could not be read (/proc/PID/fd/1)"
    if out.regular:
        why = unusable(out.target)
        return (None, f"its stdout file {shown(out.target)}: {why}") if why else (
            out.target, "the runner's stdout")
    if not out.target.startswith("pipe:"):
        return None, f"the runner writes to {shown(out.target)}, not to a file"
    readers = [p for p in procs.values() if p.pid not in tree
               and (fd0 := p.fds.get(0)) is not None and fd0.target == out.target]
    for reader in readers:
        if reader.command == "tee":
            files = [f.target for n, f in sorted(reader.fds.items())
                     if n > 2 and f.regular and f.writing is not False]
        else:
            files = [f.target for n, f in reader.fds.items() if n == 1 and f.regular]
        for path in files:
            why = unusable(path)
            if why is None:
                return path, f"the file `{reader.command}` writes from the runner's stdout"
            return None, f"the runner's `{reader.command}` writes {shown(path)}: {why}"
    return None, "the runner's stdout is a pipe into no file this user can see"


def cell_logs(runner: Proc, procs: dict[int, Proc], family: set[int], tree: set[int],
              exclude: set[str]) -> tuple[str | None, str]:
    """The folder the cells' logs are written to, and how it was found (or why not).

    Only the processes under the runner that are not the runner or its subshells count (the
    cell runner and what it started); the master log and the runner's own stdout/stderr,
    which they inherit, are excluded. First a written file named after a path argument of the
    cell runner (run_one.sh CFG → `<cfg stem>.log`); else the files a cell's `tee` or stdout
    writes. Exactly one folder is an answer; several are listed, never chosen among."""
    cells = [procs[p] for p in sorted(tree - family)]
    if not cells:
        return None, "no cell was running when discover looked (between cells)"
    heads = [c for c in cells if c.ppid in family]
    names = {PurePosixPath(a).name.rsplit(".", 1)[0] + ".log"
             for c in heads for a in c.argv[1:] if a.strip()}
    written: list[str] = []
    captured: list[str] = []
    for cell in cells:
        for n, f in sorted(cell.fds.items()):
            if not f.regular or f.target in exclude or unusable(f.target):
                continue
            if n in (1, 2) or (n > 2 and cell.command == "tee" and f.writing is not False):
                captured.append(f.target)
            if n > 2 and f.writing:
                written.append(f.target)
    for rule, paths in (("the running cell's own log", [p for p in {*written, *captured}
                                                          if PurePosixPath(p).name in names]),
                        ("the file a cell's tee or stdout writes", captured)):
        folders = _folders(paths)
        if len(folders) == 1:
            return folders[0], rule
        if folders:
            listed = ", ".join(shown(f) for f in folders[:MAX_CANDIDATES])
            more = f" and {len(folders) - MAX_CANDIDATES} more" if len(folders) > MAX_CANDIDATES else ""
            return None, f"the cells write logs in more than one folder ({listed}{more})"
    return None, "the running cell holds no log file open (its output goes to a pipe or a terminal)"


def _launch(runner: Proc, procs: dict[int, Proc], session: str | None, stdout: str) -> str:
    """How the queue runs, in words, from the process tree (for the sweep's comments)."""
    chain = [runner.pid, *ancestors(runner.pid, procs)]
    screen = next((p for p in chain if p in procs and procs[p].command.lower() == "screen"), None)
    if session:
        where = f"in tmux session {json.dumps(session, ensure_ascii=True)}"
    elif screen is not None:
        where = f"under GNU screen (pid {screen})"
    elif runner.sid == runner.pid:
        where = "in a session of its own (setsid)"
    else:
        where = "detached from a shell (nohup / &)"
    return f"runner pid {runner.pid} {where}; its output: {stdout}"


def find_queues(procs: dict[int, Proc], panes: dict[int, str]) -> list[FoundQueue]:
    """Every run_queue process that is not itself the child of another (bash forks for `$(...)`)."""
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)

    def subtree(root: int) -> set[int]:
        seen, todo = {root}, [root]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return seen

    found = []
    runners = {p.pid for p in procs.values() if _is_runner(p)}
    for pid in sorted(runners):
        proc = procs[pid]
        if proc.ppid in runners:
            continue  # a subshell of the runner
        missing: dict[str, str] = {}
        queue: str | None = str(PurePosixPath(proc.cwd) / proc.argv[2])
        why = unusable(queue or "")
        if why:
            missing["queue"] = f"the queue file {shown(proc.argv[2])}: {why}"
            queue = None
        start = int(proc.argv[3]) if len(proc.argv) > 3 and _NUMBER.match(proc.argv[3]) else 1
        tree = subtree(pid)
        family = {p for p in tree if p in runners}  # the runner and its `$(...)` subshells
        master, how = master_log(proc, procs, tree)
        if master is None:
            missing["queue_log"] = (f"{how}. The queue's master log (its STARTING/FINISHED marks); "
                                    "add its absolute path, or verify cannot prove any cell finished")
        exclude = {f.target for n, f in proc.fds.items() if n in (1, 2)} | ({master} if master else set())
        run_logs, rule = cell_logs(proc, procs, family, tree, exclude)
        if run_logs is None:
            missing["run_logs"] = (f"{rule}. The folder each cell's own log (<cell>.log) is written "
                                   "to (run_one.sh: $DATA_DIR/runs/logs); add it, or the cells' "
                                   "progress and failures are not read")
        session = next((panes[a] for a in [pid, *ancestors(pid, procs)] if a in panes), None)
        launch = _launch(proc, procs, session, how if master else "no file")
        if session is not None and not SESSION_NAME.match(session):
            missing["tmux_session"] = (f"the tmux session {shown(session)} has a name a sweep "
                                       "cannot hold (letters, digits, _ . -; at most 64); rename "
                                       "it (tmux rename-session) and add it, or leave it out")
            session = None
        seen = [r for p in sorted(tree - family) if (r := rendezvous(procs[p].argv)) is not None]
        block, notes = runner_block(proc, master, how)
        if queue is None and block is not None:
            block, notes = None, {"runner": "the queue file was not found (above): `runner` "
                                            "needs `queue`; add both, or resume refuses"}
        missing.update(notes)
        found.append(FoundQueue(queue, start, master, run_logs, session, pid, launch, missing,
                                block, seen[0] if seen else None))
    return found


DURABLE_NOTE = ("where finished cells are copied (run_one.sh: $DURABLE_DIR/final_ckpts); not "
                "discoverable: add it, or verify and pull cannot run")
CHECKPOINTS_NOTE = ("optional: the folder of per-cell checkpoint folders (run_one.sh: "
                    "$DATA_DIR/checkpoints), for the checkpoint panel")


def sweep_document(name: str, hosts: list[tuple[str, str, list[FoundQueue]]],
                   ssh_config: list[str] | None = None) -> str:
    """A sweep file for the queues found, loadable as printed; every field that was not found
    is a `# FIELD: NOT FOUND — what it is; how to fill it` comment under its instance."""
    head = ("# Written by `cockpit discover` from the running queue(s). The fields present were\n"
            "# read from the box and need no edit; each `# FIELD: NOT FOUND` line below an\n"
            "# instance says what that field is and how to fill it. Review, then save.\n")
    top: dict[str, Any] = {"sweep": name}
    if ssh_config:
        top["ssh"] = {"config": ssh_config}
    text = head + yaml.safe_dump(top, sort_keys=False, allow_unicode=True,
                                 width=YAML_WIDTH) + "instances:\n"
    met: list[tuple[str, Rendezvous]] = []
    for host, profile, queues in hosts:
        for index, queue in enumerate(queues, start=1):
            base = re.sub(r"[^A-Za-z0-9_.-]", "-", host.split("@")[-1]).strip("-.")[:60] or "box"
            inst: dict[str, Any] = {"name": base if len(queues) == 1 else f"{base}-{index}",
                                    "profile": profile, "host": host}
            for key in ("queue", "queue_log", "run_logs", "tmux_session", "runner"):
                value = getattr(queue, key)
                if value:
                    inst[key] = value
            text += yaml.safe_dump([inst], sort_keys=False, allow_unicode=True, width=YAML_WIDTH)
            if queue.rendezvous is not None:
                met.append((inst["name"], queue.rendezvous))
            notes = [f"# launch: {queue.launch}"]
            if queue.start_index != 1:
                notes.append(f"# note: the runner started at cell {queue.start_index} (a resume)")
            notes += [f"# {key}: NOT FOUND — {why}" for key, why in queue.missing.items()]
            notes += [f"# durable_root: NOT FOUND — {DURABLE_NOTE}",
                      f"# checkpoints: NOT FOUND — {CHECKPOINTS_NOTE}"]
            if not queue.tmux_session:
                notes.append("# tmux_session: none — the runner is under no tmux pane; nothing to add")
            text += "".join(f"  {_CONTROL.sub('?', n)}\n" for n in notes)
    return text + job_proposals(met)


def job_proposals(met: list[tuple[str, Rendezvous]]) -> str:
    """A `jobs:` block for the boxes whose launchers meet at one endpoint (issue 21), or ""
    when none do. Loadable when every box's argv gave its ranks and they cover 0..N-1 once;
    else printed as comments saying what to fill."""
    groups: dict[str, list[tuple[str, Rendezvous]]] = {}
    for name, rdzv in met:
        groups.setdefault(rdzv.endpoint, []).append((name, rdzv))
    jobs: list[dict[str, Any]] = []
    commented: list[str] = []
    for index, (endpoint, boxes) in enumerate(sorted(groups.items()), start=1):
        if len(boxes) < 2:
            continue
        ranks = [r.ranks for _, r in boxes]
        world = sorted(x for rs in ranks if rs is not None for x in rs)
        job: dict[str, Any] = {"name": f"job{index}" if len(groups) > 1 else "job",
                               "launcher": boxes[0][1].launcher, "world_size": len(world),
                               "members": [{"instance": n, "ranks": list(r.ranks or ())}
                                           for n, r in boxes]}
        if None not in ranks and world == list(range(len(world))):
            jobs.append(job)
        else:
            commented.append(f"# job at {shown(endpoint)}: {', '.join(n for n, _ in boxes)} — "
                             "their ranks were not all in the launchers' argv (--node-rank, "
                             "--nproc-per-node); add a jobs: entry by hand")
    if not jobs and not commented:
        return ""
    text = ("# jobs: proposed from the rendezvous the boxes' launchers share (one distributed "
            "job judged as one: README, Job groups). Review, then keep.\n")
    if jobs:
        text += yaml.safe_dump({"jobs": jobs}, sort_keys=False, allow_unicode=True,
                               width=YAML_WIDTH, default_flow_style=None)
    return text + "".join(f"{_CONTROL.sub('?', line)}\n" for line in commented)


async def discover_host(conn: Any) -> list[FoundQueue]:
    """Run the discovery script on one connection.

    Its output is bounded by the box's stdout cap (remote.STDOUT_CAP); past it the command is
    stopped and OutputTooLarge names the cap (a partial process table would miss runners).
    """
    result = (await SshBox(conn).run(["/bin/sh", "-c", DISCOVER_SCRIPT],
                                     DISCOVER_TIMEOUT)).require_complete()
    procs, panes = parse(result.stdout.decode(errors="replace"))
    return find_queues(procs, panes)
