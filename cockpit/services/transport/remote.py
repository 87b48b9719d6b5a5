"""Running one command and reading files on a box, over SSH or on this machine.

The custody code (manifest, pull) talks to these two small interfaces, so a `host: local`
instance and a rented box go through the same logic. Over SSH both use the connection the
cockpit already holds (or one opened for a headless command).

A box is untrusted: a command may print without end, and an SFTP request may never be
answered. Both are bounded here, once, so every caller gets the bounds for free: output
past a cap stops the command and says so (`CommandResult.truncated`), and every SFTP request
carries a deadline that ends in TimeoutError (one of `TRANSFER_ERRORS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import asyncssh

from cockpit.services.transport import sshpipe
from cockpit.services.transport.sshpipe import SshPipe

if TYPE_CHECKING:
    from cockpit.services.transport.ssh import Target

T = TypeVar("T")

STDOUT_CAP = 32 << 20
"""Bytes of stdout one command may print before it is stopped. The largest real output is a
pull manifest (~150 bytes a file, so ~200k files); a roster, a process table or an `squeue`
listing is far smaller. Without a cap, `cat` of an endless queue file grew the cockpit to
4.1 GB in 10 s."""
STDERR_CAP = 1 << 20
"""Bytes of stderr one command may print before it is stopped: callers show only its last
few hundred bytes, and a command that floods stderr is broken, not informative."""
READ_BLOCK = 256 << 10
"""Bytes asked for per read of a command's output: large enough to keep up with a fast
link, small enough that a cap is noticed within one block of being passed."""
STOPPED = -1
"""`CommandResult.status` of a command stopped by a signal: asyncssh reports a remote
signal death as -1, and a command the cockpit stops at an output cap is reported the same."""
LOCAL_STREAM_LIMIT = 32 << 20
"""`limit=` of a local subprocess's stdout reader (`host: local`): the longest line, or probe
record up to its end marker, that `readline`/`readuntil` accept. asyncio's default of 64 KiB
refused a master log with one 141 KB line, and `cockpit status` failed. 32 MiB is above any
record the probe sends (its log bytes are budgeted per tick) and still bounds a runaway line."""
SFTP_REQUEST_TIMEOUT = 30.0
"""Seconds an SFTP open, close, chmod or small read may go unanswered before it fails with
TimeoutError. A live sftp-server answers in milliseconds; one that never answers (a wedged
server, a hung mount under it) hung `verify` forever before this deadline."""
SFTP_MIN_RATE = 64 << 10
"""Bytes per second below which a large SFTP read counts as stalled: a read of n bytes gets
`SFTP_REQUEST_TIMEOUT + n / SFTP_MIN_RATE` seconds (an 8 MiB pull block: about 160 s), so a
slow but moving link is never cut while a silent one is. The pull resumes from its part file."""


@dataclass(frozen=True)
class CommandResult:
    """What one command gave back.

    `status` is the exit status: None when the connection dropped mid-command, STOPPED (-1)
    for a command killed by a signal. `truncated` names the stream ("stdout" or "stderr") that
    passed its cap; the command was then stopped, `status` is STOPPED, `stdout` is empty (a
    prefix of the output must never be mistaken for all of it) and `stderr` ends with a line
    saying what happened, so callers that report a failed command's stderr explain it.
    """

    status: int | None
    stdout: bytes
    stderr: bytes
    truncated: str = ""

    @property
    def complete(self) -> bool:
        """No cap stopped the command: every byte it printed is here."""
        return not self.truncated

    def require_complete(self) -> CommandResult:
        """This result, or OutputTooLarge when a cap stopped the command, for callers that
        parse the output and must not act on part of it."""
        if self.truncated:
            lines = self.stderr.decode(errors="replace").strip().splitlines()
            raise OutputTooLarge(lines[-1] if lines else f"{self.truncated} passed its cap")
        return self


class OutputTooLarge(Exception):
    """A command printed more than its cap and was stopped; its output is not usable."""


class OutputCapExceeded(Exception):
    """Internal: a stream of a command passed its cap (turned into a truncated result)."""

    def __init__(self, stream: str, cap: int) -> None:
        self.stream = stream
        self.cap = cap
        super().__init__(cap_message(stream, cap))


def cap_message(stream: str, cap: int) -> str:
    """The sentence a truncated result carries on its stderr."""
    return (f"cockpit stopped this command: it printed more than {cap} bytes ({cap >> 20} MiB) "
            f"on {stream}, the cap for one command; its output was discarded, not cut short")


STDERR_KEPT = 4096
"""Bytes of a stopped command's stderr kept in front of the note (callers show only a tail)."""


