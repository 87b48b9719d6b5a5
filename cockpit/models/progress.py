"""Training progress read from the lines real trainers print: epoch k/N, step k/N, bars.

Trainers do not agree on a format. Each of these is read (samples with their public sources
are in tests/data/progress/):

- an epoch counter with or without a total, any case: `Epoch 3/10` (Keras, the runbook's own
  trainer), `epoch 1/5`, `Training Epoch:[642/1500]`, `===> Epoch 75 Complete`;
- a tqdm bar behind an epoch (PyTorch Lightning, hand-rolled tqdm loops):
  `Epoch 3:  45%|████▌     | 450/1000 [00:10<00:12, 44.1it/s, v_num=0]` (the bar's k/N is
  the fraction of the epoch);
- an epoch with the batch of that epoch in brackets (mmdetection/mmengine, DETR and the
  torchvision reference scripts): `Epoch [1][2400/7517]`, `Epoch: [0]  [210/225]`;
- a Hugging Face Trainer log dict `{'loss': 0.41, ..., 'epoch': 1.5}` (epochs done, a float)
  and its bare tqdm bar `  30%|███       | 300/1000 [...]` (steps of the whole run);
- a Keras step bar `391/391 [==============================] - 12s 31ms/step` (steps of the
  current epoch);
- step counters: `step 1200/50000`, `step: 2300/ 3305`, `iter 2920: loss`, `iteration
  5426/  250000`, `Batch[395/6920]`, `[1200/50000]`, `67/446 (epoch 0)`.

What is *not* progress: numbers with slashes inside other text (dates `2026/11/24`, paths
`a/1/2`, a ratio `loss 3/4`), an evaluation or validation bar (it would look like a finished
run), a k greater than its N. Those yield None.

`parse_progress` is total (it never raises), bounded (`MAX_COUNT`, `MAX_SCAN`) and linear:
every quantifier in its patterns is bounded, so the work per character scanned is a constant,
and at most `MAX_SCAN` characters of a line are scanned. Python's `re` rather than RE2 (the
rulebook's engine, models/regex.py) because these patterns need look-around, which RE2 lacks;
the bounds are what keep `re` from backtracking without end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cockpit.models.queue import RunProgress

MAX_COUNT = 10**9
"""Largest epoch or step count believed. The longest real runs count a few million optimizer
steps (Keras's old per-sample counters reach 10**5-10**6); a larger number is a date, an id or
noise, and bounded numbers keep every later sum and ratio cheap."""
MAX_FLOAT_DIGITS = 12
"""Digits read after a decimal point (`'epoch': 1.4999999999999998` is 16): more change
nothing a progress display can show."""
MAX_SCAN = 4096
"""Characters of one line that are scanned. Progress is printed at a line's start (bars,
counters) or in a short log dict; a Lightning bar with many logged metrics is ~2 KB. A 64 KB
line of one unbroken bar segment is not read further than this."""

Unit = Literal["epoch", "step"]

_N = r"(?<![0-9.])([0-9]{1,12})(?![0-9])"
"""A count: 1-12 ASCII digits, not part of a longer number or a decimal."""
_PAIR = r"(?<![0-9./])([0-9]{1,12})[ \t]{0,16}/[ \t]{0,16}([0-9]{1,12})(?![0-9]|/[0-9]|\.[0-9])"
"""`k/N` with optional spaces around the slash, not part of a path or a date (`2026/11/24`)."""

_FLAGS = re.IGNORECASE | re.ASCII
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)?|.)?",
                   re.ASCII | re.DOTALL)
"""CSI (colours, cursor moves), OSC (titles, links) and two-character escapes, removed."""

_EPOCH = re.compile(
    r"\bepoch(?:\((?:train|training)\))?[ \t:=\[(#]{0,16}"
    r"(?<![0-9.])([0-9]{1,12})(?![0-9])(?!\.[0-9])"
    r"(?:[ \t]{0,16}(?:/|of)[ \t]{0,16}([0-9]{1,12})(?![0-9]|/[0-9]|\.[0-9]))?", _FLAGS)
"""`Epoch 3`, `epoch 1/5`, `Epoch:[642/1500]`, `Epoch [1]`, `epoch 2 of 9`, `Epoch(train) [1]`."""
_HF_EPOCH = re.compile(r"""['"]epoch['"][ \t]{0,4}:[ \t]{0,4}(?<![0-9.])([0-9]{1,12})"""
                       r"(?:\.([0-9]{1,32}))?(?![0-9.])", _FLAGS)
