"""Write sweep files for the user: a commented starter (`cockpit init`) and one more instance
from the one-line ssh command a platform hands out (`cockpit add`).

The file is the user's: adding an instance must keep their comments, key order and quoting,
so it is edited through ruamel.yaml's round-trip mode rather than re-dumped by PyYAML (which
drops every comment). What is written is validated with `load_sweep` before it replaces the
old file, and the replacement is atomic (a temporary file in the same folder, `os.replace`),
so a failed add leaves the file exactly as it was.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cockpit.services.config.sweepfile import LoadedSweep, load_sweep

MAX_SSH_LINE = 1024
"""Characters of the pasted ssh line: the longest a platform hands out (a `-i` path and an
`-o` or two) is under 200; anything longer is a paste error, not a command."""

MAX_SWEEP_BYTES = 1 << 20
"""A sweep file `add` edits: a few KiB for dozens of boxes; a bigger file is not a sweep."""

_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]{2,45}$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""The sweep schema's instance and sweep name (models.sweep.Name)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_OPTIONS_WITH_VALUE = {"-p": "port", "-i": "identity", "-l": "user", "-o": "option"}
_HARMLESS_FLAGS = set("46ACTtqvX")
"""Single-letter ssh flags that change nothing the cockpit needs (address family,
agent/X11 forwarding, compression, tty allocation, verbosity): accepted and ignored."""
_OPTION_KEYS = {"port": "port", "user": "user", "identityfile": "identity"}
"""`-o Key=value` options `add` understands; any other is refused by name (a ProxyJump or a
StrictHostKeyChecking=no belongs in an ssh_config the user writes on purpose)."""


class SshLineError(ValueError):
    """The pasted line is not an ssh command `add` can turn into an instance."""


@dataclass(frozen=True)
class SshLine:
    """Where the pasted ssh line connects: host, port, user and key file (None: default)."""

    host: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise SshLineError(f"the port must be a number from 1 to 65535, got {text!r}")
    return int(text)


def _host(text: str) -> str:
    host = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if _HOST.match(host) or (":" in host and _IPV6.match(host)):
        return host
    raise SshLineError(f"not a host name or address: {text!r}")


def _user(text: str) -> str:
    if not _USER.match(text):
        raise SshLineError(f"not a user name the sweep accepts: {text!r}")
    return text


def _identity(text: str) -> str:
    if not text or _CONTROL.search(text) or text != text.strip():
        raise SshLineError(f"not a key file path: {text!r}")
    return text


def parse_ssh_line(line: str) -> SshLine:
    """The destination of `ssh -p 12345 root@region-1.autodl.com` (and `-i KEY`, `-l USER`,
    `-o Port=`/`User=`/`IdentityFile=`, `ssh://user@host:port`). Raises SshLineError naming
    the part it refuses: a remote command, a jump host, port forwarding, another option."""
    if len(line) > MAX_SSH_LINE:
        raise SshLineError(f"the ssh line is over {MAX_SSH_LINE} characters")
    if _CONTROL.search(line.replace("\t", " ")):
        raise SshLineError("the ssh line contains control characters (a newline?)")
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise SshLineError(f"cannot split the ssh line: {exc}") from None
    if words and os.path.basename(words[0]) == "ssh":
        words = words[1:]
    found: dict[str, Any] = {}
    destination: str | None = None
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-") or word == "-":
            if destination is not None:
                raise SshLineError(f"a remote command ({' '.join(words[index - 1:])!r}) is not "
                                   "part of an instance: paste only the ssh line")
            destination = word
            continue
        flag, attached = word[:2], word[2:]
        if flag in _OPTIONS_WITH_VALUE:
            if attached:
                value = attached
            elif index < len(words):
                value, index = words[index], index + 1
            else:
                raise SshLineError(f"{flag} needs a value")
            kind = _OPTIONS_WITH_VALUE[flag]
            if kind == "option":
                key, sep, opt_value = value.partition("=")
                if not sep:
                    key, _, opt_value = value.partition(" ")
                kind = _OPTION_KEYS.get(key.strip().lower(), "")
                if not kind:
                    raise SshLineError(f"-o {key.strip()} is not something `add` writes; put it "
                                       "in an ssh_config (sweep key ssh.config) instead")
                value = opt_value.strip()
            if kind in found and found[kind] != value:
                what = {"port": "ports", "user": "users", "identity": "key files"}[kind]
                raise SshLineError(f"two {what} in the ssh line: {found[kind]!r} and {value!r}")
            found[kind] = value
        elif all(c in _HARMLESS_FLAGS for c in word[1:]):
            continue
        else:
            raise SshLineError(f"ssh option {word} is not supported by `add` (it understands "
                               "-p, -i, -l and -o Port=/User=/IdentityFile=); write anything "
                               "else in an ssh_config")
    if destination is None:
        raise SshLineError("no destination in the ssh line (expected user@host)")
    user: str | None = None
    port: int | None = None
    if destination.startswith("ssh://"):
        parts = urlsplit(destination)
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.password:
            raise SshLineError(f"an ssh:// URL names only user@host:port, got {destination!r}")
        try:
            port = parts.port
        except ValueError:
            raise SshLineError(f"bad port in {destination!r}") from None
        user, host_text = parts.username, parts.hostname or ""
        if not host_text:
            raise SshLineError(f"no host in {destination!r}")
    else:
        if "@" in destination:
            user, _, host_text = destination.rpartition("@")
        else:
            host_text = destination
    # Two different users or ports in one line: which one OpenSSH takes depends on the order;
    # the sweep must not guess.
    if "user" in found:
        if user and user != found["user"]:
            raise SshLineError(f"two users in the ssh line: {user!r} and -l {found['user']!r}")
        user = found["user"]
    if "port" in found:
        option_port = _port(str(found["port"]))
        if port is not None and port != option_port:
            raise SshLineError(f"two ports in the ssh line: {port} and {option_port}")
        port = option_port
    return SshLine(
        host=_host(host_text),
        port=port,
        user=_user(user) if user else None,
        identity_file=_identity(found["identity"]) if "identity" in found else None,
    )


def sweep_name_for(path: Path) -> str:
    """A valid sweep name from the file name (`my sweep.yaml` -> `my-sweep`)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-._")[:64]
    return name if name and NAME_RE.match(name) else "sweep"


