"""The watcher's feed: bases, replay from the latest base, bounded size (real SQLite files)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cockpit.models.events import HostStateChanged, SnapshotTaken
from cockpit.models.parse import parse_record
from cockpit.models.snapshot import HostState, Reachability
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.probe import ProbePlan
from cockpit.services.watch import feed as feedmod
from cockpit.services.watch.feed import FeedReader, FeedWriter, follow
from tests.replay import NOW, a1_record, replay_sweep


def taken(seq: int, *, base: bool, at: float = NOW) -> SnapshotTaken:
    record = a1_record(seq, at, 100 + seq)
    return SnapshotTaken(parse_record(record, instance="a1", observed_at=at), record, base=base)


def test_a_box_without_a_master_log_gets_a_base_too(tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text("sweep: s\ninstances:\n  - {name: b1, profile: generic-ssh, host: h}\n")
    loaded = load_sweep(sweep)
    inst = loaded.sweep.instances[0]
    plan = ProbePlan(inst, loaded.profiles[inst.profile], rebase_every=3)
    reasons = []
    for _ in range(6):
        _seq, request = plan.request()
        reasons.append(plan.marks)
        assert b"marks " not in request  # nothing to ask for without a master log
    assert reasons == ["first", "", "rebase", "", "", "rebase"]


def test_with_a_master_log_the_first_request_and_each_rebase_ask_for_marks(tmp_path: Path) -> None:
    loaded = replay_sweep(tmp_path)
    inst = loaded.sweep.instances[0]
    plan = ProbePlan(inst, loaded.profiles[inst.profile], rebase_every=2)
    _seq, first = plan.request()
    assert plan.marks == "first" and b"marks " in first
    plan.absorb(parse_record(a1_record(1, NOW, 100), instance="a1", observed_at=NOW))
    _seq, second = plan.request()
    assert plan.marks == "rebase" and b"marks " in second


def test_a_base_replaces_what_came_before_and_records_before_any_base_are_not_kept(
        tmp_path: Path) -> None:
    path = tmp_path / "x.db.feed"
    writer = FeedWriter(path)
    try:
        writer.add(taken(1, base=False))  # no base yet: a follower could not start here
        writer.add(taken(2, base=True))
        writer.add(taken(3, base=False))
        reader = FeedReader(path)
        assert [r.base for r in reader.since(0, {"a1"})] == [True, False]
        writer.add(taken(4, base=True))
        kept = reader.since(0, {"a1"})
        assert [r.base for r in kept] == [True] and reader.since(0, {"other"}) == []
    finally:
        writer.close()


def test_the_feed_is_bounded_per_box_and_says_it_was_trimmed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.db.feed"
    one = len(taken(1, base=False).record)
    monkeypatch.setattr(feedmod, "MAX_FEED_BYTES", one * 5)
    writer = FeedWriter(path)
    try:
        writer.add(taken(1, base=True))
        for seq in range(2, 30):
            writer.add(taken(seq, base=False))
        reader = FeedReader(path)
        kept = reader.since(0, {"a1"})
        assert kept[0].base, "the base is never trimmed"
        assert sum(len(r.record) for r in kept) <= one * 6
        assert "a1" in reader.trimmed()
    finally:
        writer.close()


async def test_follow_replays_states_and_records_then_strips_a_later_bases_marks(
        tmp_path: Path) -> None:
    path = tmp_path / "x.db.feed"
    writer = FeedWriter(path)
    try:
        writer.state(HostState("a1", Reachability.CONNECTED, NOW))
        writer.add(taken(1, base=True))
        writer.add(taken(2, base=False))
        events = []

        async def collect() -> None:
            async for event in follow(path, {"a1"}, poll_s=0.05):
                events.append(event)

        task = asyncio.create_task(collect())
        for _ in range(100):
            if sum(isinstance(e, SnapshotTaken) for e in events) >= 2:
                break
            await asyncio.sleep(0.05)
        writer.add(taken(3, base=True))  # a later base: its marks are not read twice
        for _ in range(100):
            if sum(isinstance(e, SnapshotTaken) for e in events) >= 3:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        assert isinstance(events[0], HostStateChanged)
        snaps = [e for e in events if isinstance(e, SnapshotTaken)]
        assert [s.snapshot.seq for s in snaps] == [1, 2, 3]
        assert snaps[0].snapshot.queue.queue_marks is not None
        assert snaps[2].snapshot.queue.queue_marks is None
    finally:
        writer.close()
