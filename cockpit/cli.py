"""The `cockpit` command line. Headless commands share the services with the TUI.

Imports are deferred into each command so `cockpit --help` stays well under half a second
and never loads torch or Textual.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from cockpit.models.sweep import Instance
    from cockpit.services.config.sweepfile import LoadedSweep
    from cockpit.services.transport.fleet import InstanceStatus

EXIT_OK, EXIT_SOME_FAILED, EXIT_INVALID = 0, 1, 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT, what a shell reports for a command stopped by Ctrl-C."""

PIPE_WIDTH = 400
"""Columns for text sent to a pipe or a file, which has no width of its own: wide enough that
instance names, paths and fingerprints are never cut or wrapped for `grep`/`less -S`, while a
table still takes only the width its contents need."""

TEARDOWN_ONLY_IN_TUI = ("teardown runs only from the TUI's teardown screen (cockpit attach "
                        "SWEEP, then the instance's teardown), after N/N and a typed approval; "
                        "this command prints the plan: add --dry-run")


def _say(text: object, *, err: bool = False, end: str = "\n") -> None:
    """The CLI's one way to print text (stdout, or stderr with `err`).

    Everything printed may carry what a box chose: file, cell and GPU names, log excerpts,
    command output, error messages. It passes `visible()` with newlines kept and nothing cut,
    so an OSC 52, a CSI 2J or a bidi override is shown to the user instead of being obeyed by
    the terminal, and an undecodable byte prints as `\\xNN` instead of raising.

    A Rich table is drawn by `_console` (markup off) at the terminal's width, or `PIPE_WIDTH`
    in a pipe, its rows without trailing blanks: its cells are `remote_text`, made visible
    cell by cell, so the table's own styles (bold headers) are the only escapes written.
    """
    from cockpit.models.text import visible

    stream = sys.stderr if err else sys.stdout
    if hasattr(text, "__rich_console__"):
        console = _console(err=err)
        with console.capture() as captured:
            console.print(text)
        stream.write("\n".join(line.rstrip() for line in captured.get().splitlines()) + end)
        return
    stream.write(visible(str(text), one_line=False, limit=0) + end)


def _say_json(document: object) -> None:
    """A JSON document on stdout: exact values, nothing a terminal obeys (`json_text`)."""
    from cockpit.models.text import json_text

    sys.stdout.write(json_text(document) + "\n")


def _console(*, err: bool = False) -> Console:
    """A Rich console for tables: the terminal's width on a TTY, `PIPE_WIDTH` otherwise.

    Rich falls back to 80 columns when stdout is not a terminal, which cut names and paths in
    `cockpit status | grep`; a pipe has no width, so it gets a wide one. Markup, highlighting
    and emoji codes are off: every cell is a `Text` already made visible (`remote_text`).
    """
    import shutil

    from rich.console import Console

    stream = sys.stderr if err else sys.stdout
    width = shutil.get_terminal_size().columns if stream.isatty() else PIPE_WIDTH
    return Console(file=stream, width=width, markup=False, highlight=False, emoji=False)


