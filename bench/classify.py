"""Benchmark: the failure classifier on a 1 GB log, and the per-tick cost of a growing 10 GB log.

1. Throughput. A synthetic training log (default 1024 MiB: epoch/step lines, tqdm bars with
   `\\r` segments, timestamped eval lines, UserWarnings, checkpoint lines) with sparse real
   failures spliced in (about one per 100k lines: a CUDA OOM traceback, a bare `Killed`, an
   ENOSPC traceback, an NCCL watchdog timeout, `loss=nan`). The cockpit side is what
   `cockpit classify FILE` runs (`classify_paths`: 16 MiB blocks through `LogClassifier`,
   findings collapsed into events). The baseline is one `LC_ALL=C grep -E -c` with the same
   alternation (the rulebook's line-scope patterns plus the traceback header, converted from
   RE2 to POSIX ERE), with `grep -F -c 'CUDA out of memory'` as the floor of one pass over the
   file. The same alternation with Python's `re` (and with RE2, same loop) on a 64 MiB slice
   shows why RE2 was chosen. grep's line count is checked against RE2 run line by line.
2. Per tick. 1 MiB (with one OOM traceback) appended to a sparse 10 GiB log and to a real
   10 MiB log; the real `probe.sh` runs locally and is asked for the new bytes tick by tick
   (256 KiB a tick), like the cockpit does, starting from the cursor before the new MiB. Per
   tick: the probe round trip, `parse_record`, and `LogClassifier.feed` + `flush`. The cost
   must not depend on the file's size (ratio ~1.0): only the new bytes are read.

Run: .venv/bin/python -m bench.classify [--size-mb 1024] [--repeat 2] [--rounds 20] [--keep]
Prints best-of / median times and ratios measured side by side in the same run (MB = 10^6
bytes). Never part of the tests.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.models.classify import Finding, LogClassifier
from cockpit.models.parse import parse_record
from cockpit.models.rules import TRACEBACK, Rulebook
from cockpit.services.alerts.classify import classify_paths
from cockpit.services.config.rulebook import load_rulebook
from tests.test_probe_script import Probe

MIB = 1 << 20
MB = 1e6
BLOCK_LINES = 100_000
"""Lines of ordinary output between two spliced failures."""
SLICE = 64 * MIB
"""The slice of the log that Python's `re` scans (it is too slow for the whole file)."""
TAIL = MIB
"""Bytes appended to the big and the small log for the per-tick measurement."""
TEN_GIB = 10 << 30
SMALL = 10 * MIB
FLOOR_LITERAL = "CUDA out of memory"

# --------------------------------------------------------------------------- the log

OOM = """\
Traceback (most recent call last):
  File "/workspace/train.py", line 212, in <module>
    main()
  File "/workspace/train.py", line 188, in main
    loss = train_step(model, batch)
  File "/workspace/train.py", line 57, in train_step
    out = model(images)
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1518, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1527, in _call_impl
    return forward_call(*args, **kwargs)
  File "/workspace/models/unet.py", line 88, in forward
    x = self.up3(x, skip3)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity \
of 79.15 GiB of which 1.12 GiB is free. Process 4123 has 78.02 GiB memory in use. Of the allocated \
memory 74.31 GiB is allocated by PyTorch, and 2.88 GiB is reserved by PyTorch but unallocated. If \
reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
to avoid fragmentation.  See documentation for Memory Management  \
(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""
ENOSPC = """\
Traceback (most recent call last):
  File "/workspace/train.py", line 203, in main
    save_checkpoint(model, optimizer, ckpt_dir / "latest.pth")
  File "/workspace/utils/ckpt.py", line 41, in save_checkpoint
    with open(tmp, "wb") as f:
OSError: [Errno 28] No space left on device: '/data/runs/exp12/ckpt/latest.pth.tmp'
"""
NCCL = (
    "[rank3]:[E1120 03:12:44.123456 1234 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=123456, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.\n"
)
FAILURES: tuple[tuple[str, bytes], ...] = (
    # (the event key the cockpit must report, the text spliced into the log)
    ("M2", OOM.encode()),
    ("U9", b"Killed\n"),
    ("U7", ENOSPC.encode()),
    ("MN3", NCCL.encode()),
    ("O13", b"Epoch 7/50 | step 2140/5000 | loss=nan lr=2.50e-04 grad_norm=nan | 11.9 it/s\n"),
)


def _stamp(seconds: int, ms: int) -> str:
    h, rest = divmod(seconds, 3600)
    return f"2026-11-20 {h % 24:02d}:{rest // 60:02d}:{rest % 60:02d},{ms:03d}"


def _tqdm(rng: random.Random, total: int) -> str:
    """One tqdm bar line: several `\\r`-separated states of the same line."""
    done = rng.randrange(total // 2)
    states = []
    for _ in range(rng.randint(4, 8)):
        done = min(total, done + rng.randint(1, total // 8))
        pct = done * 100 // total
        bar = "█" * (pct // 10) + " " * (10 - pct // 10)
        states.append(f"{pct:3d}%|{bar}| {done}/{total} [00:{done % 60:02d}<00:{(total - done) % 60:02d}, "
                      f"{rng.uniform(20, 40):.2f}it/s]")
    return "\r" + "\r".join(states)


def training_lines(rng: random.Random, lines: int) -> bytes:
    """`lines` lines of a healthy training run, varied numbers, no failure."""
    out: list[str] = []
    epoch, step, steps, clock = 1, 0, 5000, 3 * 3600
    while len(out) < lines:
        step += 1
        clock += 1
        if step > steps:
            epoch, step = epoch + 1, 1
        if step % 25 == 0:
            out.append(_tqdm(rng, 1000))
        out.append(f"Epoch {epoch}/50 | step {step}/{steps} | loss={rng.uniform(0.05, 1.5):.4f} "
                   f"lr={rng.uniform(1e-5, 3e-4):.2e} grad_norm={rng.uniform(0.1, 4.0):.3f} | "
                   f"{rng.uniform(8, 14):.1f} it/s")
        if step % 40 == 0:
            out.append(f"[{_stamp(clock, rng.randrange(1000))}] INFO trainer.py:214 - eval "
                       f"mAP={rng.uniform(0.2, 0.6):.4f} val_error={rng.uniform(0.05, 0.3):.2f} "
                       f"val_loss={rng.uniform(0.1, 0.9):.4f} samples=5000")
        if step % 997 == 0:
            out.append("/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py:557: "
                       "UserWarning: This DataLoader will create 8 worker processes in total. Our "
                       "suggested max number of worker in current system is 4, which is smaller than "
                       "what this DataLoader is going to create.")
            out.append("  warnings.warn(_create_warning_msg(")
        if step % 2500 == 0:
            out.append(f"[{_stamp(clock, rng.randrange(1000))}] INFO trainer.py:301 - Saved checkpoint "
                       f"to /data/runs/exp12/ckpt/epoch_{epoch:03d}_step_{step:05d}.pth "
                       f"({rng.uniform(380, 420):.1f} MB)")
    return ("\n".join(out[:lines]) + "\n").encode()


def hit_lines(rulebook: Rulebook, data: bytes) -> int:
    """Lines of `data` where the scanner matches, each line searched alone (what grep -c counts)."""
    scanner = rulebook.scanner
    return sum(1 for line in data.split(b"\n") if line and scanner.search(line))


@dataclass
class Synthetic:
    """The generated log and what must be found in it."""

    path: Path
    size: int
    expected: Counter[str] = field(default_factory=Counter)
    """Event key -> how many snippets of it were spliced in."""
    hit_lines: int = 0
    """Lines the rulebook's scanner matches, line by line: what `grep -E -c` must print."""


def make_log(path: Path, size: int, rulebook: Rulebook) -> Synthetic:
    """Write one block of ordinary lines over and over, a failure after each block."""
    block = training_lines(random.Random(1), BLOCK_LINES)
    block_hits = hit_lines(rulebook, block)
    snippet_hits = {key: hit_lines(rulebook, text) for key, text in FAILURES}
    out = Synthetic(path, 0)
    with path.open("wb") as f:
        n = 0
        while out.size + len(block) <= size:
            f.write(block)
            key, text = FAILURES[n % len(FAILURES)]
            f.write(text)
            out.size += len(block) + len(text)
            out.expected[key] += 1
            out.hit_lines += block_hits + snippet_hits[key]
            n += 1
        rest = block[: block.rfind(b"\n", 0, max(0, size - out.size)) + 1]
        f.write(rest)
        out.size += len(rest)
        out.hit_lines += hit_lines(rulebook, rest)
    return out


# --------------------------------------------------------------------------- RE2 -> ERE


