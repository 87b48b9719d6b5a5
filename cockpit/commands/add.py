"""`cockpit add SWEEP 'ssh -p 12345 root@region-1.autodl.com' --profile autodl --name a1`.

Turns the one ssh line a platform hands out into an instance of the sweep (creating the sweep
from the starter when there is none): the line is parsed and validated, the box's host key is
fetched and its SHA-256 fingerprint shown for approval (y/N on a terminal, `--trust SHA256:...`
otherwise; never accepted silently), and when a queue already runs there its paths are filled
in by the same discovery as `cockpit discover`. Nothing is written unless all of it is valid.

Exit 0: the instance was added (and its key is trusted); 1: nothing was added because the key
was not approved, changed, or the box could not be reached, or it was added but logging in or
discovery failed (said on stderr); 2: invalid input (the ssh line, the name, the profile, an
existing name, a sweep that does not load).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

DISCOVERED_KEYS = ("queue", "queue_log", "run_logs", "tmux_session", "runner")
"""What discovery may fill in; each value is the box's and is validated with the instance."""

MAX_ANSWER = 16
"""Characters read from the y/N prompt (an answer is one word)."""


def add_parser(subparsers: Any) -> None:
    """Register `add`."""
    cmd = subparsers.add_parser(
        "add", help="add a box to a sweep from the ssh line the platform hands out",
        description="Parse an ssh line (-p, -i, -l, -o Port=/User=/IdentityFile=, user@host, "
                    "ssh://), show the box's host key fingerprint and ask to trust it, fill the "
                    "queue paths when a queue already runs there, and append the instance to "
                    "SWEEP (created when missing), keeping its comments. Exit 0 added; 1 not "
                    "added (key not approved or changed, box unreachable) or added but login "
                    "or discovery failed; 2 invalid input.")
    cmd.add_argument("sweep", type=Path, help="the sweep file (created when missing)")
    cmd.add_argument("ssh_line", metavar="SSH_LINE",
                     help="the platform's line, quoted: 'ssh -p 12345 root@region-1.autodl.com'")
    cmd.add_argument("--profile", required=True, help="platform profile (cockpit profiles list)")
    cmd.add_argument("--name", default=None,
                     help="instance name (default: from the host name)")
    cmd.add_argument("--trust", default=None, metavar="SHA256:...",
                     help="approve the host key only if it has this fingerprint (needed when "
                          "stdin is not a terminal); compare it with the platform's console")
    cmd.add_argument("--offline", action="store_true",
                     help="write the instance without connecting: no key check, no discovery "
                          "(approve the key later with `cockpit trust`)")
    cmd.add_argument("--json", action="store_true", help="print a JSON document")


@dataclass
class Outcome:
    """What `add` did, for the text and JSON reports."""

    sweep: Path
    created: bool = False
    added: bool = False
    instance: dict[str, Any] = field(default_factory=dict)
    host_key: dict[str, Any] | None = None
    discovery: dict[str, Any] = field(default_factory=lambda: {"status": "skipped"})
    notes: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """The `--json` document."""
        return {"sweep": str(self.sweep), "created": self.created, "added": self.added,
                "instance": self.instance, "host_key": self.host_key,
                "discovery": self.discovery, "notes": self.notes}


def _err(text: str) -> None:
    from cockpit.models.text import visible

    sys.stderr.write(visible(text, one_line=False, limit=0) + "\n")


