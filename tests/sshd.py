"""A throwaway real OpenSSH sshd on 127.0.0.1 for service tests (see shared testbed.md)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def require(binary: str, what: str) -> None:
    """Skip locally when `binary` is missing; under CI=true a missing binary is a failure."""
    if Path(binary).exists() or shutil.which(binary):
        return
    message = f"{what} not installed ({binary}); the README test command installs it"
    if os.environ.get("CI") == "true":
        pytest.fail(f"under CI=true this must not skip: {message}")
    pytest.skip(message)


def descendants(root: int) -> list[int]:
    """All live descendants of `root`, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keygen(path: Path) -> None:
    """An ed25519 key pair at `path` and `path.pub`."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


HERMETIC_ENV = {"SHLVL": "1"}
"""Set in every test session. bash run by sshd sources ~/.bashrc only as a top-level shell,
and SHLVL=1 makes it the second level: the tests' boxes do not run this machine's own rc files.
Root's ~/.bashrc here runs `pyenv init`, whose `pyenv rehash` takes a lock file: a session
killed inside it (the fault tests kill sessions and sshd on purpose) leaves the lock stale, and
every later session then waits 60 s for it; probes went stale and four watch/fleet tests failed
that way in a full run."""


@dataclass
class Sshd:
    """One sshd process with its own host key, client key and authorized_keys."""

    root: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    listen: str = "127.0.0.1"
    netns: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Variables every session gets (sshd_config SetEnv; overrides the default PATH)."""

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.host_key = self.root / "host_key"
        self.client_key = self.root / "client_key"
        if not self.host_key.exists():
            keygen(self.host_key)
        if not self.client_key.exists():
            keygen(self.client_key)
        shutil.copy(self.client_key.with_suffix(".pub"), self.root / "authorized_keys")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)

    def config_text(self) -> str:
        return "\n".join([
            f"Port {self.port}",
            f"ListenAddress {self.listen}",
            f"HostKey {self.host_key}",
            f"PidFile {self.root / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "MaxStartups 200:30:400",
            "MaxSessions 200",
            "Subsystem sftp /usr/lib/openssh/sftp-server",
            # one line: sshd keeps only the first SetEnv directive it reads
            "SetEnv " + " ".join(f'"{name}={value}"' for name, value in
                                 {**HERMETIC_ENV, **self.env}.items()),
            "",
        ])

    def start(self) -> None:
        """Start sshd and wait until it accepts connections."""
        config = self.root / "sshd_config"
        config.write_text(self.config_text())
        cmd = [SSHD, "-D", "-e", "-f", str(config)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.proc.returncode}")
            if self.netns is None:
                try:
                    with socket.create_connection((self.listen, self.port), timeout=0.2):
                        return
                except OSError:
                    time.sleep(0.05)
            else:
                time.sleep(0.3)
                return
        raise RuntimeError("sshd did not start listening")

    def stop(self) -> None:
        """Kill sshd and every session it forked (SIGKILL: like a box vanishing)."""
        if self.proc is not None and self.proc.poll() is None:
            doomed = descendants(self.proc.pid)
            self.proc.kill()
            for pid in doomed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None

    def known_hosts_line(self, key: Path | None = None) -> str:
        """A known_hosts entry for this server (optionally with another key)."""
        pub = (key or self.host_key).with_suffix(".pub").read_text().split()
        return f"[{self.listen}]:{self.port} {pub[0]} {pub[1]}\n"

    def write_client_files(self, alias: str, directory: Path, *, trusted: bool = True) -> Path:
        """An ssh_config with `Host alias` and a known_hosts file next to it."""
        known = directory / "known_hosts"
        known.write_text(self.known_hosts_line() if trusted else "")
        config = directory / "ssh_config"
        config.write_text(
            f"Host {alias}\n  HostName {self.listen}\n  Port {self.port}\n  User root\n"
            f"  IdentityFile {self.client_key}\n  UserKnownHostsFile {known}\n"
        )
        return config