def _stopped(stream: str, cap: int, stderr: bytes) -> CommandResult:
    """The result of a command stopped at a cap: no stdout, stderr's tail plus the note."""
    err = b"" if stream == "stderr" else stderr[-STDERR_KEPT:]
    if err and not err.endswith(b"\n"):
        err += b"\n"
    return CommandResult(STOPPED, b"", err + cap_message(stream, cap).encode() + b"\n", stream)


async def _drain(stream: Any, name: str, cap: int, into: bytearray) -> None:
    """Read `stream` to its end into `into`; OutputCapExceeded once it holds more than `cap`.

    A read that fails because the link dropped ends the stream: what arrived is what there
    is, and the exit status (None) tells the caller the command did not finish.
    """
    while True:
        try:
            block: bytes = await stream.read(READ_BLOCK)
        except (asyncssh.Error, OSError, asyncio.IncompleteReadError):
            return
        if not block:
            return
        into += block
        if len(into) > cap:
            raise OutputCapExceeded(name, cap)


async def _collect(stdout: Any, stderr: Any, out: bytearray, err: bytearray) -> None:
    """Both streams of one command, read side by side under their caps into `out` and `err`.

    The first cap passed raises OutputCapExceeded; the other reader is then stopped too.
    """
    readers = [asyncio.ensure_future(_drain(stdout, "stdout", STDOUT_CAP, out)),
               asyncio.ensure_future(_drain(stderr, "stderr", STDERR_CAP, err))]
    try:
        await asyncio.gather(*readers)
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


class RemoteFile(Protocol):
    """An open remote file read at explicit offsets."""

    read_size: int
    """The most bytes one read should ask for (one SFTP request: the server's own limit)."""

    def deadline(self, size: int) -> float: ...

    async def read(self, size: int, offset: int) -> bytes: ...

    async def read_ahead(self, size: int, offset: int) -> bytes: ...

    async def close(self) -> None: ...


class Box(Protocol):
    """A box the custody code can run a command on and read files from."""

    async def run(self, argv: list[str], timeout: float) -> CommandResult: ...

    async def open(self, path: str) -> RemoteFile: ...

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    async def close(self) -> None: ...


