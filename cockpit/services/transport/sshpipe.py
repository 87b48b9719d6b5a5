"""A large file's bytes carried by the system's OpenSSH client, for the pull on a fast link.

On a fast link the SFTP pull is CPU-bound: every 32 KiB SSH packet is decrypted and parsed
by asyncssh's Python code on the cockpit's own core. `ssh HOST tail -c +N -- FILE` moves the
same bytes with OpenSSH's C cipher in a process of its own (another core); the cockpit only
copies them from a pipe, hashes and writes them (`bench.pull_designs` measured both).

Trust is unchanged: the client gets the cockpit's resolved user, port, identities and config
files, and only the known_hosts files the cockpit itself trusts, with
`StrictHostKeyChecking=yes` and `BatchMode=yes` (an unknown or changed key, a password
prompt or a missing cipher ends it before a byte moves; the caller then uses SFTP over the
connection it already verified). Nothing is forwarded, multiplexed or run locally, and the
bytes are still hashed against the manifest, fsynced and renamed only on a match.

Only used where it pays: files with at least PIPE_MIN_BYTES left, over a link whose round
trip is at most PIPE_MAX_RTT (OpenSSH's fixed 2 MiB channel window would cap a far link;
SFTP sizes its window to the round trip).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import queue
import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

PIPE_MIN_BYTES = 64 << 20
"""Bytes left to move in one file for which a second SSH handshake pays off (a loopback
handshake is ~0.1 s, about 40 MB of transfer at the rates measured here)."""
PIPE_MAX_RTT = 0.002
"""Round trips (seconds) up to which a link counts as fast: OpenSSH's channel window is 2 MiB,
so a pipe moves at most 2 MiB per round trip (1 GB/s at 2 ms, 20 MB/s at 100 ms)."""
PIPE_BUFFER = 4 << 20
"""Bytes handed from the reading thread to the hashing-and-writing one at once."""
PIPE_BUFFERS = 6
"""Buffers in the ring between the two threads: reused, because fresh memory costs a page
fault per 4 KiB, and bounded: at most PIPE_BUFFERS x PIPE_BUFFER bytes wait to be written."""
PIPE_KERNEL_SIZE = 1 << 20
"""The pipe's kernel buffer (`F_SETPIPE_SZ`), so one read returns up to 1 MiB, not 64 KiB."""
F_SETPIPE_SZ = 1031
STDERR_KEEP = 4096
"""Bytes of the client's stderr kept (the last ones): a box can print without end there."""
EXIT_WAIT_S = 10.0
"""Seconds the client may take to exit after its output ended, before it is killed."""
STALL_S = 30.0
"""Seconds without a byte after which the transfer is stopped (like an unanswered SFTP read);
the client's own ServerAlive probes end a dead link sooner."""
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
           "aes128-ctr", "aes192-ctr", "aes256-ctr")
"""The cockpit's cipher preference (transport.ssh.CIPHERS): AES-GCM first, cheapest with AES-NI."""
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
    """One `ssh … tail -c +N -- FILE` streaming `count` bytes into a sink.

    Two threads: one reads the pipe into a ring of buffers, one hashes and writes them
    (`store`), so the copy, SHA-256 and the write overlap; both are plain file I/O (never
    asyncssh). The caller polls `moved` for progress and calls `stop()` to end it early.
    """

    def __init__(self, argv: list[str], count: int) -> None:
        self.argv = argv
        self.count = count
        self.moved = 0
        self._stderr = bytearray()
        self._stop = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the client (its own session, so stop() can end it and anything it started)."""
        self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, bufsize=0, start_new_session=True)
        assert self.process.stdout is not None
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.process.stdout.fileno(), F_SETPIPE_SZ, PIPE_KERNEL_SIZE)
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

    def stop(self) -> None:
        """End the transfer now (the reading thread then sees the pipe's end): PipeBroken."""
        self._stop.set()
        self._kill()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, 9)

    def run(self, store: Callable[[list[Any]], None]) -> None:
        """Move `count` bytes into `store` (blocking; run it in a thread). Raises
        PipeUnavailable when not one byte came and the client failed, PipeBroken when the
        stream ended early, ShortRemote when the remote file ended before `count`."""
        assert self.process is not None and self.process.stdout is not None
        stdout = cast(io.RawIOBase, self.process.stdout)  # bufsize=0: a FileIO
        free: queue.Queue[memoryview] = queue.Queue()
        for _ in range(PIPE_BUFFERS):
            free.put(memoryview(bytearray(PIPE_BUFFER)))
        handoff: queue.Queue[tuple[memoryview, int] | None] = queue.Queue()
        failure: list[BaseException] = []

        def writer() -> None:
            try:
                while (item := handoff.get()) is not None:
                    view, size = item
                    if not failure:
                        store([view[:size]])
                        self.moved += size
                    free.put(view)
            except BaseException as exc:  # a full disk: reported by run(), the reader stops
                failure.append(exc)
                self.stop()
                while handoff.get() is not None:
                    pass

        thread = threading.Thread(target=writer)
        thread.start()
        got = 0
        try:
            while got < self.count and not self._stop.is_set():
                view = free.get()
                filled = 0
                want = min(PIPE_BUFFER, self.count - got)
                while filled < want and (size := stdout.readinto(view[filled:want])):
                    filled += size
                if filled:
                    handoff.put((view, filled))
                    got += filled
                if filled < want:
                    break
        finally:
            handoff.put(None)
            thread.join()
            if got >= self.count or failure:
                self._kill()  # a file that grew past the manifest's size is not read on
            try:
                # At the pipe's end the client is closing its channel: its own status says
                # whether the remote ended cleanly (a shorter file) or the link broke.
                status = self.process.wait(EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                self._kill()
                status = self.process.wait()
        if failure:
            raise failure[0]
        if got == self.count:
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
