"""Running one command and reading files on a box, over SSH or on this machine.

The custody code (manifest, pull) talks to these two small interfaces, so a `host: local`
instance and a rented box go through the same logic. Over SSH both use the connection the
cockpit already holds (or one opened for a headless command).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any, Protocol

import asyncssh


@dataclass(frozen=True)
class CommandResult:
    """Exit status (None when the connection dropped mid-command) and output bytes."""

    status: int | None
    stdout: bytes
    stderr: bytes


class RemoteFile(Protocol):
    """An open remote file read at explicit offsets."""

    async def read(self, size: int, offset: int) -> bytes: ...

    async def close(self) -> None: ...


class Box(Protocol):
    """A box the custody code can run a command on and read files from."""

    async def run(self, argv: list[str], timeout: float) -> CommandResult: ...

    async def open(self, path: str) -> RemoteFile: ...

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    async def close(self) -> None: ...


class SshBox:
    """A box over an asyncssh connection: commands as exec requests, files over SFTP."""

    def __init__(self, conn: Any, *, owns: bool = False) -> None:
        self.conn = conn
        self.owns = owns
        self._sftp: Any = None
        self._lock = asyncio.Lock()

    async def run(self, argv: list[str], timeout: float) -> CommandResult:
        """Run argv (quoted into one command line) and collect its output."""
        import shlex

        result = await asyncio.wait_for(
            self.conn.run(shlex.join(argv), encoding=None, check=False), timeout)
        # A run() in flight when the link drops returns exit_status None (testbed.md).
        return CommandResult(result.exit_status, result.stdout or b"", result.stderr or b"")

    async def _client(self) -> Any:
        async with self._lock:
            if self._sftp is None:
                self._sftp = await self.conn.start_sftp_client()
            return self._sftp

    async def open(self, path: str) -> RemoteFile:
        """Open `path` for reading over SFTP (reads are pipelined by asyncssh)."""
        sftp = await self._client()
        handle: RemoteFile = await sftp.open(path, "rb")
        return handle

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace `path` with `data` over SFTP (callers decide whether they may)."""
        sftp = await self._client()
        async with sftp.open(path, "wb") as handle:
            await handle.write(data)
        await sftp.chmod(path, mode)

    async def close(self) -> None:
        """Close the SFTP session, and the connection if this box opened it."""
        if self._sftp is not None:
            self._sftp.exit()
            self._sftp = None
        if self.owns:
            self.conn.close()
            await self.conn.wait_closed()


class _LocalFile:
    def __init__(self, path: str) -> None:
        self.fd = os.open(os.path.expanduser(path), os.O_RDONLY)

    async def read(self, size: int, offset: int) -> bytes:
        return os.pread(self.fd, size, offset)

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


class LocalBox:
    """This machine (`host: local`)."""

    async def run(self, argv: list[str], timeout: float) -> CommandResult:
        """Run argv as a subprocess."""
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        return CommandResult(proc.returncode, out, err)

    async def open(self, path: str) -> RemoteFile:
        """Open a local file."""
        return _LocalFile(path)

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace a local file."""
        _write_local(path, data, mode)

    async def close(self) -> None:
        """Nothing to close."""


TRANSFER_ERRORS = (OSError, asyncssh.Error, TimeoutError, asyncio.IncompleteReadError)
"""What a cut link or a killed sshd raises during a pull: the transfer resumes later."""