async def _answered(call: Awaitable[T], seconds: float, what: str) -> T:
    """`call`, or TimeoutError naming `what` when the box has not answered in `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            return await call
    except TimeoutError:
        raise TimeoutError(f"the box did not answer the SFTP {what} within {seconds:.1f} s") from None


def read_deadline(size: int, base: float = SFTP_REQUEST_TIMEOUT) -> float:
    """Seconds a read of `size` bytes may take before it counts as unanswered."""
    return base + size / SFTP_MIN_RATE


class TimedFile:
    """An SFTP file whose every request has a deadline (SFTP_REQUEST_TIMEOUT).

    asyncssh waits for an SFTP reply forever; a box that never answers would hold the pull,
    and with it the whole verification, for good. Here each read and the close end in
    TimeoutError instead, which the pull reports for that file and resumes later.
    """

    def __init__(self, handle: Any, path: str, timeout: float) -> None:
        self.handle = handle
        self.path = path
        self.timeout = timeout
        # asyncssh's read_len: OpenSSH's max-read-length from its limits extension (else 16 KiB).
        self.read_size = int(getattr(handle, "read_len", 0)) or LOCAL_READ

    async def read(self, size: int, offset: int) -> bytes:
        """`size` bytes at `offset` (fewer at the end of the file)."""
        data: bytes = await _answered(self.handle.read(size, offset),
                                      read_deadline(size, self.timeout), f"read of {self.path}")
        return data

    async def read_ahead(self, size: int, offset: int) -> bytes:
        """`size` bytes at `offset` with no deadline of its own, for a reader that keeps many
        reads in flight and times the oldest one (the pull: a request queued behind 32 MiB
        on a slow link is late without anything being wrong)."""
        data: bytes = await self.handle.read(size, offset)
        return data

    def deadline(self, size: int) -> float:
        """Seconds the oldest read in flight may wait for `size` bytes before the box counts
        as not answering."""
        return read_deadline(size, self.timeout)

    async def close(self) -> None:
        """Close the remote handle (bounded too: a wedged server may not answer this either)."""
        await _answered(self.handle.close(), self.timeout, f"close of {self.path}")


LOCAL_READ = 1 << 20
"""Bytes one read asks for when the file gives no limit of its own (a local file)."""
SFTP_NEAR_WINDOW = 4 << 20
"""Receive window of the cockpit's SFTP channel on a near link (asyncssh's default is 2 MiB).
On loopback a 64 MiB window made the pull slower, not faster (1 GiB: 180-246 MB/s against
425-469 MB/s with 4 MiB, side by side): sshd ran far ahead and the bytes waited in buffers,
out of cache, on a machine whose cores the cockpit shares with sshd."""
SFTP_MAX_WINDOW = 64 << 20
"""The largest window asked for. Throughput over a link is at most one window per round
trip: asyncssh's 2 MiB capped a pull at 20 MB/s at 100 ms RTT (scp there: 17 MB/s). It is
credit, not a buffer: memory holds only bytes that arrived and were not yet read, and the
pull reads them as they come (and asks for at most its PULL_IN_FLIGHT)."""
SFTP_WINDOW_RATE = SFTP_MAX_WINDOW / 0.1
"""Bytes per second the window is sized for: window = round trip x this, between the two
bounds above (64 MiB from 100 ms up, 6.7 MB at 10 ms, the near window below 6.25 ms)."""
RTT_PINGS = 2
"""SFTP round trips timed to size the window (the shortest counts: a busy box only adds)."""


def window_for(rtt: float) -> int:
    """The SFTP receive window for a link whose round trip is `rtt` seconds."""
    return int(min(SFTP_MAX_WINDOW, max(SFTP_NEAR_WINDOW, rtt * SFTP_WINDOW_RATE)))


async def _start_sftp(conn: Any, window: int) -> Any:
    """asyncssh's `start_sftp_client`, on a channel with receive window `window`: the same two
    steps (open the `sftp` subsystem, start the client on its streams), which asyncssh's own
    call does with the connection's default window."""
    from asyncssh.sftp import MIN_SFTP_VERSION, start_sftp_client

    writer, reader, _ = await conn.open_session(subsystem="sftp", encoding=None, window=window)
    errors = getattr(conn, "_utf8_decode_errors", "strict")
    return await start_sftp_client(conn, asyncio.get_running_loop(), errors, reader, writer,
                                   "utf-8", "strict", MIN_SFTP_VERSION)


async def open_sftp(conn: Any) -> tuple[Any, float]:
    """An SFTP client whose channel window fits the link: opened with SFTP_NEAR_WINDOW, then
    RTT_PINGS round trips (`realpath .`) are timed, and on a far link the session is replaced
    by one with `window_for(rtt)` (a few round trips once per pull, against a window that
    would otherwise cap it). Returns the client and the round trip measured (seconds)."""
    sftp = await _start_sftp(conn, SFTP_NEAR_WINDOW)
    rtt = float("inf")
    for _ in range(RTT_PINGS):
        started = time.monotonic()
        await sftp.realpath(".")
        rtt = min(rtt, time.monotonic() - started)
    window = window_for(rtt)
    if window <= SFTP_NEAR_WINDOW:
        return sftp, rtt
    far = await _start_sftp(conn, window)
    sftp.exit()
    return far, rtt


