"""The log reader against a real OpenSSH sshd: byte-range SFTP reads of a log on the box.

A 2 GB sparse log with real lines at its end opens by reading a page or two (the bytes read
are counted, not timed); following reads only what was appended; a search reads at most its
budget and says where it stopped; hostile bytes (ESC, NUL, invalid UTF-8, a 10 MB line) come
back exactly, cut only where the bounds say; a path full of shell syntax is only a name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport import ssh
from cockpit.services.transport.logread import (
    DETAIL_BYTES,
    MAX_LINE_BYTES,
    PAGE,
    ROW_BYTES,
    LogReader,
    open_log,
)
from cockpit.services.transport.remote import TRANSFER_ERRORS, SshBox
from tests.sshd import Sshd
from tests.test_status_sshd import write_sweep

pytestmark = pytest.mark.sshd

SPARSE = 2 << 30
TAIL_LINES = 3000


@pytest.fixture
async def box(tmp_path: Path, sshd: Sshd) -> AsyncIterator[SshBox]:
    """An SshBox over a real sshd (SFTP subsystem of OpenSSH), as the cockpit opens one."""
    root = tmp_path / "box"
    root.mkdir()
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    loaded = load_sweep(write_sweep(tmp_path, config, root))
    inst = loaded.sweep.instances[0]
    conn = await ssh.connect(ssh.build_target(inst, loaded.sweep.ssh, loaded.directory))
    remote = SshBox(conn, owns=True)
    try:
        yield remote
    finally:
        await remote.close()


def tail_line(i: int) -> bytes:
    return f"[2026-11-24 10:{i // 60 % 60:02d}:{i % 60:02d}] step {i} loss {1 / (i + 1):.5f}\n".encode()


def sparse_log(path: Path) -> bytes:
    """2 GB of hole (NUL bytes, no disk), then real lines; returns the real part."""
    tail = b"".join(tail_line(i) for i in range(TAIL_LINES))
    with path.open("wb") as handle:
        handle.truncate(SPARSE)
        handle.seek(SPARSE)
        handle.write(b"\n" + tail)
    return tail


async def texts(reader: LogReader, first: int, count: int) -> list[bytes]:
    return [line.data for line in await reader.lines(first, count)]


async def test_a_2gb_log_opens_reading_only_its_last_pages(box: SshBox, tmp_path: Path) -> None:
    path = tmp_path / "box" / "big.log"
    tail = sparse_log(path)
    reader = await open_log(box, str(path), lines=100)
    try:
        assert reader.end == SPARSE + 1 + len(tail)
        assert len(reader) >= 100
        # Two pages at most: the last (short) page and, for 100 lines, maybe the one before.
        assert reader.bytes_read <= 2 * PAGE, reader.bytes_read
        assert not reader.complete
        assert reader.number(0) is None  # line numbers are unknown above the index
        last = await texts(reader, len(reader) - 3, 3)
        assert last == [tail_line(i).rstrip(b"\n") for i in range(TAIL_LINES - 3, TAIL_LINES)]

        # Scrolling up reads the pages above, not the file.
        before = reader.bytes_read
        added = await reader.extend_up(500)
        assert added >= 500
        assert reader.bytes_read - before <= 3 * PAGE
        first = (await texts(reader, 0, 1))[0]
        assert first.startswith(b"[2026-11-24") and b"step" in first

        # Following: appended lines are indexed; only the appended bytes (and the stale
        # last page) are read.
        before = reader.bytes_read
        with path.open("ab") as handle:
            handle.write(b"appended one\nappended two\n")
        assert await reader.grow() == ""
        assert (await texts(reader, len(reader) - 2, 2)) == [b"appended one", b"appended two"]
        assert reader.bytes_read - before <= PAGE

        # A search near the end reads little; one for an absent text gives up at its budget
        # inside the hole and says where to go on.
        found = await reader.search("STEP 2500 ", len(reader), forward=False)
        assert found.line is not None
        assert b"step 2500 " in (await texts(reader, found.line, 1))[0]
        before = reader.bytes_read
        missing = await reader.search("never written", len(reader), forward=False,
                                      budget=4 << 20)
        assert missing.line is None and missing.gave_up and missing.resume is not None
        assert 4 << 20 <= missing.scanned <= (4 << 20) + 2 * PAGE
        assert reader.bytes_read - before <= (4 << 20) + 4 * PAGE
        # The hole is one 2 GB line of NULs: shown as MAX_LINE_BYTES fragments, each marked.
        top = await reader.line(0, ROW_BYTES)
        assert top.fragment and top.length <= MAX_LINE_BYTES + PAGE and set(top.data) == {0}
    finally:
        await reader.close()


async def test_truncation_reopens_at_the_new_end(box: SshBox, tmp_path: Path) -> None:
    path = tmp_path / "box" / "cell.log"
    path.write_bytes(b"".join(tail_line(i) for i in range(100)))
    reader = await open_log(box, str(path))
    try:
        assert reader.complete and len(reader) == 100
        generation = reader.generation
        path.write_bytes(b"fresh start\n")
        said = await reader.grow()
        assert "truncated" in said
        assert reader.generation != generation
        assert await texts(reader, 0, 5) == [b"fresh start"]
    finally:
        await reader.close()


HOSTILE_NAME = "cell $(touch PWNED) 'q' `id` 显存.log"


async def test_hostile_bytes_come_back_exactly_and_bounded(box: SshBox, tmp_path: Path) -> None:
    root = tmp_path / "box"
    path = root / HOSTILE_NAME
    lines = [b"plain", b"esc \x1b[2J\x1b]52;c;aGk=\x07 bell", b"nul \x00 here",
             b"bad utf8 \xff\xfe\xc3", b"cr\rprogress 50%\rprogress 100%",
             b"L" * (10 << 20), b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
             b"last"]
    path.write_bytes(b"\n".join(lines) + b"\n")
    reader = await open_log(box, str(path), lines=20)
    try:
        assert not any(root.rglob("PWNED")), "a path reached a shell"
        assert reader.complete
        # The 10 MB line is shown as fragments of MAX_LINE_BYTES below the first part.
        shown = await reader.lines(0, len(reader))
        assert [line.data for line in shown[:5]] == lines[:5]
        assert shown[-1].data == b"last" and shown[-2].data == lines[6]
        long_parts = shown[5:-2]
        assert sum(part.length for part in long_parts) == 10 << 20
        assert all(len(part.data) <= ROW_BYTES for part in long_parts)
        assert [part.fragment for part in long_parts][1:] == [True] * (len(long_parts) - 1)
        whole = await reader.whole(5)
        assert len(whole.data) == min(DETAIL_BYTES, long_parts[0].length)
        assert whole.cut == long_parts[0].length - len(whole.data)
        # The classifier finds the OOM line from the end and from the top.
        rulebook = load_rulebook(user=False)
        up = await reader.event(rulebook, len(reader), forward=False)
        down = await reader.event(rulebook, 0, forward=True)
        assert up.line == down.line == len(reader) - 2
        assert up.finding is not None and "CUDA out of memory" in up.finding.excerpt
    finally:
        await reader.close()


async def test_a_missing_log_is_an_error_not_a_hang(box: SshBox, tmp_path: Path) -> None:
    with pytest.raises(TRANSFER_ERRORS):
        await open_log(box, str(tmp_path / "box" / "no such.log"))