def _build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    """The argument parser, and the handlers of the commands that live in `cockpit.commands`."""
    from cockpit import commands

    parser = argparse.ArgumentParser(
        prog="cockpit",
        description="Watch, verify and safely tear down training sweeps on rented GPUs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    handlers = commands.register(sub)

    demo = sub.add_parser("demo", help="start the embedded demo fleet (and the TUI against it)")
    demo.add_argument("--serve", metavar="DIR", type=Path,
                      help="only serve the fleet from DIR (writes DIR/sweep.yaml); no TUI")
    demo.add_argument("--theme", default=None, help="TUI theme")

    attach = sub.add_parser("attach", help="open the TUI on a sweep file (attaches to running work)")
    attach.add_argument("sweep", type=Path)
    attach.add_argument("--theme", default=None)
    attach.add_argument("--probe", action="store_true",
                        help="probe the boxes even while a `cockpit watch` follows them")
    attach.add_argument("--db", type=Path, default=None,
                        help="the store (default: $XDG_DATA_HOME/cockpit/<sweep>.db)")
    attach.add_argument("--metrics", default=None, metavar="HOST:PORT",
                        help="serve OpenMetrics for Prometheus here while the TUI runs")

    status = sub.add_parser("status", help="one probe record per box, as a table or JSON")
    status.add_argument("sweep", type=Path)
    status.add_argument("--json", action="store_true", help="print a JSON document")
    status.add_argument("--timeout", type=float, default=30.0, help="seconds per box (30)")

    shots = sub.add_parser("screenshots",
                           help="drive the TUI headless on the demo fleet and write SVGs")
    shots.add_argument("--out", type=Path, default=Path("screenshots"),
                       help="output folder (default: ./screenshots)")
    shots.add_argument("--json", action="store_true", help="print a JSON document")

    trust = sub.add_parser("trust", help="approve an unknown host key by its SHA-256 fingerprint")
    trust.add_argument("sweep", type=Path)
    trust.add_argument("instance")
    trust.add_argument("--fingerprint", required=True, help="SHA256:... as shown by status")
    trust.add_argument("--json", action="store_true", help="print a JSON document")

    classify = sub.add_parser(
        "classify", help="classify failures in log files (exit 1 when a run-ending one is found)",
        description="Print each failure event (rule id, class, line, excerpt, remediation). "
                    "Exit 0: nothing of class real-bug, host-oom, hardware or disk-full; "
                    "1: something of those classes; 2: bad input.")
    classify.add_argument("files", nargs="+", metavar="FILE", help="a log file, or - for stdin")
    classify.add_argument("--json", action="store_true", help="print a JSON document")
    classify.add_argument("--rules", type=Path, action="append", default=[], metavar="FILE",
                          help="an extra rule file (tried before the shipped rules)")

    verify = sub.add_parser(
        "verify", help="pull each instance's cells and verify them by hash and safe load",
        description="Reads the roster from each queue file, hashes the cells on the box, pulls "
                    "them (resumable) into pull_dir/INSTANCE/, hashes and loads every file "
                    "(weights_only=True) and writes PULL_VERIFIED.json at N/N. Exit 0 only when "
                    "every chosen instance is N/N with N >= 1; 1 otherwise; 2 on invalid input.")
    verify.add_argument("sweep", type=Path)
    verify.add_argument("--instance", action="append", default=[], metavar="NAME",
                        help="only this instance (repeatable; default: all)")
    verify.add_argument("--json", action="store_true", help="print a JSON document")

    preflight = sub.add_parser(
        "preflight", help="check each box before a run: GPUs, driver, room, durable mount, tmux",
        description="Per box PASS / WARN / FAIL with reasons: expected GPU model and count, driver "
                    "and CUDA versions, free bytes and inodes on the data and durable mounts "
                    "against the sweep's budget, the durable mount existing on a tier that "
                    "survives teardown, cgroup memory.max, tmux, Xid errors and throttling. Exit "
                    "0 when no box FAILs (warnings allowed), 1 when one does, 2 on invalid input.")
    preflight.add_argument("sweep", type=Path)
    preflight.add_argument("--instance", action="append", default=[], metavar="NAME")
    preflight.add_argument("--json", action="store_true")

    for verb, text in (("launch", "deploy our queue runner and start the queue detached (tmux, "
                                  "else nohup); refuses when it already runs"),
                       ("resume", "start again after the last cell with proof of success "
                                  "(never re-runs a proven cell), once nothing of the queue runs"),
                       ("rerun", "run only the named cells again, as a new queue file beside "
                                 "the original, their old logs rotated; refused while it runs"),
                       ("stop", "kill the queue's exact tmux session (or its verified PIDs)")):
        cmd = sub.add_parser(verb, help=text)
        cmd.add_argument("sweep", type=Path)
        cmd.add_argument("--instance", required=True, metavar="NAME")
        cmd.add_argument("--json", action="store_true", help="print a JSON document")
        if verb == "launch":
            cmd.add_argument("--queue", type=Path, metavar="FILE",
                             help="a local queue file to upload first (refused while in use)")
        if verb == "rerun":
            cmd.add_argument("--cells", required=True, metavar="A,B",
                             help="comma-separated cell names (config basenames)")
        if verb == "stop":
            cmd.add_argument("--confirm", required=True, metavar="NAME",
                             help="type the instance name: stopping kills a running training")

    discover = sub.add_parser(
        "discover", help="find running queues on boxes and print a sweep file for them (read-only)")
    discover.add_argument("hosts", nargs="+", metavar="HOST", help="ssh_config alias or address")
    discover.add_argument("--profile", default="generic-ssh", help="platform profile (generic-ssh)")
    discover.add_argument("--name", default="discovered", help="sweep name (discovered)")
    discover.add_argument("--ssh-config", action="append", default=[], type=Path, metavar="FILE",
                          help="an extra ssh_config file (also written into the sweep)")
    discover.add_argument("--json", action="store_true",
                          help="print a JSON document (the queues found, and the sweep text)")

    teardown = sub.add_parser(
        "teardown", help="print an instance's teardown plan (--dry-run); changes nothing",
        description="Prints every teardown action of the instance's profile: what it keeps and "
                    "destroys, whether it is reversible, what keeps billing, the exact command "
                    "or manual steps, and whether the gate is locked. Running an action is done "
                    "only from the cockpit's teardown screen, after N/N and a typed approval.")
    teardown.add_argument("sweep", type=Path)
    teardown.add_argument("--instance", required=True, metavar="NAME")
    teardown.add_argument("--dry-run", action="store_true",
                          help="required: this command only prints the plan")
    teardown.add_argument("--json", action="store_true", help="print a JSON document")

    profiles = sub.add_parser("profiles", help="list, show and check platform profiles")
    psub = profiles.add_subparsers(dest="action", metavar="ACTION", required=True)
    plist = psub.add_parser("list", help="one line per shipped profile")
    plist.add_argument("--json", action="store_true", help="print a JSON document")
    show = psub.add_parser("show", help="print one profile")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print a JSON document")
    check = psub.add_parser(
        "check", help="validate profiles; list facts older than N months",
        description="Exit 0: every profile is valid and no fact group is older than "
                    "--max-age-months; 1: valid, but some facts are stale (re-check them against "
                    "their sources and update the `verified` stamps); 2: a profile is invalid or "
                    "the arguments are.")
    check.add_argument("--json", action="store_true", help="print a JSON document")
    check.add_argument("--max-age-months", type=int, default=6)
    check.add_argument("--today", default=None, help="YYYY-MM (default: this month)")
    check.add_argument("--dir", type=Path, default=None, help="profiles folder (default: shipped)")
    return parser, handlers


def _print_config_error(exc: Exception) -> int:
    _say(str(exc), err=True)
    return EXIT_INVALID


def _load_instance(sweep: Path, name: str) -> tuple[LoadedSweep, Instance] | int:
    """The sweep and one of its instances, or the exit code after printing why not."""
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError

    try:
        loaded = load_sweep(sweep)
        return loaded, loaded.sweep.instance(name)
    except ConfigError as exc:
        return _print_config_error(exc)
    except KeyError:
        _say(f"no instance {name!r} in {sweep}", err=True)
        return EXIT_INVALID


def _load_instances(sweep: Path, names: list[str]) -> tuple[LoadedSweep, list[Instance]] | int:
    """The sweep and the named instances (all when none is named), or the exit code."""
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError

    try:
        loaded = load_sweep(sweep)
        return loaded, [loaded.sweep.instance(n) for n in names] or list(loaded.sweep.instances)
    except ConfigError as exc:
        return _print_config_error(exc)
    except KeyError as exc:
        _say(f"no instance {exc.args[0]!r} in {sweep}", err=True)
        return EXIT_INVALID


def _cmd_profiles(args: argparse.Namespace) -> int:
    """`profiles list|show|check`, as text or (`--json`) one JSON document."""
    from cockpit.services.config import profiles as svc
    from cockpit.services.config.yamlfile import ConfigError

    if args.action == "list":
        loaded = svc.load_all()
        rows = [{"name": name, "display_name": prof.display_name, "kind": prof.kind,
                 "meter_stop": prof.meter.stop_verb, "irreversible": prof.meter.irreversible,
                 "danger_clocks": len(prof.danger_clocks.clocks)}
                for name, prof in sorted(loaded.profiles.items())]
        if args.json:
            _say_json({"profiles": rows, "problems": [str(p) for p in loaded.problems]})
        else:
            _say(_profiles_table(rows))
        for problem in loaded.problems:
            _say(problem, err=True)
        return EXIT_INVALID if loaded.problems else EXIT_OK
    if args.action == "show":
        try:
            prof = svc.load_named(args.name)
        except ConfigError as exc:
            return _print_config_error(exc)
        if args.json:
            _say_json(prof.model_dump(mode="json"))
            return EXIT_OK
        import yaml

        _say(yaml.safe_dump(prof.model_dump(mode="json"), allow_unicode=True, sort_keys=False))
        return EXIT_OK
    return _profiles_check(args)


def _profiles_table(rows: list[dict[str, object]]) -> Table:
    """`profiles list` as a borderless Rich table: Rich measures cell widths (a CJK character
    takes two columns), so rows with 恒源云 or 关机 line up, which `str.ljust` did not."""
    from rich.table import Table

    from cockpit.models.text import remote_text

    # No header and no box: one line per profile, as before, for `awk '{print $1}'`.
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()  # the one that wraps in a narrow terminal
    for row in rows:
        stop = f"{row['meter_stop']}{' (irreversible)' if row['irreversible'] else ''}"
        table.add_row(remote_text(str(row["name"])), remote_text(str(row["display_name"])),
                      remote_text(f"meter-stop: {stop}; {row['danger_clocks']} danger clock(s)"))
    return table


def _profiles_check(args: argparse.Namespace) -> int:
    """`profiles check`: exit 0 valid and fresh, 1 some fact group stale, 2 invalid."""
    from cockpit.services.config import profiles as svc

    today = args.today
    if today is None:
        import datetime as dt

        today = dt.date.today().strftime("%Y-%m")
    if not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", today):
        _say(f"--today must be YYYY-MM, got {today!r}", err=True)
        return EXIT_INVALID
    paths = svc.profile_paths(args.dir) if args.dir else None
    if paths is not None and not paths:
        _say(f"{args.dir}: no *.yaml profiles found", err=True)
        return EXIT_INVALID
    loaded = svc.load_all(paths)
    stale = [] if loaded.problems else svc.stale_facts(
        loaded.profiles.values(), today, args.max_age_months)
    if args.json:
        _say_json({"valid": not loaded.problems, "profiles": len(loaded.profiles),
                   "today": today, "max_age_months": args.max_age_months,
                   "problems": [str(p) for p in loaded.problems],
                   "stale": [{"platform": f.platform, "group": f.group, "verified": f.verified,
                              "age_months": f.age_months} for f in stale]})
    if loaded.problems:
        if not args.json:
            for problem in loaded.problems:
                _say(problem, err=True)
        return EXIT_INVALID
    if not args.json:
        _say(f"{len(loaded.profiles)} profile(s) valid; checked against {today}, "
             f"max age {args.max_age_months} month(s)")
        for fact in stale:
            _say(f"STALE {fact.platform}.{fact.group}: verified {fact.verified} "
                 f"({fact.age_months} months ago)")
    return EXIT_SOME_FAILED if stale else EXIT_OK


def _cmd_classify(args: argparse.Namespace) -> int:
    from cockpit.services.alerts.classify import classify_paths, report_json, report_text
    from cockpit.services.config.rulebook import load_rulebook
    from cockpit.services.config.yamlfile import ConfigError

    try:
        rulebook = load_rulebook(args.rules)
    except ConfigError as exc:
        return _print_config_error(exc)
    reports = classify_paths(rulebook, args.files, sys.stdin.buffer)
    for report in reports:
        if report.error:
            _say(f"{report.path}: {report.error}", err=True)
    if args.json:
        _say_json(report_json(reports))
    else:
        _say(report_text(reports), end="")
    if any(r.error for r in reports):
        return EXIT_INVALID
    return EXIT_SOME_FAILED if any(r.severe for r in reports) else EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from cockpit.services.custody.verify import (
        VerifyReport,
        make_pool,
        open_box,
        pull_folder,
        report_json,
        report_text,
        run_verification,
    )
    from cockpit.services.transport import ssh

    found = _load_instances(args.sweep, args.instance)
    if isinstance(found, int):
        return found
    loaded, chosen = found
    pull_dir = (loaded.directory / loaded.sweep.pull_dir).resolve()

    async def run_all() -> list[VerifyReport]:
        reports = []
        with make_pool() as pool:
            for inst in chosen:
                try:
                    box = await open_box(inst, lambda i: ssh.build_target(
                        i, loaded.sweep.ssh, loaded.directory))
                except Exception as exc:  # any connect failure is reported for this instance
                    reports.append(VerifyReport(inst.name, error=f"cannot connect: {exc}"))
                    continue
                def stage(text: str, name: str = inst.name) -> None:
                    if not args.json:
                        _say(f"{name}: {text}", err=True)

                try:
                    reports.append(await run_verification(
                        box, inst, pull_folder(pull_dir, inst.name), loaded.sweep.sweep, pool,
                        on_stage=stage))
                finally:
                    await box.close()
        return reports

    reports = asyncio.run(run_all())
    if args.json:
        _say_json({"sweep": loaded.sweep.sweep, "instances": [report_json(r) for r in reports]})
    else:
        for report in reports:
            _say(report_text(report))
    ok = all(r.verification is not None and r.verification.complete for r in reports)
    return EXIT_OK if ok else EXIT_SOME_FAILED


def _cmd_preflight(args: argparse.Namespace) -> int:
    from cockpit.services.queue import preflight as svc

    found = _load_instances(args.sweep, args.instance)
    if isinstance(found, int):
        return found
    loaded, chosen = found
    reports = asyncio.run(svc.preflight(loaded.sweep, loaded.profiles, loaded.directory, chosen))
    if args.json:
        _say_json({"sweep": loaded.sweep.sweep, "instances": [svc.report_json(r) for r in reports]})
    else:
        for report in reports:
            _say(svc.report_text(report))
    return svc.exit_code(reports)


def _cmd_queue_control(args: argparse.Namespace) -> int:
    from cockpit.services.custody.verify import open_box
    from cockpit.services.queue.control import control
    from cockpit.services.queue.launch import LaunchRefused
    from cockpit.services.transport import ssh

    found = _load_instance(args.sweep, args.instance)
    if isinstance(found, int):
        return found
    loaded, inst = found
    if args.command == "stop" and args.confirm != inst.name:
        _say(f"--confirm {args.confirm!r} is not the instance name {inst.name!r}: nothing stopped", err=True)
        return EXIT_INVALID
    cells = [c.strip() for c in args.cells.split(",") if c.strip()] if args.command == "rerun" \
        else None
    if cells is not None and not cells:
        _say("--cells names no cell: give them as a,b", err=True)
        return EXIT_INVALID
    queue_text = None
    if args.command == "launch" and args.queue is not None:
        try:
            queue_text = args.queue.read_text(encoding="utf-8")
        except OSError as exc:
            _say(f"{args.queue}: {exc.strerror or exc}", err=True)
            return EXIT_INVALID

    async def run() -> str:
        box = await open_box(inst, lambda i: ssh.build_target(i, loaded.sweep.ssh, loaded.directory))
        try:
            return await control(box, inst, loaded.profiles[inst.profile], loaded.sweep.sweep,
                                 args.command, queue_text=queue_text, cells=cells)
        finally:
            await box.close()

    try:
        result = asyncio.run(run())
        if args.json:
            _say_json({"instance": inst.name, "action": args.command, "result": result})
        else:
            _say(f"{inst.name}: {result}")
    except LaunchRefused as exc:
        _say(f"refused: {exc}", err=True)
        return EXIT_SOME_FAILED
    except Exception as exc:  # a box that cannot be reached
        _say(f"{inst.name}: {exc}", err=True)
        return EXIT_SOME_FAILED
    return EXIT_OK


def _cmd_discover(args: argparse.Namespace) -> int:
    from cockpit.models.sweep import Instance, SshSettings
    from cockpit.services.config.profiles import load_named
    from cockpit.services.config.yamlfile import ConfigError
    from cockpit.services.queue.discover import FoundQueue, discover_host, sweep_document
    from cockpit.services.transport import ssh

    try:
        load_named(args.profile)
    except ConfigError as exc:
        return _print_config_error(exc)
    configs = [str(p.resolve()) for p in args.ssh_config]
    settings = SshSettings(config=tuple(configs))

    async def one(host: str) -> list[FoundQueue]:
        inst = Instance(name="discover", profile=args.profile, host=host)
        conn = await ssh.connect(ssh.build_target(inst, settings, Path.cwd()))
        try:
            return await discover_host(conn)
        finally:
            conn.close()

    found: list[tuple[str, str, list[FoundQueue]]] = []
    failed = False
    for host in args.hosts:
        try:
            queues = asyncio.run(one(host))
        except Exception as exc:  # unreachable, refused key: reported per host
            _say(f"{host}: {exc}", err=True)
            failed = True
            continue
        if not queues:
            _say(f"{host}: no running run_queue*.sh found — discover reads the running "
                 "processes, and a queue that has finished leaves none; nothing is printed for "
                 "this host (write its instance by hand: queue, queue_log, run_logs, "
                 "durable_root)", err=True)
        for queue in queues:
            for key, why in queue.missing.items():
                _say(f"{host}: {key} NOT FOUND — {why}", err=True)
        found.append((host, args.profile, queues))
    document = None
    if any(q for _, _, q in found):
        document = sweep_document(args.name, [f for f in found if f[2]], configs or None)
    if args.json:
        import dataclasses

        _say_json({"hosts": [{"host": host, "queues": [dataclasses.asdict(q) for q in queues]}
                             for host, _, queues in found],
                   "sweep": document})
    if document is None:
        return EXIT_SOME_FAILED  # no queue anywhere: no sweep to print, never an invented one
    if not args.json:
        _say(document, end="")
    return EXIT_SOME_FAILED if failed else EXIT_OK


def _cmd_teardown(args: argparse.Namespace) -> int:
    from cockpit.services.custody.plan import plan_json, plan_text

    if not args.dry_run:
        _say(TEARDOWN_ONLY_IN_TUI, err=True)
        return EXIT_INVALID
    found = _load_instance(args.sweep, args.instance)
    if isinstance(found, int):
        return found
    loaded, inst = found
    pull_dir = (loaded.directory / loaded.sweep.pull_dir).resolve()
    profile = loaded.profiles[inst.profile]
    if args.json:
        _say_json(plan_json(loaded.sweep.sweep, inst, profile, pull_dir))
        return EXIT_OK
    _say(plan_text(inst, profile, pull_dir))
    return EXIT_OK


QUEUE_FAILED_NAMES = 3
"""Failed cells named in the status table's queue column; the rest are counted (`+N`), and
every one is listed by `status --json` (queue_view.cells)."""


def _queue_progress(res: InstanceStatus) -> str:
    """The queue column of `status`: `3/8 aug_strong`, `8/8 done; 2 failed: a, b`, or the
    process state (`running`, `no process`) when no queue file was read."""
    from cockpit.models.summary import queue_state
    from cockpit.services.alerts.report import queue_view_of

    snap = res.snapshot
    if snap is None:
        return "-"
    view = queue_view_of(res.instance, snap)
    if not view.cells:
        return queue_state(snap)
    text = view.summary
    failed = view.failed
    if failed:
        names = ", ".join(c.name for c in failed[:QUEUE_FAILED_NAMES])
        more = len(failed) - QUEUE_FAILED_NAMES
        text += f"; {len(failed)} failed: {names}" + (f" +{more}" if more > 0 else "")
    return text


def _with_queue_progress(table: Table, results: list[InstanceStatus]) -> Table:
    """`table` (report.status_table) with its `queue` column showing k/N and the failed
    cells instead of only the process state. Rebuilt through Rich's public column API."""
    from rich.table import Table

    from cockpit.models.text import remote_text

    out = Table(title=table.title)
    for column in table.columns:
        out.add_column(column.header)
    index = next((i for i, c in enumerate(table.columns) if c.header == "queue"), None)
    rows = zip(*(list(c.cells) for c in table.columns), strict=True)
    for res, row in zip(results, rows, strict=True):
        cells = list(row)
        if index is not None and res.snapshot is not None:
            cells[index] = remote_text(_queue_progress(res))
        out.add_row(*cells)
    return out


def _cmd_status(args: argparse.Namespace) -> int:
    from cockpit.services.alerts.report import status_document, status_gpu_problem, status_table
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError
    from cockpit.services.transport.fleet import status_once

    try:
        loaded = load_sweep(args.sweep)
    except ConfigError as exc:
        return _print_config_error(exc)
    results = asyncio.run(
        status_once(loaded.sweep, loaded.profiles, loaded.directory, timeout=args.timeout)
    )
    if args.json:
        _say_json(status_document(results, loaded.sweep.sweep))
    else:
        _say(_with_queue_progress(status_table(results), results))
        for res in results:
            key = res.state.host_key
            if key is not None:
                verb = "REFUSED: changed" if res.state.reachability.value == "key-changed" else (
                    "unknown")
                _say(f"{res.instance.name}: {verb} host key {key.algorithm} {key.fingerprint}", err=True)
                if verb == "unknown":
                    _say(f"  verify it out of band, then: cockpit trust {args.sweep} "
                         f"{res.instance.name} --fingerprint {key.fingerprint}", err=True)
    # A box whose nvidia-smi / NVML failed, or with a GPU that did not answer, fails status
    # too: its run cannot use that GPU. Named on stderr (the words are the box's: plain text).
    gpu_failed = [(res.instance.name, p) for res in results
                  if (p := status_gpu_problem(res)) is not None]
    for name, problem in gpu_failed:
        _say(f"{name}: {problem.text}", err=True)
    reached = all(r.snapshot is not None for r in results)
    return EXIT_OK if reached and not gpu_failed else EXIT_SOME_FAILED


def _cmd_trust(args: argparse.Namespace) -> int:
    from cockpit.services.transport import ssh

    found = _load_instance(args.sweep, args.instance)
    if isinstance(found, int):
        return found
    loaded, inst = found
    target = ssh.build_target(inst, loaded.sweep.ssh, loaded.directory)
    try:
        info = asyncio.run(ssh.approve_host_key(target, args.fingerprint))
    except ssh.HostKeyProblem as exc:
        _say(f"refused: {exc}. A changed key is never accepted here; check the platform "
             f"console for the instance's real fingerprint and fix known_hosts by hand.", err=True)
        return EXIT_SOME_FAILED
    except (ValueError, OSError) as exc:
        _say(f"not trusted: {exc}", err=True)
        return EXIT_SOME_FAILED
    if args.json:
        _say_json({"instance": inst.name, "host": target.host, "port": target.port,
                   "algorithm": info.algorithm, "fingerprint": info.fingerprint,
                   "trusted": True})
    else:
        _say(f"trusted {info.algorithm} {info.fingerprint} for {target.host}:{target.port}")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from cockpit.demo.server import run_demo

    return run_demo(serve_dir=args.serve, theme=args.theme)


def _cmd_screenshots(args: argparse.Namespace) -> int:
    from cockpit.ui.screenshots import write_screenshots

    try:
        written = write_screenshots(args.out)
    except (RuntimeError, TimeoutError) as exc:
        _say(f"screenshots failed: {exc}", err=True)
        return EXIT_SOME_FAILED
    if args.json:
        _say_json({"written": [str(path) for path in written]})
        return EXIT_OK
    for path in written:
        _say(path)
    return EXIT_OK


def _cmd_attach(args: argparse.Namespace) -> int:
    from cockpit.services.config.rulebook import load_rulebook
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError

    try:
        loaded = load_sweep(args.sweep)
        rulebook = load_rulebook()
    except ConfigError as exc:
        return _print_config_error(exc)
    metrics = None
    if args.metrics is not None:
        from cockpit.services.metrics.endpoint import BindError, parse_bind

        try:
            metrics = parse_bind(args.metrics)
        except BindError as exc:
            _say(f"--metrics: {exc}", err=True)
            return EXIT_INVALID
    from cockpit.services.watch.wiring import open_session
    from cockpit.ui.app import run_app

    session = open_session(loaded, args.db, probe=args.probe)
    try:
        return run_app(loaded, theme=args.theme, rulebook=rulebook, session=session,
                       metrics=metrics)
    finally:
        session.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `cockpit` console script."""
    parser, registered = _build_parser()
    args = parser.parse_args(argv)
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        **registered,
        "profiles": _cmd_profiles,
        "classify": _cmd_classify,
        "verify": _cmd_verify,
        "teardown": _cmd_teardown,
        "preflight": _cmd_preflight,
        "discover": _cmd_discover,
        "launch": _cmd_queue_control,
        "resume": _cmd_queue_control,
        "rerun": _cmd_queue_control,
        "stop": _cmd_queue_control,
        "status": _cmd_status,
        "trust": _cmd_trust,
        "demo": _cmd_demo,
        "attach": _cmd_attach,
        "screenshots": _cmd_screenshots,
    }
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        code = handlers[args.command](args)
        sys.stdout.flush()  # a closed pipe raises here, inside the handler below
        return code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # Ctrl-C: the shell's 130, no traceback
    except BrokenPipeError:
        # The reader went away (`cockpit status ... | head -1`): stop quietly. Python's docs
        # (signal, "Note on SIGPIPE"): point stdout at devnull so the flush at interpreter
        # exit cannot raise a second BrokenPipeError.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_SOME_FAILED