class SshBox:
    """A box over an asyncssh connection: commands as exec requests, files over SFTP, and
    (given the connection's `target`) a large file over a fast link through the system ssh
    client (`open_stream`, `transport.sshpipe`)."""

    def __init__(self, conn: Any, *, owns: bool = False,
                 sftp_timeout: float = SFTP_REQUEST_TIMEOUT, target: Target | None = None) -> None:
        self.conn = conn
        self.owns = owns
        self.sftp_timeout = sftp_timeout
        self.target = target
        self.rtt: float | None = None
        """The round trip measured when SFTP started (seconds)."""
        self.pipes = target is not None
        """Whether `open_stream` may start a system ssh client (off after one failed)."""
        self.pipe_slots = asyncio.Semaphore(sshpipe.PIPE_PARALLEL)
        """Held by each system ssh client running for this box (`custody.pull`)."""
        self._sftp: Any = None
        self._lock = asyncio.Lock()
        self._workdir: tempfile.TemporaryDirectory[str] | None = None

    async def run(self, argv: list[str], timeout: float) -> CommandResult:
        """Run argv (quoted into one command line) and collect its output under the caps."""
        async with asyncio.timeout(timeout):
            process = await self.conn.create_process(shlex.join(argv), encoding=None)
            out, err = bytearray(), bytearray()
            try:
                process.stdin.write_eof()  # a command that reads stdin gets EOF, not a hang
                await _collect(process.stdout, process.stderr, out, err)
                await process.wait_closed()
            except OutputCapExceeded as exc:
                # Closing the channel makes sshd close the command's pipes: its next write
                # fails (SIGPIPE) and it ends; nothing more is read from it.
                return _stopped(exc.stream, exc.cap, bytes(err))
            finally:
                process.close()
        # A run in flight when the link drops ends with exit_status None (testbed.md).
        return CommandResult(process.exit_status, bytes(out), bytes(err))

    async def _client(self) -> Any:
        async with self._lock:
            if self._sftp is None:
                self._sftp, self.rtt = await _answered(open_sftp(self.conn), self.sftp_timeout,
                                                       "session start")
            return self._sftp

    def streams(self, count: int) -> bool:
        """Whether `count` bytes may come through the system ssh client, as far as known
        before the link is measured: a target reached directly, no failed client before,
        PIPE_MIN_BYTES. A box behind ProxyJump or ProxyCommand keeps to SFTP: OpenSSH starts
        the jump's own client without the strict options given on the command line."""
        target = self.target
        if not self.pipes or target is None or count < sshpipe.PIPE_MIN_BYTES:
            return False
        options = target.options
        return not (getattr(options, "tunnel", None) or getattr(options, "proxy_command", None))

    def open_stream(self, path: str, offset: int, count: int) -> SshPipe | None:
        """`count` bytes of `path` from `offset` on through the system ssh client (ready to
        start on the caller's part file), or None where SFTP is the better or the only way:
        no target, a failed client before, less than PIPE_MIN_BYTES, a round trip already
        measured over PIPE_MAX_RTT, no `ssh`, a path OpenSSH would not take literally. Where
        the round trip is not known yet, the caller starts the client and asks `near()`
        meanwhile: the two handshakes overlap."""
        target = self.target
        if target is None or not self.streams(count):
            return None
        binary = sshpipe.ssh_binary()
        if (self.rtt is not None and self.rtt > sshpipe.PIPE_MAX_RTT) or binary is None:
            return None
        if self._workdir is None:
            self._workdir = tempfile.TemporaryDirectory(prefix="cockpit-ssh-")
        user = getattr(target.options, "username", None)
        argv = sshpipe.pipe_argv(
            binary, sshpipe.config_include(list(target.config_files), Path(self._workdir.name)),
            target.alias, target.port, str(user) if user else None,
            [str(f) for f in target.known_hosts_files], list(target.identity_files),
            target.connect_timeout, sshpipe.stream_command(path, offset))
        if argv is None:
            return None
        return sshpipe.SshPipe(argv, count)

    async def near(self) -> bool:
        """Whether the link is fast enough for the system ssh client (PIPE_MAX_RTT): the round
        trip timed when SFTP starts (once per box)."""
        await self._client()
        return self.rtt is not None and self.rtt <= sshpipe.PIPE_MAX_RTT

    async def open(self, path: str) -> RemoteFile:
        """Open `path` for reading over SFTP (reads are pipelined by asyncssh, and timed)."""
        sftp = await self._client()
        handle = await _answered(sftp.open(path, "rb"), self.sftp_timeout, f"open of {path}")
        return TimedFile(handle, path, self.sftp_timeout)

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace `path` with `data` over SFTP (callers decide whether they may)."""
        sftp = await self._client()
        handle = await _answered(sftp.open(path, "wb"), self.sftp_timeout, f"open of {path}")
        try:
            await _answered(handle.write(data), read_deadline(len(data), self.sftp_timeout),
                            f"write of {path}")
        finally:
            await _answered(handle.close(), self.sftp_timeout, f"close of {path}")
        await _answered(sftp.chmod(path, mode), self.sftp_timeout, f"chmod of {path}")

    async def close(self) -> None:
        """Close the SFTP session, and the connection if this box opened it."""
        if self._sftp is not None:
            self._sftp.exit()
            self._sftp = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None
        if self.owns:
            self.conn.close()
            await self.conn.wait_closed()


class _LocalFile:
    def __init__(self, path: str) -> None:
        self.fd = os.open(os.path.expanduser(path), os.O_RDONLY)
        self.read_size = LOCAL_READ

    async def read(self, size: int, offset: int) -> bytes:
        return os.pread(self.fd, size, offset)

    async def read_ahead(self, size: int, offset: int) -> bytes:
        return os.pread(self.fd, size, offset)

    def deadline(self, size: int) -> float:
        return read_deadline(size)

    async def close(self) -> None:
        os.close(self.fd)


def _write_local(path: str, data: bytes, mode: int) -> None:
    target = os.path.expanduser(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(target, mode)


KILL_GRACE = 5.0
"""Seconds to wait for a killed local command's pipes to close and for it to be reaped.
SIGKILL of its process group closes them at once; a process that left the group (setsid)
and still holds a pipe is not waited for beyond this."""


async def _discard(stream: asyncio.StreamReader | None) -> None:
    while stream is not None and await stream.read(READ_BLOCK):
        pass


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's whole process group (a `sh -c` leaves children that would hold
    the pipe open), then reap it.

    The pipes are read to their end (and dropped) first: asyncio reports a process as exited
    only once its pipes have closed, and a pipe whose reader stopped at a cap is paused
    with data in it, so `wait()` alone would never return.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_GRACE):
            await asyncio.gather(_discard(proc.stdout), _discard(proc.stderr))
            await proc.wait()


class LocalBox:
    """This machine (`host: local`)."""

    async def run(self, argv: list[str], timeout: float) -> CommandResult:
        """Run argv as a subprocess (its own process group) and collect its output under the caps."""
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        out, err = bytearray(), bytearray()
        try:
            async with asyncio.timeout(timeout):
                await _collect(proc.stdout, proc.stderr, out, err)
                await proc.wait()
        except OutputCapExceeded as exc:
            await _kill_group(proc)
            return _stopped(exc.stream, exc.cap, bytes(err))
        except BaseException:  # the timeout, or the caller cancelled: never leave it running
            await _kill_group(proc)
            raise
        return CommandResult(proc.returncode, bytes(out), bytes(err))

    async def open(self, path: str) -> RemoteFile:
        """Open a local file."""
        return _LocalFile(path)

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace a local file."""
        _write_local(path, data, mode)

    async def close(self) -> None:
        """Nothing to close."""


TRANSFER_ERRORS = (OSError, asyncssh.Error, TimeoutError, asyncio.IncompleteReadError)
"""What a cut link, a killed sshd or an unanswered SFTP request (TimeoutError, after
SFTP_REQUEST_TIMEOUT) raises during a pull: the file is reported and resumes later."""
