"""The remote manifest and the resumable, verified pull.

- **Manifest**: one remote command per instance (`manifest.sh`) hashes every file under each
  expected cell folder with `openssl dgst -sha256` (SHA extensions) or `sha256sum`.
- **Pull**: each file streams over SFTP into `.NAME.cockpit-part` next to its final name,
  hashed as it arrives; a cut transfer continues from the bytes already on disk (they are
  re-hashed first). Only when size and SHA-256 match the manifest is the file fsynced and
  renamed; so a file under its final name always has the manifest's content. PARALLEL_FILES
  files move at once, each keeping SFTP reads in flight ahead of the one it stores (a
  PULL_IN_FLIGHT budget shared by the files) over a channel whose window follows the round
  trip (`transport.remote.open_sftp`): on a far link the bytes in flight, not the bandwidth,
  set the rate. A large file over a fast link comes through the system ssh client instead
  (`transport.sshpipe`), which writes the part itself while the cockpit hashes it behind the
  client (`_follow`); the same checks decide the rename.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ctypes
import hashlib
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, cast

from cockpit.models.custody import (
    RUNBOOK_MANIFEST,
    CellListing,
    FileEntry,
    Manifest,
    cell_evidence,
    plain_path,
)
from cockpit.services.transport import sshpipe
from cockpit.services.transport.remote import Box, RemoteFile, SshBox
from cockpit.services.transport.sshpipe import PipeBroken, PipeUnavailable, ShortRemote

PART_SUFFIX = ".cockpit-part"
CHUNK = 8 << 20
"""Bytes read at once when a local file is hashed."""
READ_SIZE = 256 << 10
"""Bytes asked per SFTP read request (at most: the server's own limit, from OpenSSH's limits
extension, when smaller). OpenSSH's sftp-server answers up to 256 KiB; asyncssh's 16 KiB-64 KiB
requests cost eight times the per-request work in Python for the same bytes."""
PULL_IN_FLIGHT = 32 << 20
"""Bytes asked and not yet stored, for one pull (all its files together, shared in READ_SIZE
slots). Throughput over a link is at most in-flight bytes per round trip: 32 MiB is 320 MB/s
at 100 ms RTT whether one large file or many small ones are moving, and it bounds the memory
the read-ahead holds (plus one STORE_BATCH per file being stored)."""
STORE_BATCH = 4 << 20
"""Bytes handed to the hashing-and-writing thread at once (one thread hop per batch, not per
request)."""
WRITEBACK_EVERY = 32 << 20
"""Bytes appended to a part file between two starts of the kernel's writeback
(`sync_file_range(SYNC_FILE_RANGE_WRITE)`, Linux; 0 turns it off). Without it a 1 GiB file
sat in the page cache as dirty pages until the fsync before its rename, which then waited for
all of it; the writer was throttled meanwhile. Measured side by side (`bench.pull_designs`)."""
SYNC_FILE_RANGE_WRITE = 2
"""`SYNC_FILE_RANGE_WRITE` from <fcntl.h>: start writeback of the range's dirty pages, don't wait."""
FOLLOW_BUFFER = 8 << 20
"""Bytes of a part being written by the ssh client read back and hashed at once (one reused
buffer)."""
FOLLOW_NAP_S = 0.002
"""Seconds the follower sleeps once it has caught up with the ssh client: short against the
~10 ms the client takes to write FOLLOW_BUFFER at loopback speed, long enough not to spin."""
PIPE_POLL_S = 0.2
"""Seconds between two looks at a system-ssh transfer's progress (for the UI and the stall
watch); the bytes themselves never wait for it."""
SETTLE_S = 2.0
"""Seconds a failed file's reads still in flight may take to end before they are cancelled."""
PARALLEL_FILES = 8
"""Files pulled at once. A file costs a few round trips besides its bytes (open, the first
read, close, each one RTT): over a far link many small files move only if several overlap."""
MANIFEST_TIMEOUT = 3600.0
MAX_SIZE_DIGITS = 20
"""A file size fits in 64 bits (20 digits); more is a garbled line, not a size to trust."""


class ManifestError(Exception):
    """The remote manifest could not be computed or read."""


@cache
def manifest_script() -> str:
    """The POSIX sh source that computes a manifest on the box."""
    return (Path(__file__).with_name("manifest.sh")).read_text(encoding="utf-8")


