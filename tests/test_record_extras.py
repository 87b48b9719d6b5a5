"""The probe record's `@@tz` and `@@marks` sections (cockpit.models.parse)."""

from __future__ import annotations

import base64

import pytest

from cockpit.models.parse import parse_record, parse_utc_offset
from cockpit.models.snapshot import NA, HostSnapshot

MARKS = (
    "=== Queue /root/q/queue_1.txt: 4 ablations, starting from 1 on demo-a1 ===\n"
    "[2026-11-21 10:00:00] [1/4] STARTING baseline (reconstruction, 6ep)\n"
    "[2026-11-21 10:00:09] [1/4] FINISHED baseline (exit=0)\n"
    "[2026-11-21 10:00:09] [2/4] STARTING det_baseline (detection, 6ep) — 检测\n"
)


def b64_lines(data: bytes) -> str:
    """Base64 wrapped at 76 columns, like coreutils `base64` prints it."""
    text = base64.b64encode(data).decode()
    return "\n".join(text[i:i + 76] for i in range(0, len(text), 76))


def parse(body: str) -> HostSnapshot:
    record = f"@@begin 5 1763690400 demo-a1\n{body}@@end 5\n".encode()
    return parse_record(record, instance="a1", observed_at=0.0)


@pytest.mark.parametrize(("text", "seconds"), [
    ("+0800", 28800.0),
    ("-0330", -12600.0),
    ("+0530", 19800.0),
    ("+0000", 0.0),
    ("-0000", 0.0),
    ("+1345", 49500.0),
    ("  +0800\n", 28800.0),
])
def test_parse_utc_offset(text: str, seconds: float) -> None:
    value = parse_utc_offset(text)
    assert isinstance(value, float)
    assert value == seconds


@pytest.mark.parametrize("text", ["", "UTC", "+08:00", "+080", "0800", "+08000", "CST", "+08ab", "--0800"])
def test_parse_utc_offset_junk_is_na(text: str) -> None:
    value = parse_utc_offset(text)
    assert isinstance(value, NA)
    assert "UTC offset" in value.reason


def test_record_tz_section_sets_the_utc_offset() -> None:
    assert parse("@@tz +0530\n").utc_offset == 19800.0
    assert parse("@@tz -0330\n").utc_offset == -12600.0


def test_record_without_or_with_junk_tz_is_na() -> None:
    assert parse("").utc_offset == NA("not reported")
    junk = parse("@@tz %z\n").utc_offset
    assert isinstance(junk, NA)
    assert "%z" in junk.reason


def test_record_marks_section_is_decoded_into_queue_marks() -> None:
    snap = parse(f"@@tz +0800\n@@marks /root/q/master.log\n{b64_lines(MARKS.encode())}\n"
                 "@@proc /root/q/queue_1.txt\n")
    assert snap.queue.queue_marks == MARKS
    assert snap.utc_offset == 28800.0
    assert snap.queue.process_pids == ()  # the next section still parses


def test_record_marks_of_a_missing_log_are_empty() -> None:
    snap = parse("@@marks /root/q/master.log\n")
    assert snap.queue.queue_marks == ""
    assert not snap.queue.queue_marks


def test_record_without_marks_has_none() -> None:
    assert parse("@@tz +0800\n").queue.queue_marks is None


def test_record_marks_with_invalid_utf8_are_replaced_not_fatal() -> None:
    data = b"[2026-11-21 10:00:09] [1/4] FINISHED baseline (exit=0)\n\xff\xfe\n"
    snap = parse(f"@@marks /q/m.log\n{b64_lines(data)}\n")
    marks = snap.queue.queue_marks
    assert marks is not None
    assert marks.splitlines()[0] == "[2026-11-21 10:00:09] [1/4] FINISHED baseline (exit=0)"
    assert "\ufffd" in marks
