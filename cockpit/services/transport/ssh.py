"""SSH connections with strict host keys, OpenSSH config, keepalive and bounded concurrency.

One asyncssh connection per host. Host keys are always checked: an unknown key becomes a
"needs approval" state carrying its SHA-256 fingerprint, and a *changed* key is refused and
reported; neither is ever accepted silently. `known_hosts=None` is never passed, and an
ssh_config `UserKnownHostsFile none` (which asyncssh would turn into "no checking") is
ignored in favour of the default files.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from cockpit.models.durations import parse_duration
from cockpit.models.snapshot import HostKeyInfo
from cockpit.models.sweep import Instance, SshSettings
from cockpit.services.config.paths import approved_known_hosts

# OpenSSH defaults: MaxSessions 10 channels per connection, MaxStartups 10 unauthenticated
# connections. Stay below both.
CHANNELS_PER_CONNECTION = 8
CONNECTS_PER_TARGET = 4
CONNECTS_GLOBAL = 32

# Semaphores belong to one event loop; keep them per loop (tests and `status` run several).
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[object, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _slot(key: object, size: int) -> asyncio.Semaphore:
    per_loop = _slots.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault(key, asyncio.Semaphore(size))


def _target_slot(host: str, port: int) -> asyncio.Semaphore:
    return _slot((host, port), CONNECTS_PER_TARGET)


def _global_slot() -> asyncio.Semaphore:
    return _slot("global", CONNECTS_GLOBAL)


_channel_slots: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def channel_slot(conn: Any) -> asyncio.Semaphore:
    """The semaphore every session channel on `conn` holds while it is open."""
    return _channel_slots.setdefault(conn, asyncio.Semaphore(CHANNELS_PER_CONNECTION))


class HostKeyProblem(Exception):
    """The server's host key is unknown (needs approval) or changed (refused)."""

    def __init__(
        self, changed: bool, info: HostKeyInfo, host: str, port: int, key: Any = None
    ) -> None:
        self.changed = changed
        self.info = info
        self.host = host
        self.port = port
        self.key = key  # the presented asyncssh key, when it could be fetched
        what = "CHANGED (refused)" if changed else "unknown (needs approval)"
        super().__init__(f"host key for {host}:{port} is {what}: {info.fingerprint}")


@dataclass(frozen=True)
class Target:
    """Resolved connection parameters for one instance."""

    alias: str
    host: str
    port: int
    options: Any  # asyncssh.SSHClientConnectionOptions
    known_hosts_files: tuple[Path, ...]
    config_files: tuple[str, ...] = ()
    connect_timeout: float = 10.0
    known_hosts: Any = None  # the asyncssh.SSHKnownHosts read from known_hosts_files
    identity_files: tuple[str, ...] = ()
    """The sweep's identity files, resolved (the system ssh client of a pull gets the same)."""


CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
           "aes128-ctr", "aes192-ctr", "aes256-ctr")


def _resolve(base: Path, value: str) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else base / path


def default_config_files(settings: SshSettings, sweep_dir: Path) -> list[str]:
    """~/.ssh/config (when present) followed by the sweep's own ssh_config files."""
    files = []
    user_config = Path.home() / ".ssh" / "config"
    if user_config.is_file():
        files.append(str(user_config))
    files.extend(str(_resolve(sweep_dir, c)) for c in settings.config)
    return files


