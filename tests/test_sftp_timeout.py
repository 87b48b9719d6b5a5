"""An SFTP request the box never answers ends in TimeoutError (per request, not per pull),
and the pull reports that file and finishes: it no longer hangs `verify` forever.

The box is an in-process asyncssh server whose SFTP read handler never replies; the client
connects with strict host-key checking (a known_hosts entry for that server's key).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from cockpit.models.custody import CellListing, FileEntry, Manifest
from cockpit.services.custody.pull import pull
from cockpit.services.transport.remote import SFTP_REQUEST_TIMEOUT, SshBox, read_deadline

PROMPT = 0.5
"""The per-request deadline these tests give the box: small so they finish promptly (the
shipped SFTP_REQUEST_TIMEOUT is the same code path with a larger number)."""


class SilentReads(asyncssh.SFTPServer):
    """A real SFTP server over this machine's files whose reads are never answered (and,
    as asyncssh serves one request after another, neither is anything sent after one)."""

    async def read(self, file_obj: object, offset: int, size: int) -> bytes:  # type: ignore[override]
        await asyncio.Event().wait()  # a wedged server: the request stays pending for good
        raise AssertionError("unreachable")


@pytest.fixture
async def silent_box(tmp_path: Path) -> AsyncIterator[asyncssh.SSHClientConnection]:
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[host_key],
        authorized_client_keys=asyncssh.import_authorized_keys(
            client_key.export_public_key().decode()),
        sftp_factory=SilentReads)
    port = int(server.sockets[0].getsockname()[1])
    known = asyncssh.import_known_hosts(
        f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
    conn = await asyncssh.connect("127.0.0.1", port=port, username="cockpit",
                                  client_keys=[client_key], known_hosts=known)
    try:
        yield conn
    finally:
        conn.close()
        server.close()
        await server.wait_closed()


async def test_an_unanswered_sftp_read_times_out(silent_box: Any, tmp_path: Path) -> None:
    target = tmp_path / "best.pth"
    target.write_bytes(b"x" * 4096)
    box = SshBox(silent_box, sftp_timeout=PROMPT)
    remote_file = await box.open(str(target))  # the open is answered; the read is not

    async def read() -> None:
        with pytest.raises(TimeoutError, match="did not answer the SFTP read of"):
            await remote_file.read(4096, 0)

    # The outer bound only keeps a broken run from hanging the suite; the assertion is the
    # TimeoutError above, raised by the box's own deadline.
    await asyncio.wait_for(read(), 60)
    with pytest.raises(TimeoutError, match="did not answer the SFTP close of"):
        await asyncio.wait_for(remote_file.close(), 60)
    await box.close()


async def test_the_pull_reports_the_unanswered_file_and_finishes(silent_box: Any, tmp_path: Path) -> None:
    root = tmp_path / "durable"
    (root / "cellA").mkdir(parents=True)
    data = b"weights" * 100
    (root / "cellA" / "best.pth").write_bytes(data)
    entry = FileEntry("cellA", "best.pth", len(data), hashlib.sha256(data).hexdigest())
    manifest = Manifest("b1", str(root), (CellListing("cellA", True, (entry,)),))
    box = SshBox(silent_box, sftp_timeout=PROMPT)
    dest = tmp_path / "pulled"
    result = await asyncio.wait_for(pull(box, manifest, dest), 60)
    (outcome,) = result.outcomes
    assert not outcome.ok
    assert "TimeoutError" in outcome.detail and "did not answer the SFTP" in outcome.detail
    assert not (dest / "cellA" / "best.pth").exists()
    await box.close()


def test_the_deadline_grows_with_the_read_so_a_slow_link_is_not_cut() -> None:
    assert read_deadline(0) == SFTP_REQUEST_TIMEOUT
    assert read_deadline(8 << 20) > read_deadline(64 << 10) > SFTP_REQUEST_TIMEOUT