def manifest_argv(root: str, queue_log: str | None, cells: Sequence[str]) -> list[str]:
    """The argv that runs the manifest script (every value one argument, never parsed)."""
    return ["/bin/sh", "-c", manifest_script(), "cockpit-manifest", root, queue_log or "", *cells]


def _b64(text: str) -> str:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", errors="surrogateescape")
    except (binascii.Error, ValueError) as exc:
        raise ManifestError(f"garbled manifest line: {text[:60]!r}") from exc


def _safe_rel(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return bool(parts) and not rel.startswith("/") and ".." not in parts and "\x00" not in rel


@dataclass(frozen=True)
class RemoteState:
    """A manifest (with each cell's queue-log evidence) read in one command."""

    manifest: Manifest
    hasher: str
    mark_lines: tuple[str, ...]
    """The queue log's STARTING/FINISHED lines, oldest first."""

    @property
    def finished_lines(self) -> tuple[str, ...]:
        """The FINISHED marks alone."""
        return tuple(line for line in self.mark_lines if "FINISHED" in line)


def parse_manifest(instance: str, root: str, output: bytes) -> RemoteState:
    """Read manifest.sh output; anything malformed is an error, never a silent skip."""
    text = output.decode("ascii", errors="replace")
    lines = text.split("\n")
    hasher = ""
    cells: list[CellListing] = []
    current: tuple[str, bool, list[FileEntry], list[str]] | None = None
    extras: list[str] = []
    marks: list[str] = []
    marks_state = "none"
    runbook: FileEntry | None = None
    section = ""
    ended = False

    def close_cell() -> None:
        if current is not None:
            cells.append(CellListing(current[0], current[1], tuple(current[2]), tuple(current[3])))

    for line in lines:
        if line.startswith("@@"):
            head, _, arg = line[2:].partition(" ")
            section = head
            if head == "error":
                raise ManifestError(arg)
            if head == "hasher":
                hasher = arg
            elif head == "cell":
                close_cell()
                enc, _, state = arg.partition(" ")
                current = (_b64(enc), state == "exists", [], [])
            elif head in ("extra", "marks", "runbook", "end"):
                close_cell()
                current = None
                if head == "extra":
                    extras.append(_b64(arg))
                elif head == "marks":
                    marks_state = arg or "found"
                elif head == "runbook":
                    size, _, sha = arg.partition(" ")
                    if not size.isdigit() or len(size) > 20 or len(sha) != 64:
                        raise ManifestError(f"garbled runbook manifest line: {line[:80]!r}")
                    runbook = FileEntry("", RUNBOOK_MANIFEST, int(size), sha.lower())
                ended = head == "end"
            continue
        if not line:
            continue
        if section == "marks":
            marks.append(line)
        elif current is not None and line.startswith("F "):
            parts = line.split(" ")
            if (len(parts) != 4 or not parts[1].isdigit() or len(parts[1]) > MAX_SIZE_DIGITS
                    or len(parts[2]) != 64):
                raise ManifestError(f"garbled file line: {line[:80]!r}")
            rel = _b64(parts[3])
            if not _safe_rel(rel):
                raise ManifestError(f"unsafe path in manifest: {rel!r}")
            if plain_path(rel):
                current[2].append(FileEntry(current[0], rel, int(parts[1]), parts[2].lower()))
            else:  # never created locally: reported, and the cell cannot be OK
                current[3].append(rel)
        elif current is not None and line.startswith("R "):
            current[3].append(_b64(line[2:]))
        else:
            raise ManifestError(f"unexpected manifest line: {line[:80]!r}")
    if not ended:
        raise ManifestError("the manifest output was cut short (no @@end)")
    joined = "".join(marks)
    try:
        lines_read = tuple(base64.b64decode(joined, validate=True).decode("utf-8", errors="replace")
                           .splitlines()) if joined else ()
    except (binascii.Error, ValueError) as exc:
        raise ManifestError("garbled queue-log marks in the manifest output") from exc
    names = [c.cell for c in cells]
    evidence = cell_evidence(names, None if marks_state == "none" else lines_read,
                             log_found=marks_state != "missing")
    manifest = Manifest(instance, root, tuple(cells), tuple(extras),
                        tuple(evidence.items()), runbook)
    return RemoteState(manifest, hasher, lines_read)


async def remote_manifest(box: Box, instance: str, root: str, queue_log: str | None,
                          cells: Sequence[str]) -> RemoteState:
    """Compute the manifest on the box in one command."""
    result = await box.run(manifest_argv(root, queue_log, cells), MANIFEST_TIMEOUT)
    if result.status is None:
        raise ManifestError("the connection dropped while the manifest was computed")
    if result.status != 0:
        detail = (result.stderr or result.stdout).decode(errors="replace").strip()[-300:]
        raise ManifestError(f"manifest command exited {result.status}: {detail}")
    return parse_manifest(instance, root, result.stdout)


# -- the pull -----------------------------------------------------------------------------
@dataclass
class PullProgress:
    """Bytes, rate and ETA of one instance's pull, for the UI."""

    total: int
    done: int = 0
    moved: int = 0
    """Bytes actually transferred in this run (a resumed or skipped file moves less)."""
    started: float = field(default_factory=time.monotonic)
    files_done: int = 0
    files_total: int = 0

    @property
    def rate(self) -> float:
        """Bytes per second moved in this run."""
        return self.moved / max(time.monotonic() - self.started, 1e-6)

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the current rate."""
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one file."""

    entry: FileEntry
    ok: bool
    detail: str = ""
    moved: int = 0


class PullMismatch(Exception):
    """A fully transferred file does not match the manifest (the remote changed)."""


def local_path(dest: Path, entry: FileEntry) -> Path:
    """Where a manifest entry lands: `dest/<cell>/<relpath>` (`dest/<name>` for the runbook's
    manifest at the durable root)."""
    return dest / entry.cell / Path(*PurePosixPath(entry.path).parts)


class LocalLinkError(OSError):
    """A symlink (or other non-folder) sits where the pull would write: never followed."""


def refuse_links(dest: Path, final: Path) -> None:
    """Refuse to write `final` through a symlink planted anywhere from `dest` down to it (or
    in place of the part file): the pull only ever creates plain folders and files, so a
    link there was put by someone else and would send the box's bytes elsewhere."""
    folder = dest
    for part in ("", *final.relative_to(dest).parts[:-1]):
        folder = folder / part if part else folder
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise LocalLinkError(f"{folder} is a symlink or not a folder: the pull never "
                                 f"follows one (remove it to pull here)")
    for leaf in (final, part_path(final)):
        if leaf.is_symlink():
            raise LocalLinkError(f"{leaf} is a symlink: the pull never follows one")


def part_path(final: Path) -> Path:
    """The temporary name a file is written under until it is proven."""
    return final.with_name(f".{final.name}{PART_SUFFIX}")


def sha256_file(path: Path, limit: int | None = None) -> tuple[str, int]:
    """SHA-256 and length of a local file (or of its first `limit` bytes)."""
    digest = hashlib.sha256()
    seen = 0
    with path.open("rb") as handle:
        while limit is None or seen < limit:
            want = CHUNK if limit is None else min(CHUNK, limit - seen)
            block = handle.read(want)
            if not block:
                break
            digest.update(block)
            seen += len(block)
    return digest.hexdigest(), seen


@cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's `sync_file_range` from libc (None elsewhere, or where libc lacks it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    function.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], function)


class _Sink:
    """A part file being appended to: its hash in order, and the kernel's writeback started
    every WRITEBACK_EVERY bytes so the final fsync has little left to wait for."""

    def __init__(self, out: Any, digest: Any, offset: int) -> None:
        self.out = out
        self.digest = digest
        self.written = self.started = offset
        self.writeback = _sync_file_range() if WRITEBACK_EVERY else None

    def store(self, blocks: list[bytes]) -> None:
        """Write and hash `blocks` in order (run in a thread: both release the GIL)."""
        for block in blocks:
            self.out.write(block)
            self.digest.update(block)
            self.written += len(block)
        if self.writeback is not None and self.written - self.started >= WRITEBACK_EVERY:
            self.out.flush()
            # Only a hint to start writing: durability still comes from the fsync before the
            # rename, so a filesystem that refuses it (an error return) changes nothing.
            self.writeback(self.out.fileno(), self.started, self.written - self.started,
                           SYNC_FILE_RANGE_WRITE)
            self.started = self.written


async def _transfer(source: RemoteFile, sink: _Sink, offset: int, entry: FileEntry,
                    progress: PullProgress | None,
                    on_progress: Callable[[PullProgress], None] | None,
                    budget: asyncio.Semaphore) -> int:
    """Append the file's bytes from `offset` to its end to `sink`, hashed in order; the bytes moved.

    Reads of `source.read_size` (one SFTP request each) are asked ahead of the one being stored,
    each holding a slot of `budget` (the pull's PULL_IN_FLIGHT, shared by its files) until it
    has arrived, so the link never idles waiting for a round trip (over a far link throughput
    is the bytes in flight per round trip, whatever its bandwidth). A file asks for more only
    while slots are free and no other file waits for one. Blocks are taken strictly in file
    order (the part file is only ever appended to, and the hash taken in order), and stored in
    batches of STORE_BATCH in a thread while the next ones arrive: hashlib and file writes
    release the GIL, so decryption and hashing use two cores.
    """
    size = entry.size
    step = max(1, min(getattr(source, "read_size", READ_SIZE), READ_SIZE))
    ahead: deque[tuple[int, int, asyncio.Future[bytes]]] = deque()
    asked = offset
    moved = 0
    batch: list[bytes] = []
    batched = 0
    pending: asyncio.Future[None] | None = None
    try:
        while ahead or asked < size:
            while asked < size and not (ahead and budget.locked()):
                await budget.acquire()  # waits only when nothing of this file is in flight
                want = min(step, size - asked)
                ahead.append((asked, want, asyncio.ensure_future(source.read_ahead(want, asked))))
                asked += want
            at, want, reply = ahead.popleft()
            try:
                # The oldest read is timed from when it is waited for: replies come in order,
                # so a wait this long means the box sent nothing at SFTP_MIN_RATE meanwhile.
                seconds = source.deadline(want)
                async with asyncio.timeout(seconds):
                    block = await reply
            except TimeoutError:
                raise TimeoutError(f"the box did not answer the SFTP read of {entry.cell}/"
                                   f"{entry.path} within {seconds:.1f} s") from None
            finally:
                budget.release()
            while len(block) < want:  # a short answer before the end: ask for the rest
                more = await source.read(want - len(block), at + len(block))
                if not more:
                    raise PullMismatch(f"{entry.cell}/{entry.path}: the remote file is shorter "
                                       f"than the manifest says ({at + len(block)} < {size})")
                block += more
            batch.append(block)
            batched += len(block)
            moved += len(block)
            if progress is not None:
                progress.done += len(block)
                progress.moved += len(block)
                if on_progress is not None:
                    on_progress(progress)
            if batched >= STORE_BATCH or not ahead:
                if pending is not None:
                    await pending
                pending = asyncio.ensure_future(asyncio.to_thread(sink.store, batch))
                batch, batched = [], 0
    finally:
        waiting = [reply for *_, reply in ahead]
        if waiting:
            # When the link is gone or the file ended early the replies settle at once; one
            # cancelled in flight would orphan asyncssh's own request task, whose error then
            # lands on stderr as "Task exception was never retrieved". A silent box gets
            # SETTLE_S, then they are cancelled.
            _, left = await asyncio.wait(waiting, timeout=SETTLE_S)
            for reply in left:
                reply.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
        for _ in waiting:
            budget.release()
        if pending is not None:
            await pending  # never leave a write running behind a closed file
    # Nothing past the manifest's size is read: a remote file that grew fails the hash.
    return moved


def _follow(pipe: sshpipe.SshPipe, part: Path, offset: int, digest: Any) -> int:
    """Hash `part` from `offset` on as the ssh client appends to it, up to `offset +
    pipe.count` and never further, then judge the client (`SshPipe.finish`); the bytes taken
    in. Blocking, run in a thread: plain file I/O, never asyncssh. The bytes are read back
    from the page cache into one reused buffer (hashlib releases the GIL), and the kernel's
    writeback is started every WRITEBACK_EVERY bytes as for an SFTP pull."""
    end = offset + pipe.count
    buffer = memoryview(bytearray(max(1, min(FOLLOW_BUFFER, pipe.count))))
    writeback = _sync_file_range() if WRITEBACK_EVERY else None
    fd = os.open(part, os.O_RDONLY)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        pos = started = offset
        exited = False
        while pos < end:
            got = os.readv(fd, [buffer[:min(len(buffer), end - pos)]])
            if got:
                digest.update(buffer[:got])
                pos += got
                pipe.moved = pos - offset
                if writeback is not None and pos - started >= WRITEBACK_EVERY:
                    writeback(fd, started, pos - started, SYNC_FILE_RANGE_WRITE)
                    started = pos
                continue
            if exited or pipe.stopped:
                break
            # Caught up: one more look once the client has ended (its last write may have
            # landed after the read above), else a short nap.
            exited = pipe.poll() is not None
            if not exited:
                time.sleep(FOLLOW_NAP_S)
    finally:
        os.close(fd)
    pipe.finish(pos - offset)
    return pos - offset


def _seal(part: Path, size: int) -> None:
    """Cut the part at the file's expected end (where the platform could not cap the client)
    and fsync it."""
    fd = os.open(part, os.O_WRONLY)
    try:
        if os.fstat(fd).st_size > size:
            os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


async def _pipe_file(box: Box, remote: str, part: Path, digest: Any, offset: int,
                     entry: FileEntry, progress: PullProgress | None,
                     on_progress: Callable[[PullProgress], None] | None) -> int | None:
    """Append the rest of the file to `part` through the system ssh client where the box
    offers it (`SshBox.open_stream`: a large file over a fast link): the client writes the
    part itself, the cockpit hashes it behind the client (`_follow`); fsynced. The bytes
    moved, or None to use SFTP (not offered, or the client failed before its first byte:
    then it is not tried again on this box)."""
    if not isinstance(box, SshBox) or not box.streams(entry.size - offset):
        return None
    async with box.pipe_slots:
        return await _pipe_one(box, remote, part, digest, offset, entry, progress, on_progress)


async def _pipe_one(box: SshBox, remote: str, part: Path, digest: Any, offset: int,
                    entry: FileEntry, progress: PullProgress | None,
                    on_progress: Callable[[PullProgress], None] | None) -> int | None:
    """`_pipe_file` once a client slot of the box is held: start the client on the part,
    time the link meanwhile, follow and judge it, report progress and stalls."""
    pipe = box.open_stream(remote, offset, entry.size - offset)
    if pipe is None:
        return None
    counted = 0

    def count() -> None:
        nonlocal counted
        step, counted = pipe.moved - counted, pipe.moved
        if progress is not None and step:
            progress.done += step
            progress.moved += step
            if on_progress is not None:
                on_progress(progress)

    with part.open("ab") as out:
        # The client's stdout is the part, opened for append; the cockpit's own copy of that
        # descriptor closes here, so only the client writes it.
        pipe.start(out.fileno(), entry.size)
    # The round trip is timed (once per box) while the client does its handshake: both take
    # a few round trips, so neither waits for the other. On a far link the client is ended
    # and whatever it wrote is cut off again: the file comes over SFTP.
    near = False
    try:
        near = await box.near()
    finally:
        if not near:  # far, or the timing failed or was cancelled: the client must not stay
            pipe.stop()
            await asyncio.to_thread(pipe.wait)
            await asyncio.to_thread(os.truncate, part, offset)
    if not near:
        return None
    task = asyncio.ensure_future(asyncio.to_thread(_follow, pipe, part, offset, digest))
    try:
        try:
            quiet_since = time.monotonic()
            while not task.done():
                await asyncio.wait({task}, timeout=PIPE_POLL_S)
                before = counted
                count()
                if counted != before:
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > sshpipe.STALL_S:
                    pipe.stop()  # the follower then ends and finish() raises PipeBroken
            await task
        finally:
            pipe.stop()
            # Never leave the follower running behind this call (the client is dead, so it
            # ends at once); a cancellation, if any, goes on after. Its error was either
            # raised above or is moot (cancelled): taken here, never logged as unretrieved.
            await asyncio.shield(asyncio.wait({task}))
            if not task.cancelled():
                task.exception()
            count()
    except PipeUnavailable:
        box.pipes = False  # refused key, no cipher, no ssh: SFTP from now on
        await asyncio.to_thread(os.truncate, part, offset)  # whatever it wrote, unhashed
        return None
    except ShortRemote as exc:
        raise PullMismatch(f"{entry.cell}/{entry.path}: the remote file is shorter than the "
                           f"manifest says ({offset + exc.got} < {entry.size})") from None
    except PipeBroken as exc:
        raise ConnectionError(f"the ssh stream of {entry.cell}/{entry.path} broke: {exc}") from None
    await asyncio.to_thread(_seal, part, entry.size)
    return counted


def _hash_prefix(part: Path, length: int) -> Any:
    digest = hashlib.sha256()
    if length:
        with part.open("rb") as handle:
            while block := handle.read(CHUNK):
                digest.update(block)
    return digest


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def pull_file(box: Box, root: str, dest: Path, entry: FileEntry,
                    progress: PullProgress | None = None,
                    on_progress: Callable[[PullProgress], None] | None = None,
                    budget: asyncio.Semaphore | None = None) -> FileOutcome:
    """Bring one file to `dest` under its final name, or leave a resumable part behind.
    `budget`: the read-ahead slots shared with the other files of the pull (its own when
    None)."""
    final = local_path(dest, entry)
    refuse_links(dest, final)
    final.parent.mkdir(parents=True, exist_ok=True)
    refuse_links(dest, final)
    # Hashing a large local file takes a while: off the event loop (plain file I/O, so a
    # thread is safe here; asyncssh is never touched from it).
    if final.is_file() and final.stat().st_size == entry.size and (
            await asyncio.to_thread(sha256_file, final))[0] == entry.sha256:
        if progress is not None:
            progress.done += entry.size
        return FileOutcome(entry, True, "already here")
    if final.exists():
        final.unlink()  # pulled from an older state of the remote: never keep it under this name
    part = part_path(final)
    offset = part.stat().st_size if part.is_file() else 0
    if offset > entry.size:
        part.unlink()
        offset = 0
    # Resume: the bytes already here are re-hashed, not trusted.
    digest = await asyncio.to_thread(_hash_prefix, part, offset)
    if progress is not None:
        progress.done += offset
    remote = "/".join(part for part in (root.rstrip("/"), entry.cell, entry.path) if part)
    moved = await _pipe_file(box, remote, part, digest, offset, entry, progress, on_progress)
    if moved is None:
        source = await box.open(remote)
        try:
            with part.open("ab") as out:
                moved = await _transfer(source, _Sink(out, digest, offset), offset, entry,
                                        progress, on_progress,
                                        budget or asyncio.Semaphore(PULL_IN_FLIGHT // READ_SIZE))
                out.flush()
                os.fsync(out.fileno())
        finally:
            await source.close()
    if digest.hexdigest() != entry.sha256:
        part.unlink()
        raise PullMismatch(f"{entry.cell}/{entry.path}: SHA-256 differs from the manifest "
                           f"(the remote changed, or the bytes are corrupt); pull again")
    os.replace(part, final)
    _fsync_dir(final.parent)
    return FileOutcome(entry, True, "pulled", moved)


@dataclass(frozen=True)
class PullResult:
    """Every file's outcome."""

    outcomes: tuple[FileOutcome, ...]
    bytes_moved: int

    @property
    def ok(self) -> bool:
        """All files under their final names with the manifest's content."""
        return all(o.ok for o in self.outcomes)

    @property
    def failures(self) -> tuple[FileOutcome, ...]:
        """Files that did not make it."""
        return tuple(o for o in self.outcomes if not o.ok)


async def pull(box: Box, manifest: Manifest, dest: Path, cells: Sequence[str] | None = None,
               *, parallel: int = PARALLEL_FILES, extra: Sequence[FileEntry] = (),
               on_progress: Callable[[PullProgress], None] | None = None) -> PullResult:
    """Pull the listed cells' files (all by default) into `dest/<cell>/...`.

    `extra`: more entries to bring (the runbook's PULL_MANIFEST.json at the durable root).
    `on_progress` is called after every block and every file (the UI throttles it).
    A transfer error is reported per file and leaves its part for the next attempt; nothing
    raises past here except cancellation.
    """
    wanted = [*extra, *(f for f in manifest.files if cells is None or f.cell in cells)]
    progress = PullProgress(sum(f.size for f in wanted), files_total=len(wanted))
    slots = asyncio.Semaphore(parallel)
    budget = asyncio.Semaphore(max(1, PULL_IN_FLIGHT // READ_SIZE))
    from cockpit.services.transport.remote import TRANSFER_ERRORS

    async def one(entry: FileEntry) -> FileOutcome:
        async with slots:
            try:
                outcome = await pull_file(box, manifest.root, dest, entry, progress, on_progress,
                                          budget)
            except (PullMismatch, LocalLinkError) as exc:
                outcome = FileOutcome(entry, False, str(exc))
            except TRANSFER_ERRORS as exc:
                outcome = FileOutcome(entry, False, f"transfer interrupted ({type(exc).__name__}: "
                                      f"{exc}); pull again to resume")
            progress.files_done += 1
            if on_progress is not None:
                on_progress(progress)
            return outcome

    outcomes = await asyncio.gather(*(one(f) for f in wanted))
    return PullResult(tuple(outcomes), progress.moved)