def build_target(instance: Instance, settings: SshSettings, sweep_dir: Path) -> Target:
    """Resolve alias, port, user and known_hosts for `instance` through OpenSSH config."""
    config = default_config_files(settings, sweep_dir)
    kwargs: dict[str, Any] = {
        "config": config,
        "host": instance.host,
        "connect_timeout": parse_duration(settings.connect_timeout),
        "keepalive_interval": parse_duration(settings.keepalive_interval),
        "keepalive_count_max": settings.keepalive_count_max,
        # AES-GCM first: with AES-NI it moves ~1.8x the bytes of chacha20 per CPU second
        # (testbed.md: 506 vs 280 MB/s for an SFTP pull); the rest keep old servers working.
        "encryption_algs": list(CIPHERS),
    }
    if instance.port is not None:
        kwargs["port"] = instance.port
    if instance.user is not None:
        kwargs["username"] = instance.user
    identities = tuple(str(_resolve(sweep_dir, f)) for f in settings.identity_files)
    if identities:
        kwargs["client_keys"] = list(identities)
    probe = asyncssh.SSHClientConnectionOptions(**kwargs)

    files: list[Path] = [approved_known_hosts()]
    files += [_resolve(sweep_dir, k) for k in settings.known_hosts]
    from_config = probe.known_hosts
    if isinstance(from_config, list | tuple) and from_config:
        files += [Path(os.path.expanduser(str(f))) for f in from_config]
    else:
        # Either the default or `UserKnownHostsFile none`: we never disable checking.
        files += [Path.home() / ".ssh" / "known_hosts", Path("/etc/ssh/ssh_known_hosts")]
    existing = tuple(dict.fromkeys(f for f in files if f.is_file() and str(f) != os.devnull))
    known = (
        asyncssh.read_known_hosts([str(f) for f in existing])
        if existing
        else asyncssh.import_known_hosts("")
    )
    options = asyncssh.SSHClientConnectionOptions(probe, known_hosts=known)
    host = str(getattr(options, "host", None) or instance.host)
    port = int(getattr(options, "port", None) or instance.port or 22)
    return Target(instance.host, host, port, options, existing, tuple(config),
                  float(kwargs["connect_timeout"]), known, identities)


async def _fetch_key(target: Target, algs: Sequence[str] = ()) -> Any:
    # Through the same ssh_config (ProxyJump, HostName, Port) as the real connection.
    return await asyncio.wait_for(
        asyncssh.get_server_host_key(target.alias, target.port, server_host_key_algs=algs or (),
                                     config=list(target.config_files)),
        target.connect_timeout,
    )


def known_keys_for(target: Target) -> list[Any]:
    """Trusted host keys that match the target's host and port."""
    if target.known_hosts is None:
        return []
    port = None if target.port == 22 else target.port
    trusted = target.known_hosts.match(target.host, "", port)[0]
    if not trusted and target.alias != target.host:
        trusted = target.known_hosts.match(target.alias, "", port)[0]
    return list(trusted)


def fingerprint(key: Any) -> str:
    """`SHA256:...` fingerprint of an asyncssh public key."""
    return str(key.get_fingerprint("sha256"))


async def classify_host_key(target: Target) -> HostKeyProblem:
    """After HostKeyNotVerifiable: fetch the presented key and decide unknown vs changed."""
    trusted = known_keys_for(target)
    algs = sorted({k.algorithm.decode() for k in trusted}) if trusted else ()
    try:
        key = await _fetch_key(target, algs)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        # The server refuses every algorithm we trust for it: the key type changed.
        info = HostKeyInfo("unknown", f"(could not fetch: {exc})",
                           tuple(fingerprint(k) for k in trusted))
        return HostKeyProblem(bool(trusted), info, target.host, target.port)
    if key is None:
        info = HostKeyInfo("unknown", "(server sent no key)", ())
        return HostKeyProblem(bool(trusted), info, target.host, target.port)
    info = HostKeyInfo(key.get_algorithm(), fingerprint(key), tuple(fingerprint(k) for k in trusted))
    presented = key.public_data
    changed = bool(trusted) and all(k.public_data != presented for k in trusted)
    return HostKeyProblem(changed, info, target.host, target.port, key)


async def approve_host_key(target: Target, expected_fingerprint: str) -> HostKeyInfo:
    """Fetch the key again and add it to the cockpit's known_hosts if it matches the one the
    user approved. Refuses when the host already has a *different* trusted key."""
    problem = await classify_host_key(target)
    if problem.changed:
        raise problem
    if problem.key is None or problem.info.fingerprint != expected_fingerprint:
        raise ValueError(
            f"the server now presents {problem.info.fingerprint}, not the approved "
            f"{expected_fingerprint}; nothing was added"
        )
    # Write exactly the key whose fingerprint was compared, not a second fetch of it.
    key = problem.key
    pattern = target.host if target.port == 22 else f"[{target.host}]:{target.port}"
    line = f"{pattern} {key.export_public_key('openssh').decode().strip()}\n"
    path = approved_known_hosts()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(line)
    return problem.info


async def connect(target: Target) -> Any:
    """Open one connection, respecting the per-target and global connect limits.

    Raises HostKeyProblem for unknown/changed keys, asyncssh/OS errors otherwise.
    """
    async with _global_slot(), _target_slot(target.host, target.port):
        try:
            return await asyncssh.connect(target.alias, options=target.options)
        except asyncssh.HostKeyNotVerifiable:
            raise await classify_host_key(target) from None
