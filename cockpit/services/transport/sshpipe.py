"""A large file's bytes carried by the system's OpenSSH client, for the pull on a fast link.

On a fast link the SFTP pull is CPU-bound: every 32 KiB SSH packet is decrypted and parsed
by asyncssh's Python code on the cockpit's own core. Here `ssh HOST cat -- FILE` (`tail -c
+N` on a resume) moves the same bytes with OpenSSH's C cipher in a process of its own, and
**writes them straight into the pull's part file** (its stdout is that file, opened for
append): no byte passes through a pipe or through Python on the way in. The pull hashes the
part behind the client as it grows (`custody.pull`), from the page cache.

Why the client writes the file itself: a first version read the client's stdout through a
pipe in Python and was slower than SFTP on 2 cores (0.57x scp against 0.77x): the client, the
pipe reader and the hasher woke each other for every 64 KiB-1 MiB. With the file as stdout
the client never waits for the cockpit (`bench.pull_designs`, "ssh writes the part").

Trust is unchanged: the client gets the cockpit's resolved user, port, identities and config
files, and only the known_hosts files the cockpit itself trusts, with
`StrictHostKeyChecking=yes` and `BatchMode=yes` (an unknown or changed key, a password
prompt or a missing cipher ends it before a byte moves; the caller then uses SFTP over the
connection it already verified). Nothing is forwarded, multiplexed or run locally. The
client may not make the part larger than the file's expected end (`RLIMIT_FSIZE`, set on it
as it starts; the cockpit reads no further and cuts the part there), and the bytes are still
hashed against the manifest, fsynced and renamed only on a match.

Only used where it pays: files with at least PIPE_MIN_BYTES left, over a link whose round
trip is at most PIPE_MAX_RTT (OpenSSH's fixed 2 MiB channel window would cap a far link;
SFTP sizes its window to the round trip).
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

from cockpit.services.transport.ssh import CIPHERS

PIPE_MIN_BYTES = 64 << 20
"""Bytes left to move in one file for which a second SSH handshake pays off (a loopback
handshake is ~0.1 s, about 40 MB of transfer at the rates measured here)."""
PIPE_MAX_RTT = 0.002
"""Round trips (seconds) up to which a link counts as fast: OpenSSH's channel window is 2 MiB,
so a pipe moves at most 2 MiB per round trip (1 GB/s at 2 ms, 20 MB/s at 100 ms)."""
PIPE_PARALLEL = 2
"""System ssh clients at once per box. One already moves a file at about the link's or the
disk's speed; more would only add handshakes and compete for the same cores. A large file
waits for a slot; the pull's smaller files go on over SFTP meanwhile."""
STDERR_KEEP = 4096
"""Bytes of the client's stderr kept (the last ones): a box can print without end there."""
EXIT_WAIT_S = 10.0
"""Seconds the client may take to exit after its output ended, before it is killed."""
STALL_S = 30.0
"""Seconds without a byte after which the transfer is stopped (like an unanswered SFTP read);
the client's own ServerAlive probes end a dead link sooner."""
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+,@=:-]+")
"""A local path that can be given to OpenSSH as it is: no spaces, quotes or `%`/`~` tokens
(which ssh would expand). Anything else and the pull keeps to SFTP."""


class PipeUnavailable(Exception):
    """The client never delivered a byte (refused key, no password, no cipher, no ssh): the
    caller moves this file over SFTP instead."""


class PipeBroken(ConnectionError):
    """The stream stopped before the file's end: the part stays for the next pull."""


def ssh_binary() -> str | None:
    """The system OpenSSH client, if there is one."""
    return shutil.which("ssh")


def pipe_argv(ssh: str, config_file: str, alias: str, port: int, user: str | None,
              known_hosts: list[str], identities: list[str], connect_timeout: float,
              command: list[str]) -> list[str] | None:
    """The client's argv (no shell anywhere locally; `command` is quoted for the remote
    shell), or None when a path cannot be passed literally."""
    paths = [config_file, *known_hosts, *identities]
    if not known_hosts or not all(_PLAIN_PATH.fullmatch(p) for p in paths):
        return None
    argv = [ssh, "-F", config_file, "-T", "-e", "none",
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={' '.join(known_hosts)}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "UpdateHostKeys=no",
            "-o", "CheckHostIP=no", "-o", "VerifyHostKeyDNS=no",
            "-o", "ControlMaster=no", "-o", "ControlPath=none",
            "-o", "ClearAllForwardings=yes", "-o", "ForwardAgent=no", "-o", "ForwardX11=no",
            "-o", "PermitLocalCommand=no", "-o", "LogLevel=ERROR",
            "-o", f"ConnectTimeout={max(1, int(connect_timeout))}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-c", ",".join(CIPHERS), "-p", str(port)]
    if user:
        argv += ["-l", user]
    if identities:
        argv += ["-o", "IdentitiesOnly=yes"]
        for identity in identities:
            argv += ["-i", identity]
    return [*argv, "--", alias, shlex.join(command)]