"""The `'epoch': 1.5` of a Hugging Face Trainer log dict (JSON quotes too)."""
_AFTER_EPOCH = re.compile(
    r"[ \t]{0,16}(?:"
    r":[ \t]{0,16}([0-9]{1,3})%[^0-9\n]{0,512}?" + _PAIR +  # Lightning/tqdm bar
    r"|\][ \t]{0,16}\[[ \t]{0,16}" + _PAIR + r"[ \t]{0,16}\]"  # mmdet/DETR `[1][k/N]`
    r"|:[ \t]{0,16}([0-9]{1,3})%"  # a bar with no counts
    r")", _FLAGS)
"""What may follow an epoch number and tell how far into that epoch the run is."""
_STEP_AFTER = re.compile(r"\b(?:step|iter|iteration|batch|it)s?\b[ \t:=\[#]{0,16}" + _PAIR, _FLAGS)
"""`... epoch 0 step 50/2464 ...`: the step of the epoch named before it on the line."""
_STEP = re.compile(
    r"\b(step|iter|iteration|batch|global step)(s?)\b[ \t:=\[#]{0,16}"
    r"(?:" + _PAIR + "|" + _N + r"(?![ \t]{0,16}/)(?![0-9.]))", _FLAGS)
"""`step 1200/50000`, `step: 2300/ 3305`, `iteration     5426/  250000`, `Batch[395/6920]`,
`iter 2920:` (a step with no total)."""
_BAR = re.compile(r"(?<![0-9])([0-9]{1,3})%[ \t]{0,4}\|[^|\n]{0,512}\|[ \t]{0,16}" + _PAIR, _FLAGS)
"""A bare tqdm bar: `  30%|███       | 300/1000 [00:10<00:23, 30.1it/s]`."""
_KERAS = re.compile(r"^[ \t#]{0,16}" + _PAIR + r"[ \t]{0,4}(?:\[[=>.]|━|─|-[ \t]{1,4}[0-9])",
                    _FLAGS)
"""A Keras step bar: `391/391 [=====...] - 12s`, `1688/1688 ━━━━`, `1875/1875 - 4s` (verbose=2)."""
_BRACKET = re.compile(r"\[[ \t]{0,16}" + _PAIR + r"[ \t]{0,16}\]", _FLAGS)
"""A bare bracketed counter `[1200/50000]`."""
_LEADING = re.compile(r"^[ \t]{0,16}" + _PAIR + r"[ \t]{0,4}\(epoch[ \t]{0,4}" + _N + r"\)",
                      _FLAGS)
"""char-rnn's `67/446 (epoch 0), train_loss = 2.911`: the batch of an epoch, then the epoch."""
_NOT_TRAINING = re.compile(r"\b(?:valid\w{0,12}|val|eval\w{0,12}|test\w{0,12}|predict\w{0,12}"
                           r"|sanity\w{0,12}|inference)\b", _FLAGS)
"""Words that name a loop other than training: its bar is not the run's progress."""
_PAST_EPOCH = re.compile(r"\b(?:at|from|since|after|until|best|of)[ \t]{1,4}$|\b(?:best|checkpoint|ckpt"
                         r"|saved|saving|loading|loaded|resum\w{0,6}|restor\w{0,6}|early[ \t_-]?stop)",
                         _FLAGS)
"""A line naming an epoch in the past (`best val_acc 0.91 at epoch 5`, `Saved checkpoint from
epoch 4`, `resuming from epoch 3`) with no total: a reference, not the run's progress."""
_DOCKER_STEP = re.compile(r"^[ \t]{0,16}step[ \t]{1,4}[0-9]{1,12}/[0-9]{1,12}[ \t]{1,4}:[ \t]", _FLAGS)
"""`Step 3/10 : RUN pip install ...` is a Docker build's step, not a trainer's."""