class Unconvertible(ValueError):
    """An RE2 construct with no POSIX ERE equivalent here."""


_ERE_SPECIAL = frozenset(".[]()*+?{}|^$\\")
_ESCAPES = {"d": "[0-9]", "D": "[^0-9]", "s": "[[:space:]]", "S": "[^[:space:]]",
            "w": "[[:alnum:]_]", "W": "[^[:alnum:]_]", "b": r"\b", "B": r"\B", "t": "\t"}
_CLASS_ESCAPES = {"d": "0-9", "s": "[:space:]", "w": "[:alnum:]_", "t": "\t", "n": ""}
"""`\\n` in a class only keeps a multiline RE2 scan inside one line; grep's lines hold none."""
_GROUP = re.compile(r"\(\?(?:P?<[A-Za-z_]\w*>|([A-Za-z]*)([:)]))")


def _char_class(pattern: str, i: int, fold: bool) -> tuple[int, str]:
    """The bracket expression starting at `i`: (index after it, its ERE form)."""
    j, body = i + 1, ["["]
    try:
        if pattern[j] == "^":
            body.append("^")
            j += 1
        if pattern[j] == "]":
            body.append("]")
            j += 1
        while pattern[j] != "]":
            c = pattern[j]
            if c == "\\":
                e = pattern[j + 1]
                if e in _CLASS_ESCAPES:
                    body.append(_CLASS_ESCAPES[e])
                elif e.isascii() and not e.isalnum() and e not in "]\\-^[":
                    body.append(e)  # backslash is literal inside an ERE bracket: drop it
                else:
                    raise Unconvertible(f"\\{e} in a character class")
                j += 2
                continue
            if pattern.startswith("[:", j):
                close = pattern.index(":]", j) + 2
                body.append(pattern[j:close])
                j = close
                continue
            if fold and c.isalpha():
                raise Unconvertible("letters in a character class under (?i)")
            body.append(c)
            j += 1
    except Unconvertible:
        raise
    except (IndexError, ValueError) as exc:
        raise Unconvertible("unterminated character class") from exc
    return j + 1, "".join(body) + "]"