def _ask(question: str) -> bool:
    """y/N on the terminal; anything but y/yes is no."""
    sys.stderr.write(question)
    sys.stderr.flush()
    answer = sys.stdin.readline(MAX_ANSWER * 4)[:MAX_ANSWER]
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    """Parse, check, trust, discover, write; see the module doc for the exit codes."""
    from cockpit.models.sweep import Instance, SshSettings
    from cockpit.models.text import json_text, visible
    from cockpit.services.config import sweepwrite
    from cockpit.services.config.profiles import load_named
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError

    path: Path = args.sweep
    out = Outcome(path)
    try:
        line = sweepwrite.parse_ssh_line(args.ssh_line)
    except sweepwrite.SshLineError as exc:
        _err(f"not added: {exc}")
        return EXIT_INVALID
    name = args.name or sweepwrite.sweep_name_for(Path(line.host.split(".")[0] or "box"))
    if not sweepwrite.NAME_RE.match(name):
        _err(f"not added: --name must be letters, digits, - _ . (at most 64), got {name!r}")
        return EXIT_INVALID
    try:
        load_named(args.profile)
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_INVALID
    settings = SshSettings()
    if path.exists():
        try:
            loaded = load_sweep(path)
        except ConfigError as exc:
            # The starter has no instance yet, which is the one error `add` itself fixes.
            if not _only_empty_instances(exc):
                _err(str(exc))
                return EXIT_INVALID
            settings = _settings_of(path)
        else:
            settings = loaded.sweep.ssh
            if any(i.name == name for i in loaded.sweep.instances):
                _err(f"not added: {path} already has an instance named {name!r}")
                return EXIT_INVALID
    instance: dict[str, Any] = {"name": name, "profile": args.profile, "host": line.host}
    if line.port is not None and line.port != 22:
        instance["port"] = line.port
    if line.user is not None:
        instance["user"] = line.user
    if line.identity_file is not None and line.identity_file not in settings.identity_files:
        settings = settings.model_copy(
            update={"identity_files": (*settings.identity_files, line.identity_file)})
    try:
        Instance.model_validate(instance)
    except ValueError as exc:
        _err(f"not added: {exc}")
        return EXIT_INVALID
    sweep_dir = path.resolve().parent

    code = EXIT_OK
    if not args.offline:
        code = _connect_side(args, out, instance, settings, sweep_dir)
        if not out.host_key or out.host_key.get("trust") is None:
            if args.json:
                sys.stdout.write(json_text(out.document()) + "\n")
            return code
    else:
        out.notes.append("offline: no host key checked and nothing discovered; approve the key "
                         f"with `cockpit trust {path} {name} --fingerprint SHA256:...`")

    try:
        if not path.exists():
            sweepwrite.write_new(path, sweepwrite.starter_text(sweepwrite.sweep_name_for(path),
                                                               str(path)))
            out.created = True
        sweepwrite.add_instance(path, instance, line.identity_file)
    except (ValueError, OSError, ConfigError) as exc:
        if out.created:
            path.unlink(missing_ok=True)
            out.created = False
        _err(f"not added: {exc}")
        return EXIT_INVALID
    out.added = True
    out.instance = instance
    if args.json:
        sys.stdout.write(json_text(out.document()) + "\n")
    else:
        verb = "created" if out.created else "updated"
        sys.stdout.write(visible(f"{verb} {path}: added {name} ({args.profile}, "
                                 f"{line.user + '@' if line.user else ''}{line.host}"
                                 f"{':' + str(line.port) if line.port else ''})", limit=0) + "\n")
        found = out.discovery
        if found.get("status") == "filled":
            sys.stdout.write(visible("  queue found: " + ", ".join(
                f"{k}={found['fields'][k]}" for k in found["fields"] if k != "runner"),
                limit=0) + "\n")
        for note in out.notes:
            sys.stdout.write(visible(f"  {note}", limit=0) + "\n")
        sys.stdout.write(visible(f"next: cockpit status {path}   or   cockpit attach {path}",
                                 limit=0) + "\n")
    return code


def _only_empty_instances(exc: Exception) -> bool:
    problems = getattr(exc, "problems", ())
    return bool(problems) and all("at least one instance" in p.message for p in problems)


def _settings_of(path: Path) -> Any:
    """The ssh settings of a sweep that does not load only because it has no instance yet."""
    from cockpit.models.sweep import SshSettings
    from cockpit.services.config.yamlfile import load_yaml_file

    document = load_yaml_file(path).data
    ssh = document.get("ssh") if isinstance(document, dict) else None
    try:
        return SshSettings.model_validate(ssh or {})
    except ValueError:
        return SshSettings()