def stream_command(path: str, offset: int) -> list[str]:
    """The remote command: `path` from byte `offset` on, on stdout (one argv, quoted for the
    remote shell by `pipe_argv`: a hostile name stays a name). `cat` for a whole file: GNU
    `tail -c +N` copies in 8 KiB reads and writes, `cat` in 128 KiB ones, and the box's CPU
    shows in the rate (1 GiB over loopback: 0.90x scp with tail, see bench/README); a resumed
    file takes `tail`. It is not cut at the expected end on the box (a `| head -c` there
    cost a second copy through a pipe): the client may not write past it (`SshPipe.start`)
    and the cockpit reads no further."""
    if offset == 0:
        return ["cat", "--", path]
    return ["tail", "-c", f"+{offset + 1}", "--", path]


def config_include(files: list[str], folder: Path) -> str:
    """One `-F` file standing for the cockpit's list of config files, in order (OpenSSH takes
    one `-F`; the first value found for an option wins in both clients): `/dev/null` for
    none, the file itself for one, else a file of `Include` lines in `folder`."""
    if not files:
        return os.devnull
    if len(files) == 1:
        return files[0]
    path = folder / "ssh_config"
    path.write_text("".join(f"Include {f}\n" for f in files), encoding="utf-8")
    return str(path)


class SshPipe:
    """One `ssh … cat -- FILE` (or `tail -c +N -- FILE`) whose stdout is the part file.

    `start(out_fd, limit)` starts the client writing to `out_fd` (a file opened for append)
    and caps the file it may grow at `limit` bytes; the caller follows the file (hashing it)
    and asks `poll()` whether the client has ended. `moved` is set by that caller: the bytes
    it has taken in. `stop()` ends the client and anything it started.
    """

    def __init__(self, argv: list[str], count: int) -> None:
        self.argv = argv
        self.count = count
        self.moved = 0
        self._stderr = bytearray()
        self._stop = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, out_fd: int, limit: int) -> None:
        """Start the client (its own session, so stop() can end it and anything it started),
        its stdout `out_fd`, and the file it writes capped at `limit` bytes."""
        self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out_fd,
                                        stderr=subprocess.PIPE, bufsize=0, start_new_session=True)
        # The cap is set from outside, just after the start: the client writes nothing before
        # its handshake, login and the remote command (tens of ms at least). A write past it
        # fails (EFBIG, then SIGXFSZ ends the client): a box cannot grow the part without end.
        # Where the platform has no prlimit the caller's own check (it reads no further than
        # the expected end and truncates after) still holds.
        with contextlib.suppress(OSError, AttributeError, ValueError):
            resource.prlimit(self.process.pid, resource.RLIMIT_FSIZE, (limit, limit))
            # SIGXFSZ would dump core by default: no core file of a client holding keys.
            resource.prlimit(self.process.pid, resource.RLIMIT_CORE, (0, 0))
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while block := self.process.stderr.read(STDERR_KEEP):
            self._stderr += block
            del self._stderr[:-STDERR_KEEP]

    @property
    def stderr(self) -> str:
        """The last bytes the client printed on stderr, as one line."""
        return self._stderr.decode(errors="replace").strip().replace("\n", " | ")[-300:]

    @property
    def stopped(self) -> bool:
        """Whether stop() was called."""
        return self._stop.is_set()

    def poll(self) -> int | None:
        """The client's exit status, or None while it runs."""
        assert self.process is not None
        return self.process.poll()

    def stop(self) -> None:
        """End the transfer now (the follower then sees the client gone): PipeBroken."""
        self._stop.set()
        self._kill()

    def wait(self) -> int:
        """Wait for the client to end (after stop(): at once); its exit status."""
        assert self.process is not None
        return self.process.wait()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, 9)

    def finish(self, got: int) -> None:
        """Judge the transfer once the follower has taken in `got` bytes (blocking: waits up
        to EXIT_WAIT_S for the client to end). Returns when all `count` bytes came; raises
        PipeUnavailable when not one byte came and the client failed, PipeBroken when the
        stream ended early or was stopped, ShortRemote when the remote file ended first."""
        assert self.process is not None
        if got >= self.count:
            self._kill()  # nothing more is wanted from it
        try:
            # At the end of its output the client is closing its channel: its own status
            # says whether the remote ended cleanly (a shorter file) or the link broke.
            status = self.process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            status = self.process.wait()
        if got >= self.count:
            return
        if self._stop.is_set():
            raise PipeBroken("the transfer was stopped")
        if got == 0 and status != 0:
            raise PipeUnavailable(f"ssh exited {status}: {self.stderr or 'no message'}")
        if status == 0:
            raise ShortRemote(got)
        raise PipeBroken(f"ssh exited {status} after {got} of {self.count} bytes: "
                         f"{self.stderr or 'no message'}")


class ShortRemote(Exception):
    """The remote command ended cleanly before the file's expected end (the file shrank)."""

    def __init__(self, got: int) -> None:
        super().__init__(f"the remote file ended after {got} bytes")
        self.got = got