@dataclass(frozen=True)
class Progress:
    """What one line says about how far a run is.

    `unit` "epoch": `done` is the epoch the line names (a float for Hugging Face's epochs
    done, e.g. 1.5), `total` the number of epochs when printed, `fraction` how far into
    that epoch a bar or batch counter on the same line is (0..1).
    `unit` "step": `done` is the step, `total` the steps when printed; `within_epoch` when
    the counter restarts every epoch (a Keras step bar, `Batch[k/N]`), else it counts the
    whole run (an HF bar, `iter`, `step`).
    """

    unit: Unit
    done: float
    total: int | None = None
    fraction: float | None = None
    within_epoch: bool = False


def _count(text: str | None) -> int | None:
    """A bounded count (at most `MAX_COUNT`), or None."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 12:
        return None
    value = int(text)
    return value if value <= MAX_COUNT else None


def _pair(k_text: str | None, n_text: str | None) -> tuple[int, int] | None:
    """`k/N` as counts with 0 <= k <= N and N >= 1, or None (a date, a ratio, noise)."""
    k, n = _count(k_text), _count(n_text)
    if k is None or n is None or n < 1 or k > n:
        return None
    return k, n


def _percent(text: str | None) -> float | None:
    value = _count(text)
    return value / 100 if value is not None and value <= 100 else None


def clean_segment(line: str) -> str:
    """The part of `line` a terminal would show last: after its last `\\r` (tqdm redraws a
    bar in place), colour codes removed, cut to `MAX_SCAN` characters."""
    segment = line.rsplit("\r", 1)[-1]
    if not segment.strip() and "\r" in line:  # `bar\r` ends with the carriage return
        parts = [p for p in line.split("\r") if p.strip()]
        segment = parts[-1] if parts else ""
    return _ANSI.sub("", segment[: MAX_SCAN * 2])[:MAX_SCAN]


def parse_progress(line: str) -> Progress | None:
    """How far a run is according to one log line, or None when the line does not say.

    Total: any string gives a `Progress` or None, never an exception."""
    try:
        return _parse(clean_segment(line))
    except (ValueError, OverflowError):  # pragma: no cover - the patterns admit only digits
        return None


def _parse(text: str) -> Progress | None:
    if _DOCKER_STEP.search(text):
        return None
    if (m := _HF_EPOCH.search(text)) is not None:
        whole = _count(m[1])
        if whole is None:
            return None
        frac = float(f"0.{m[2][:MAX_FLOAT_DIGITS]}") if m[2] else 0.0
        return Progress("epoch", whole + frac)
    if (m := _LEADING.search(text)) is not None:
        pair, epoch = _pair(m[1], m[2]), _count(m[3])
        if pair is not None and epoch is not None:
            return Progress("epoch", epoch, None, pair[0] / pair[1])
    if (m := _EPOCH.search(text)) is not None:
        return _epoch(text, m)
    return _steps(text)


def _epoch(text: str, m: re.Match[str]) -> Progress | None:
    epoch = _count(m[1])
    if epoch is None:
        return None
    total: int | None = None
    if m[2] is not None:
        pair = _pair(m[1], m[2])
        if pair is None:  # `Epoch 12/3`: not a k-of-N
            return None
        total = pair[1]
    fraction: float | None = None
    rest = text[m.end():]
    if _NOT_TRAINING.search(text[: m.start()]):
        return None  # `Validation epoch 3: 40%|...`
    if total is None and (_PAST_EPOCH.search(text[max(0, m.start() - 16): m.start()])
                          or _PAST_EPOCH.search(text)):
        return None  # `Training completed: best val_acc 0.91 at epoch 5`
    if (after := _AFTER_EPOCH.match(rest)) is not None:
        bar = _pair(after[2], after[3]) or _pair(after[4], after[5])
        if bar is not None:
            fraction = bar[0] / bar[1]
        else:
            fraction = _percent(after[1]) if after[1] is not None else _percent(after[6])
    elif (step := _STEP_AFTER.search(rest, 0, 200)) is not None:
        bar = _pair(step[1], step[2])
        fraction = bar[0] / bar[1] if bar is not None else None
    return Progress("epoch", epoch, total, fraction)


def _steps(text: str) -> Progress | None:
    if (m := _BAR.search(text)) is not None:
        if _NOT_TRAINING.search(text[: m.start()]):
            return None
        pair = _pair(m[2], m[3])
        return Progress("step", pair[0], pair[1]) if pair is not None else None
    if (m := _KERAS.search(text)) is not None:
        pair = _pair(m[1], m[2])
        return Progress("step", pair[0], pair[1], within_epoch=True) if pair else None
    if (m := _STEP.search(text)) is not None:
        if _NOT_TRAINING.search(text[: m.start()]):
            return None
        within = m[1].lower() == "batch"
        if m[3] is not None:
            pair = _pair(m[3], m[4])
            return Progress("step", pair[0], pair[1], within_epoch=within) if pair else None
        if m[2]:  # `Total optimization steps = 203`: a total, not a step
            return None
        step = _count(m[5])
        return Progress("step", step, within_epoch=within) if step is not None else None
    if (m := _BRACKET.search(text)) is not None:
        if _NOT_TRAINING.search(text[: m.start()]):
            return None
        pair = _pair(m[1], m[2])
        return Progress("step", pair[0], pair[1]) if pair is not None else None
    return None


def last_redrawn(text: str) -> str | None:
    """The newest complete bar state in the unfinished tail of a chunk of log text, or None.

    tqdm and Lightning redraw one line with `\\r` and print no newline until the loop ends,
    so a running epoch's bar is never a complete line. A segment that ends with `\\r` and
    began at a `\\r` or `\\n` in the same text is a whole redraw; the last segment may be
    cut mid-write and is not judged (`450/10` of a cut `450/1000`)."""
    if "\n" in text:
        tail = text.rsplit("\n", 1)[1]
        start_ok = True
    else:
        tail, start_ok = text, False
    parts = tail.split("\r")
    complete = parts[1:-1] if not start_ok else parts[:-1]
    for segment in reversed(complete):
        if segment.strip():
            return segment
    return None


COMPLETED = "Training completed"
"""The line a trainer (the runbook's, the demo's) prints when its run ended normally."""


def read_run_lines(run: RunProgress, lines: list[str], redrawn: str | None = None) -> None:
    """Fold a cell's complete log lines into `run`, then `redrawn`: the newest whole bar state
    of a line still being redrawn with `\r` (a tqdm or Lightning bar prints no newline until
    its loop ends). The one reader of a cell's own log, for the TUI's tracker and `status`."""
    for line in lines:
        if (progress := parse_progress(line)) is not None:
            advance(run, progress)
        if COMPLETED in line:
            run.completed = True
    if redrawn is not None and (progress := parse_progress(redrawn)) is not None:
        advance(run, progress)


def advance(run: RunProgress, progress: Progress) -> None:
    """Fold one line's progress into a cell's `RunProgress`.

    - An epoch line sets `epoch` (whole epochs of a fractional `1.5`, the rest becomes
      `fraction`), `epochs` when it prints a total, and the bar's fraction of the epoch.
    - A step counter that restarts each epoch (Keras bar, `Batch[k/N]`) sets `fraction`.
    - A whole-run step counter sets `step`/`steps`; while no line ever named an epoch and it
      has a total, it also stands in as `epoch`/`epochs` (`unit` "step"), so the panel shows
      k/N and the ETA is paced on steps. A bar whose total is smaller than the run's is
      another loop's (Hugging Face evaluates between steps): ignored.
    """
    if progress.unit == "epoch":
        whole = int(progress.done)
        if run.unit == "step":  # an epoch appeared: steps no longer stand in for epochs
            run.epochs = 0
        run.unit, run.epoch_seen, run.epoch = "epoch", True, whole
        if progress.total is not None:
            run.epochs = progress.total
        rest = progress.done - whole
        run.fraction = progress.fraction if progress.fraction is not None else (
            rest if rest > 0 else None)
        return
    if progress.within_epoch:
        if progress.total:
            run.fraction = progress.done / progress.total
        return
    if progress.total is not None and progress.total < run.steps:
        return  # an evaluation bar between training steps
    run.step, run.steps = int(progress.done), progress.total or 0
    if not run.epoch_seen and progress.total:
        run.unit, run.epoch, run.epochs, run.fraction = "step", run.step, run.steps, None