def _connect_side(args: argparse.Namespace, out: Outcome, instance: dict[str, Any],
                  settings: Any, sweep_dir: Path) -> int:
    """Fetch and approve the host key, then log in and discover; fills `out`.

    The y/N question is asked between two event loops, never inside one: asyncio's SIGINT
    handler only cancels the running task, which a blocking read does not notice, so Ctrl-C
    at the prompt would have needed pressing twice."""
    from cockpit.models.sweep import Instance
    from cockpit.services.transport import ssh

    inst = Instance.model_validate(instance)
    target = ssh.build_target(inst, settings, sweep_dir)
    try:
        problem = asyncio.run(ssh.classify_host_key(target))
    except (OSError, TimeoutError) as exc:
        _err(f"not added: cannot reach {target.host}:{target.port}: {exc}")
        return EXIT_FAILED
    info = problem.info
    out.host_key = {"algorithm": info.algorithm, "fingerprint": info.fingerprint,
                    "known": list(info.known_fingerprints), "trust": None}
    if problem.key is None:
        _err(f"not added: could not read the host key of {target.host}:{target.port} "
             f"({info.fingerprint})")
        return EXIT_FAILED
    if problem.changed:
        _err(f"not added: the host key of {target.host}:{target.port} CHANGED: it presents "
             f"{info.algorithm} {info.fingerprint}, but {', '.join(info.known_fingerprints)} is "
             "trusted for it. A changed key is never accepted here; check the platform console "
             "and fix known_hosts by hand.")
        return EXIT_FAILED
    presented = problem.key.public_data
    if any(k.public_data == presented for k in ssh.known_keys_for(target)):
        out.host_key["trust"] = "already-trusted"
    else:
        shown = f"{target.host}:{target.port} presents {info.algorithm} key {info.fingerprint}"
        if args.trust is not None:
            if args.trust != info.fingerprint:
                _err(f"not added: {shown}, not the --trust {args.trust}")
                return EXIT_FAILED
        elif sys.stdin.isatty():
            _err(f"{shown}\nCompare it with the fingerprint the platform's console shows.")
            if not _ask("Trust this key? [y/N] "):
                _err("not added: the key was not trusted")
                return EXIT_FAILED
        else:
            _err(f"not added: {shown}; stdin is not a terminal, so approve it with "
                 f"--trust {info.fingerprint} once you have compared it with the platform's")
            return EXIT_FAILED
        try:
            asyncio.run(ssh.approve_host_key(target, info.fingerprint))
        except (ssh.HostKeyProblem, ValueError, OSError, TimeoutError) as exc:
            _err(f"not added: {exc}")
            out.host_key["trust"] = None
            return EXIT_FAILED
        out.host_key["trust"] = "approved"
    return asyncio.run(_discover(out, instance, settings, sweep_dir))


async def _discover(out: Outcome, instance: dict[str, Any], settings: Any,
                    sweep_dir: Path) -> int:
    """Log in and look for a running queue; fills `instance` when exactly one runs."""
    from cockpit.models.sweep import Instance
    from cockpit.services.queue.discover import discover_host
    from cockpit.services.transport import ssh

    target = ssh.build_target(Instance.model_validate(instance), settings, sweep_dir)
    try:
        conn = await ssh.connect(target)
    except Exception as exc:  # auth, network: the instance is still worth adding
        out.discovery = {"status": "failed", "detail": f"cannot log in: {exc}"}
        out.notes.append(f"could not log in to look for a queue: {exc}")
        _err(f"{instance['name']}: could not log in to look for a queue: {exc}")
        return EXIT_FAILED
    try:
        queues = await discover_host(conn)
    except Exception as exc:  # a box that breaks the script: report, still add
        out.discovery = {"status": "failed", "detail": f"discovery failed: {exc}"}
        out.notes.append(f"queue discovery failed: {exc}")
        return EXIT_FAILED
    finally:
        conn.close()
    if not queues:
        out.discovery = {"status": "none-running"}
        out.notes.append("no running queue found: fill queue, queue_log, run_logs and "
                         "durable_root when one runs (or use `cockpit launch`)")
        return EXIT_OK
    if len(queues) > 1:
        out.discovery = {"status": "several", "queues": [q.queue for q in queues]}
        out.notes.append(f"{len(queues)} queues run there; none was filled in (`cockpit "
                         f"discover` prints one instance per queue): "
                         + ", ".join(str(q.queue) for q in queues))
        return EXIT_OK
    queue = queues[0]
    fields = {k: getattr(queue, k) for k in DISCOVERED_KEYS if getattr(queue, k)}
    try:
        Instance.model_validate({**instance, **fields})
    except ValueError as exc:
        out.discovery = {"status": "invalid", "detail": str(exc)}
        out.notes.append("a queue runs there, but its paths are not valid sweep values; "
                         "nothing of it was filled in")
        return EXIT_OK
    instance.update(fields)
    out.discovery = {"status": "filled", "fields": fields,
                     "missing": dict(queue.missing)}
    out.notes += [f"{key}: NOT FOUND — {why}" for key, why in queue.missing.items()]
    return EXIT_OK