def re2_to_ere(pattern: str) -> str:
    """Convert an RE2 pattern to GNU grep's ERE, or raise Unconvertible.

    `(?:` and named groups become plain groups, `(?i:X)` spells each letter of X as `[xX]`,
    `\\d \\s \\S \\w` become bracket classes, `\\b` is kept (GNU grep knows it), escaped
    punctuation stays escaped where ERE needs it, lazy quantifiers become greedy (same lines
    match). Anything else (`\\A`, `\\pL`, `\\x{..}`, other flags) is refused.
    """
    out: list[str] = []
    fold = [False]
    i, n, after_quantifier = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        quantifier = False
        if c == "\\":
            if i + 1 >= n:
                raise Unconvertible("trailing backslash")
            e = pattern[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
            elif e.isascii() and not e.isalnum() and e not in "\n":
                out.append("\\" + e if e in _ERE_SPECIAL else e)
            else:
                raise Unconvertible(f"\\{e}")
            i += 2
        elif c == "[":
            i, cls = _char_class(pattern, i, fold[-1])
            out.append(cls)
        elif c == "(" and pattern.startswith("(?", i):
            m = _GROUP.match(pattern, i)
            if m is None or (m[1] and set(m[1]) - {"i"}):
                raise Unconvertible(f"group {pattern[i:i + 5]}...")
            on = fold[-1] or "i" in (m[1] or "")
            if m[2] == ")":
                fold[-1] = on  # (?i) alone: the rest of the enclosing group
            else:
                fold.append(on)
                out.append("(")
            i = m.end()
        elif c == "(":
            fold.append(fold[-1])
            out.append("(")
            i += 1
        elif c == ")":
            if len(fold) == 1:
                raise Unconvertible("unbalanced )")
            fold.pop()
            out.append(")")
            i += 1
        elif c in "*+?":
            if not (c == "?" and after_quantifier):  # `x*?` is lazy in RE2: same lines match
                out.append(c)
            quantifier = True
            i += 1
        elif c == "{":
            m = re.compile(r"\{\d+(?:,\d*)?\}").match(pattern, i)
            if m is None:
                raise Unconvertible("a literal {")
            out.append(m[0])
            quantifier = True
            i = m.end()
        elif c == "\n":
            raise Unconvertible("a newline (grep splits patterns at newlines)")
        elif fold[-1] and c.isascii() and c.isalpha():
            out.append(f"[{c.lower()}{c.upper()}]")
            i += 1
        else:
            out.append(c)
            i += 1
        after_quantifier = quantifier
    if len(fold) != 1:
        raise Unconvertible("unbalanced (")
    return "".join(out)


def scanner_patterns(rulebook: Rulebook) -> list[str]:
    """What `Rulebook.scanner` searches for: every line-scope pattern and the traceback header."""
    every = [p for rule in rulebook.rules if rule.spec.scope == "line" for p in rule.spec.patterns]
    return [*every, TRACEBACK]


def ere_alternation(patterns: list[str]) -> tuple[str, list[tuple[str, str]]]:
    """The grep -E pattern, and the (pattern, reason) pairs that had to be skipped."""
    parts, skipped = [], []
    for p in patterns:
        try:
            parts.append(f"({re2_to_ere(p)})")
        except Unconvertible as exc:
            skipped.append((p, str(exc)))
    return "|".join(parts), skipped


# --------------------------------------------------------------------------- part 1


def run_cockpit(rulebook: Rulebook, path: Path) -> tuple[int, Counter[str]]:
    """`cockpit classify PATH`: bytes read and event key -> findings."""
    (report,) = classify_paths(rulebook, [str(path)], sys.stdin.buffer)
    if report.error:
        raise RuntimeError(f"classify_paths: {report.error}")
    return report.bytes_read, Counter({key: e.count for key, e in report.events.items()})


def run_grep(args: list[str], path: Path) -> int:
    """`LC_ALL=C grep ARGS -c -- PATH`: the count it prints."""
    proc = subprocess.run(["grep", *args, "-c", "--", str(path)],
                          capture_output=True, env={**os.environ, "LC_ALL": "C"}, check=False)
    if proc.returncode > 1:
        raise RuntimeError(f"grep failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    if proc.stderr:
        print(f"  grep says: {proc.stderr.decode(errors='replace').strip()}")
    return int(proc.stdout)


def count_hit_lines(search: Callable[[bytes, int], Any], data: bytes) -> int:
    """Lines of `data` with a match, found the way the classifier scans: search, skip the line."""
    n = pos = 0
    while (m := search(data, pos)) is not None:
        n += 1
        pos = data.find(b"\n", m.start()) + 1
        if pos == 0:
            break
    return n


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, result) of one call."""
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def throughput(args: argparse.Namespace, root: Path, rulebook: Rulebook) -> tuple[dict[str, Any], bool]:
    """Part 1; returns the figures for the summary and whether every check passed."""
    ok = True
    patterns = scanner_patterns(rulebook)
    ere, skipped = ere_alternation(patterns)
    print(f"rulebook: {len(rulebook)} rules, {len(patterns) - 1} line-scope patterns + traceback header; "
          f"grep -E gets {len(patterns) - len(skipped)} of {len(patterns)} "
          f"({len(skipped)} skipped as not convertible to ERE)")
    for p, why in skipped:
        print(f"  skipped {p!r}: {why}")

    t0 = time.perf_counter()
    log = make_log(root / "train.log", args.size_mb * MIB, rulebook)
    gen_s = time.perf_counter() - t0
    n_snippets = sum(log.expected.values())
    print(f"generated {log.size / MIB:.0f} MiB in {gen_s:.1f} s: {n_snippets} failures spliced in "
          f"({dict(log.expected)}), one per {BLOCK_LINES} lines; {log.hit_lines} lines hit by the "
          f"scanner line by line")

    try:
        py_re: re.Pattern[bytes] | None = re.compile(
            "|".join(f"(?:{p})" for p in patterns).encode(), re.MULTILINE)
    except re.error as exc:
        print(f"  Python re cannot compile the alternation ({exc}): skipped")
        py_re = None
    with log.path.open("rb") as f:
        piece = f.read(min(SLICE, log.size))
    re2_search = rulebook.scanner.search
    re2_piece_hits = count_hit_lines(re2_search, piece)

    best: dict[str, float] = {}
    results: dict[str, Any] = {}
    runs: list[tuple[str, Callable[[], Any]]] = [
        ("cockpit", lambda: run_cockpit(rulebook, log.path)),
        ("grep -E", lambda: run_grep(["-E", "-e", ere], log.path)),
        ("grep -F", lambda: run_grep(["-F", "-e", FLOOR_LITERAL], log.path)),
        ("RE2 slice", lambda: count_hit_lines(re2_search, piece)),
    ]
    warm_re: Callable[[], Any] | None = None
    if py_re is not None:
        runs.append(("re slice", lambda: count_hit_lines(py_re.search, piece)))
        # Python re is CPU-bound on bytes already in memory: its warm-up needs no 64 MiB pass.
        warm_re = lambda: count_hit_lines(py_re.search, piece[:MIB])  # noqa: E731
    for round_no in range(1 + args.repeat):  # round 0 warms up (page cache, compiled patterns)
        took = []
        for name, fn in runs:
            if not round_no and name == "re slice" and warm_re is not None:
                seconds, _ = timed(warm_re)
                took.append(f"{name} (1 MiB) {seconds:.2f}s")
                continue
            seconds, value = timed(fn)
            took.append(f"{name} {seconds:.2f}s")
            if round_no:
                best[name] = min(best.get(name, seconds), seconds)
            results[name] = value
        print(f"  round {round_no}{' (warm-up)' if not round_no else ''}: {', '.join(took)}")

    read, events = results["cockpit"]
    if read != log.size:
        ok = False
        print(f"MISMATCH: cockpit read {read} bytes of {log.size}")
    if events != log.expected:
        ok = False
        print(f"MISMATCH: cockpit events {dict(events)} != spliced failures {dict(log.expected)}")
    if results["grep -E"] != log.hit_lines:
        ok = False
        print(f"MISMATCH: grep -E counted {results['grep -E']} lines, RE2 line by line {log.hit_lines}"
              " (the ERE is not equivalent on this log)")
    if py_re is not None and results["re slice"] != re2_piece_hits:
        ok = False
        print(f"MISMATCH: Python re hit {results['re slice']} lines of the slice, RE2 {re2_piece_hits}")

    size_mb = log.size / MB
    rate = {name: (len(piece) if "slice" in name else log.size) / MB / best[name] for name in best}
    print()
    print(f"throughput, {log.size / MIB:.0f} MiB log from the page cache, best of {args.repeat} "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} cpus)")
    print(f"  {'cockpit classify':<32} {best['cockpit']:7.2f} s {rate['cockpit']:8.0f} MB/s   "
          f"{len(events)} events / {sum(events.values())} findings (spliced: {len(log.expected)} / "
          f"{n_snippets})")
    print(f"  {'grep -E -c (same alternation)':<32} {best['grep -E']:7.2f} s {rate['grep -E']:8.0f} MB/s   "
          f"{results['grep -E']} lines")
    print(f"  {'grep -F -c ' + repr(FLOOR_LITERAL):<32} {best['grep -F']:7.2f} s "
          f"{rate['grep -F']:8.0f} MB/s   {results['grep -F']} lines (one literal: the floor)")
    print(f"  {'RE2 alternation, 64 MiB slice':<32} {best['RE2 slice']:7.2f} s "
          f"{rate['RE2 slice']:8.0f} MB/s   {results['RE2 slice']} lines (the engine alone)")
    if py_re is not None:
        print(f"  {'Python re, 64 MiB slice':<32} {best['re slice']:7.2f} s {rate['re slice']:8.0f} MB/s   "
              f"{results['re slice']} lines (whole file: ~{size_mb / rate['re slice']:.0f} s)")
    print(f"  cockpit / grep -E: {rate['cockpit'] / rate['grep -E']:.2f}x   "
          f"cockpit / grep -F floor: {rate['cockpit'] / rate['grep -F']:.2f}x"
          + (f"   cockpit / Python re: {rate['cockpit'] / rate['re slice']:.1f}x" if py_re else ""))
    figures = {"size_mib": log.size / MIB, "rate": rate, "best": best, "events": len(events),
               "findings": sum(events.values()), "patterns": len(patterns) - len(skipped),
               "skipped": len(skipped), "grep_lines": results["grep -E"]}
    return figures, ok


# --------------------------------------------------------------------------- part 2


def local_probe(root: Path) -> Probe:
    """The real probe.sh under /bin/sh, driven tick by tick like the tests drive it (its own
    HOME, an empty TMUX_TMPDIR so tmux is never polled, LC_ALL=C)."""
    tmux = root / "tmux"
    tmux.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root),
           "TMUX_TMPDIR": str(tmux), "LC_ALL": "C"}
    return Probe(env, root, "0")


def appended_mib() -> bytes:
    """1 MiB of training output with one OOM traceback across the 512 KiB tick boundary."""
    lines = training_lines(random.Random(2), 20_000)
    head = lines[: lines.rfind(b"\n", 0, TAIL // 2 - 600) + 1]
    data = head + FAILURES[0][1] + lines[len(head):]
    data = data[: data.rfind(b"\n", 0, TAIL - 200) + 1]
    return data + b"=" * (TAIL - len(data) - 1) + b"\n"


@dataclass
class Round:
    """One read of the appended MiB, tick by tick."""

    probe_ms: list[float] = field(default_factory=list)
    parse_ms: list[float] = field(default_factory=list)
    classify_ms: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        """Probe, parse and classify over every tick of the round."""
        return sum(self.probe_ms) + sum(self.parse_ms) + sum(self.classify_ms)


def read_tail(probe: Probe, rulebook: Rulebook, path: Path, start: int, size: int) -> Round:
    """Tick until the cursor reaches the end of `path` (and one empty tick after it)."""
    inode, offset = os.stat(path).st_ino, start
    classifier = LogClassifier(rulebook)
    out = Round()
    for _ in range(64):
        t0 = time.perf_counter()
        record = probe.raw(f"log {inode} {offset} {path}")
        t1 = time.perf_counter()
        snap = parse_record(record, instance="bench", observed_at=time.time())
        t2 = time.perf_counter()
        if len(snap.log_chunks) != 1:
            raise RuntimeError(f"expected one log chunk, got {snap.log_chunks!r}: {record[:300]!r}")
        chunk = snap.log_chunks[0]
        if chunk.reset or chunk.offset != offset:
            raise RuntimeError(f"unexpected cursor move: {offset} -> {chunk.offset} reset={chunk.reset}")
        out.findings += classifier.feed(chunk.data, chunk.reset)
        out.findings += classifier.flush()
        t3 = time.perf_counter()
        out.probe_ms.append((t1 - t0) * 1000)
        out.parse_ms.append((t2 - t1) * 1000)
        out.classify_ms.append((t3 - t2) * 1000)
        out.sizes.append(len(chunk.data))
        inode, offset = chunk.inode, offset + len(chunk.data)
        if not chunk.data:
            break
    if offset != size:
        raise RuntimeError(f"cursor stopped at {offset}, file has {size} bytes")
    return out


def per_tick(args: argparse.Namespace, root: Path, rulebook: Rulebook) -> tuple[dict[str, Any], bool]:
    """Part 2; returns the figures for the summary and whether every check passed."""
    ok = True
    tail = appended_mib()
    big, small = root / "big.log", root / "small.log"
    with big.open("wb") as f:
        os.truncate(f.fileno(), TEN_GIB)
        os.pwrite(f.fileno(), b"\n", TEN_GIB - 1)  # the hole's last "line" ends before the MiB
    with big.open("ab") as f:
        f.write(tail)
    body = training_lines(random.Random(3), SMALL // 80)
    body = body[: body.rfind(b"\n", 0, SMALL) + 1]
    small.write_bytes(body + tail)
    files = {"10 GiB": big, "10 MiB": small}
    for name, path in files.items():
        st = os.stat(path)
        print(f"{name} log: {st.st_size} bytes, {st.st_blocks * 512 / MIB:.1f} MiB on disk, "
              f"cursor at {st.st_size - len(tail)}")

    probes = {name: local_probe(root) for name in files}
    rounds: dict[str, list[Round]] = {name: [] for name in files}
    try:
        for round_no in range(1 + args.rounds):  # round 0 warms up
            for name, path in files.items():  # alternate: both see the same machine state
                size = os.stat(path).st_size
                r = read_tail(probes[name], rulebook, path, size - len(tail), size)
                keys = [f.key for f in r.findings]
                if keys != [FAILURES[0][0]]:
                    ok = False
                    print(f"MISMATCH: {name} round {round_no}: findings {keys}, expected "
                          f"[{FAILURES[0][0]!r}]")
                if round_no:
                    rounds[name].append(r)
    finally:
        for probe in probes.values():
            probe.close()

    stats: dict[str, dict[str, float]] = {}
    print()
    print(f"per tick, 1 MiB appended, real probe.sh under /bin/sh locally, {args.rounds} rounds "
          f"(median of the data ticks; total = median over rounds of all ticks)")
    print(f"  {'log':>6} | {'ticks':>5} | {'probe rt':>9} | {'parse':>8} | {'classify':>8} | "
          f"{'total 1 MiB':>11} | found")
    for name, rs in rounds.items():
        data = [(p, q, c) for r in rs for p, q, c, n in
                zip(r.probe_ms, r.parse_ms, r.classify_ms, r.sizes, strict=True) if n]
        s = {
            "ticks": statistics.median(len(r.sizes) for r in rs),
            "probe": statistics.median(d[0] for d in data),
            "parse": statistics.median(d[1] for d in data),
            "classify": statistics.median(d[2] for d in data),
            "total": statistics.median(r.total_ms for r in rs),
        }
        stats[name] = s
        found = ", ".join(sorted({f"{f.key} @line {f.line_no}" for r in rs for f in r.findings}))
        print(f"  {name:>6} | {s['ticks']:>5.0f} | {s['probe']:>6.2f} ms | {s['parse']:>5.2f} ms | "
              f"{s['classify']:>5.2f} ms | {s['total']:>8.1f} ms | {found}")
    b, sm = stats["10 GiB"], stats["10 MiB"]
    print(f"  ratio 10 GiB / 10 MiB: probe {b['probe'] / sm['probe']:.2f}, "
          f"classify {b['classify'] / sm['classify']:.2f}, total {b['total'] / sm['total']:.2f}")
    return {"stats": stats}, ok


# --------------------------------------------------------------------------- main


def summary(part1: dict[str, Any] | None, part2: dict[str, Any] | None) -> None:
    """The figures as a markdown table for the README."""
    print()
    print("| measurement | time | rate / ratio |")
    print("|---|---:|---:|")
    if part1 is not None:
        rate, best = part1["rate"], part1["best"]
        size = f"{part1['size_mib']:.0f} MiB"
        print(f"| `cockpit classify`, {size} log ({part1['events']} events, {part1['findings']} findings) "
              f"| {best['cockpit']:.2f} s | {rate['cockpit']:.0f} MB/s |")
        print(f"| `grep -E -c`, same {part1['patterns']} patterns as ERE (LC_ALL=C) "
              f"| {best['grep -E']:.2f} s | {rate['grep -E']:.0f} MB/s |")
        print(f"| `grep -F -c '{FLOOR_LITERAL}'` (one literal: floor of one pass) "
              f"| {best['grep -F']:.2f} s | {rate['grep -F']:.0f} MB/s |")
        if "re slice" in rate:
            print(f"| Python `re`, same alternation (64 MiB slice) | {best['re slice']:.2f} s "
                  f"| {rate['re slice']:.0f} MB/s |")
        print(f"| cockpit / grep -E | | {rate['cockpit'] / rate['grep -E']:.2f}x |")
    if part2 is not None:
        s = part2["stats"]
        for name in ("10 GiB", "10 MiB"):
            print(f"| 1 MiB appended to a {name} log: probe + parse + classify, {s[name]['ticks']:.0f} ticks "
                  f"| {s[name]['total']:.1f} ms | probe {s[name]['probe']:.1f} + classify "
                  f"{s[name]['classify']:.1f} ms/tick |")
        print(f"| 10 GiB / 10 MiB | | {s['10 GiB']['total'] / s['10 MiB']['total']:.2f}x |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the synthetic log in MiB")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes after one warm-up (best of)")
    parser.add_argument("--rounds", type=int, default=20, help="reads of the appended MiB per file")
    parser.add_argument("--dir", default=None, help="where to write the logs (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    parser.add_argument("--skip", choices=("throughput", "tick"), help="leave one part out")
    args = parser.parse_args()
    if shutil.which("grep") is None:
        print("grep not found", file=sys.stderr)
        return 2
    rulebook = load_rulebook(user=False)
    root = Path(tempfile.mkdtemp(prefix="cockpit-bench-classify-", dir=args.dir))
    part1 = part2 = None
    ok = True
    try:
        if args.skip != "throughput":
            part1, ok1 = throughput(args, root, rulebook)
            ok = ok and ok1
            print()
        if args.skip != "tick":
            part2, ok2 = per_tick(args, root, rulebook)
            ok = ok and ok2
    finally:
        if args.keep:
            print(f"\nkept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    summary(part1, part2)
    if not ok:
        print("\nSOME CHECKS FAILED (see MISMATCH above)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
