"""cockpit.services.config.acks: acknowledged danger-clock banners, stored atomically as JSON."""

from __future__ import annotations

import datetime as dt
import json
import os
import types
from pathlib import Path

import pytest

from cockpit.models.profile import Profile
from cockpit.services.config import acks
from cockpit.services.config.acks import AckStore
from cockpit.services.config.profiles import load_named

MOMENT = dt.datetime(2026, 11, 21, 10, 0, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def autodl() -> Profile:
    return load_named("autodl")


@pytest.fixture(scope="module")
def vastai() -> Profile:
    return load_named("vastai")


def without_clocks(profile: Profile) -> Profile:
    clocks = profile.danger_clocks.model_copy(update={"clocks": ()})
    return profile.model_copy(update={"danger_clocks": clocks})


def leftovers(directory: Path) -> list[str]:
    """Temp files the atomic write may have left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".acks-") or p.suffix == ".tmp")


def test_banner_shows_until_acknowledged_and_stays_acknowledged(tmp_path: Path, autodl: Profile) -> None:
    path = tmp_path / "state" / "banner_acks.json"
    store = AckStore(path)
    assert store.problem == ""
    assert store.needs_banner(autodl)
    store.acknowledge(autodl, now=MOMENT)
    assert not store.needs_banner(autodl)
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "autodl": {"facts": autodl.clock_facts_hash(), "at": "2026-11-21T10:00:00+00:00"}}
    # A new store (the next cockpit start) reads the same file.
    again = AckStore(path)
    assert not again.needs_banner(autodl)
    assert again.problem == ""
    assert leftovers(path.parent) == []


def test_acknowledging_one_platform_leaves_the_others(tmp_path: Path, autodl: Profile,
                                                      vastai: Profile) -> None:
    path = tmp_path / "acks.json"
    store = AckStore(path)
    store.acknowledge(autodl, now=MOMENT)
    assert store.needs_banner(vastai)
    store.acknowledge(vastai, now=MOMENT)
    reread = AckStore(path)
    assert not reread.needs_banner(autodl)
    assert not reread.needs_banner(vastai)
    assert set(json.loads(path.read_text(encoding="utf-8"))) == {"autodl", "vastai"}


def test_changed_clock_facts_reopen_the_banner(tmp_path: Path, autodl: Profile) -> None:
    path = tmp_path / "acks.json"
    AckStore(path).acknowledge(autodl, now=MOMENT)
    changed = without_clocks(autodl)
    assert changed.clock_facts_hash() != autodl.clock_facts_hash()
    store = AckStore(path)
    assert store.needs_banner(changed)
    assert not store.needs_banner(autodl)
    store.acknowledge(changed, now=MOMENT)
    assert not AckStore(path).needs_banner(changed)
    assert AckStore(path).needs_banner(autodl)


def test_facts_outside_the_banner_do_not_reopen_it(tmp_path: Path, autodl: Profile) -> None:
    path = tmp_path / "acks.json"
    AckStore(path).acknowledge(autodl, now=MOMENT)
    renamed = autodl.model_copy(update={"display_name": "AutoDL (renamed)"})
    assert not AckStore(path).needs_banner(renamed)


def test_acknowledge_without_a_moment_stamps_now(tmp_path: Path, autodl: Profile) -> None:
    path = tmp_path / "acks.json"
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    AckStore(path).acknowledge(autodl)
    at = dt.datetime.fromisoformat(json.loads(path.read_text(encoding="utf-8"))["autodl"]["at"])
    assert at.tzinfo is not None
    assert before <= at <= dt.datetime.now(dt.UTC)


def test_default_path_is_in_the_state_dir(autodl: Profile) -> None:
    store = AckStore()  # conftest points COCKPIT_STATE_DIR at a temp dir
    assert store.path.name == "banner_acks.json"
    store.acknowledge(autodl, now=MOMENT)
    assert store.path.is_file()


@pytest.mark.parametrize("content", [
    "{not json",
    "[1, 2, 3]",
    '"just a string"',
    "",
    '{"autodl": {"facts": "abc"',
])
def test_corrupt_file_shows_every_banner_and_is_moved_aside(tmp_path: Path, autodl: Profile,
                                                           content: str) -> None:
    path = tmp_path / "acks.json"
    path.write_text(content, encoding="utf-8")
    store = AckStore(path)
    assert store.problem
    assert str(path) in store.problem
    assert store.needs_banner(autodl)
    # Reading alone changes nothing on disk.
    assert path.read_text(encoding="utf-8") == content
    store.acknowledge(autodl, now=MOMENT)
    (aside,) = tmp_path.glob("acks.json.unreadable-*")
    assert aside.read_text(encoding="utf-8") == content  # nothing lost
    assert json.loads(path.read_text(encoding="utf-8"))["autodl"]["facts"] == autodl.clock_facts_hash()
    assert store.problem == ""
    assert not AckStore(path).needs_banner(autodl)
    assert AckStore(path).problem == ""
    assert leftovers(tmp_path) == []
    # Later acknowledgements do not move the good file aside again.
    store.acknowledge(without_clocks(autodl), now=MOMENT)
    assert len(list(tmp_path.glob("acks.json.unreadable-*"))) == 1


def test_unreadable_path_is_a_problem_not_a_crash(tmp_path: Path, autodl: Profile) -> None:
    path = tmp_path / "acks.json"
    path.mkdir()  # reading a directory raises IsADirectoryError (an OSError)
    store = AckStore(path)
    assert "unreadable" in store.problem
    assert store.needs_banner(autodl)


def test_non_object_entries_are_ignored(tmp_path: Path, autodl: Profile) -> None:
    path = tmp_path / "acks.json"
    path.write_text(json.dumps({"autodl": "yes", "vastai": {"facts": "x"}}), encoding="utf-8")
    store = AckStore(path)
    assert store.problem == ""
    assert store.needs_banner(autodl)


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path, autodl: Profile,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "acks.json"
    store = AckStore(path)

    def boom(src: str, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.acknowledge(autodl, now=MOMENT)
    assert leftovers(tmp_path) == []
    assert not path.exists()


class _FrozenClock(dt.datetime):
    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _FrozenClock:
        return cls(2026, 11, 21, 10, 0, 0, tzinfo=tz)


def test_two_corrupt_files_in_one_second_are_both_kept(tmp_path: Path, autodl: Profile,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acks, "dt", types.SimpleNamespace(datetime=_FrozenClock, UTC=dt.UTC))
    path = tmp_path / "acks.json"
    path.write_text("{first", encoding="utf-8")
    AckStore(path).acknowledge(autodl, now=MOMENT)
    path.write_text("{second", encoding="utf-8")
    AckStore(path).acknowledge(autodl, now=MOMENT)
    kept = sorted(p.read_text(encoding="utf-8") for p in tmp_path.glob("acks.json.unreadable-*"))
    assert kept == ["{first", "{second"]