STARTER = """\
# A cockpit sweep: the boxes of one experiment, and where each keeps its queue and results.
# Written by `cockpit init`. Add a box from the ssh line your platform hands out:
#   cockpit add {file} 'ssh -p 12345 root@region-1.autodl.com' --profile autodl --name a1
# It shows the box's host key fingerprint to approve and fills the queue paths when a queue
# already runs there. Profiles: `cockpit profiles list`. Every key: README.md, "Sweep files".
sweep: {name}

# Where `cockpit verify` pulls and checks each instance's results (relative to this file).
pull_dir: ./pulled
# How often the TUI probes each box.
interval: 2s

ssh:
  # Extra ssh_config files (ProxyJump, aliases), read after ~/.ssh/config; relative to this file.
  config: []
  # Private keys to offer (ssh -i); `cockpit add` adds the one its ssh line names.
  identity_files: []
  connect_timeout: 10s
  # A frozen link is dropped after interval x (count_max + 1): ~6 s with these defaults.
  keepalive_interval: 3s
  keepalive_count_max: 1

alerts:
  # A desktop notification (notify-send) for each material event.
  desktop: true
  # A JSON POST per event, and apprise channels (slack://, dingtalk://, feishu://, ntfy://):
  # webhook: https://example.org/hook
  # notify: []

# One entry per box; `cockpit add` appends them. By hand it looks like:
#  - name: a1                          # letters, digits, - _ . (unique in this file)
#    profile: autodl                   # cockpit profiles list
#    host: region-1.autodl.com         # or an ~/.ssh/config alias
#    port: 12345
#    user: root
#    queue: /root/autodl-tmp/proj/queue_1.txt      # found by discovery when a queue runs
#    queue_log: /root/autodl-tmp/proj/q1_master.log
#    run_logs: /root/autodl-tmp/proj/logs
#    durable_root: /root/autodl-fs/proj            # where results outlive the box
#    price_per_hour: 2.5
instances: []
"""


def starter_text(name: str, file_hint: str) -> str:
    """The commented starter sweep called `name`; `file_hint` is shown in its `add` example."""
    if not NAME_RE.match(name):
        raise ValueError(f"a sweep name is letters, digits, - _ . (at most 64), got {name!r}")
    return STARTER.format(name=name, file=shlex.quote(file_hint))


def write_new(path: Path, text: str) -> None:
    """Create `path` with `text`; FileExistsError when anything is there (never overwrites)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _round_trip() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long path or command onto two lines
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _read(path: Path) -> Any:
    with path.open("rb") as handle:
        data = handle.read(MAX_SWEEP_BYTES + 1)
    if len(data) > MAX_SWEEP_BYTES:
        raise ValueError(f"{path}: over {MAX_SWEEP_BYTES} bytes; not a sweep file `add` edits")
    return _round_trip().load(data.decode("utf-8"))


def add_instance(path: Path, instance: dict[str, Any], identity_file: str | None = None
                 ) -> LoadedSweep:
    """Append `instance` to the sweep at `path` (and `identity_file` to ssh.identity_files
    when it is not listed), keeping the user's comments; return the sweep as loaded again.

    Raises ValueError for a name already used, and ConfigError (file:line:field) when the
    result would not load; the file is then left untouched."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    document = _read(path)
    if not isinstance(document, CommentedMap):
        raise ValueError(f"{path}: a sweep file must be a mapping of keys")
    instances = document.get("instances")
    if not isinstance(instances, CommentedSeq) or not instances:
        # `instances: []` (the starter) is a flow sequence; the entries go in block style.
        seq = CommentedSeq()
        seq.fa.set_block_style()
        if isinstance(instances, CommentedSeq):
            seq.extend(instances)
        document["instances"] = instances = seq
    if any(isinstance(i, dict) and i.get("name") == instance["name"] for i in instances):
        raise ValueError(f"{path}: an instance named {instance['name']!r} is already there")
    entry = CommentedMap()
    for key, value in instance.items():
        entry[key] = _plain(value)
    instances.append(entry)
    if identity_file is not None:
        ssh = document.get("ssh")
        if not isinstance(ssh, CommentedMap):
            ssh = CommentedMap()
            document["ssh"] = ssh
        files = ssh.get("identity_files")
        if not isinstance(files, list):
            files = CommentedSeq()
            ssh["identity_files"] = files
        if identity_file not in files:
            files.append(identity_file)
    buffer = StringIO()
    _round_trip().dump(document, buffer)
    return _replace_checked(path, buffer.getvalue())


def _plain(value: Any) -> Any:
    """Nested dicts and lists as ruamel block nodes (a runner block, its env)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        out = CommentedMap()
        for key, item in value.items():
            out[str(key)] = _plain(item)
        return out
    if isinstance(value, list | tuple):
        seq = CommentedSeq()
        seq.extend(_plain(v) for v in value)
        return seq
    return value


def _replace_checked(path: Path, text: str) -> LoadedSweep:
    """Write `text` beside `path`, load it as a sweep, then move it over `path` (atomic)."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o777)
        load_sweep(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return load_sweep(path)
