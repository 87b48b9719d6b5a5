"""Trends over the whole run: resampled by time onto a fixed 0-100 scale, gaps left blank, and
the box screen reading the store's history (not only this session's points)."""

from __future__ import annotations

from pathlib import Path

from cockpit.models.trend import HOLD_S, axis_line, bars, resample
from cockpit.services.config.acks import AckStore
from cockpit.services.store.db import Store, metric_gpu_util
from cockpit.services.watch.wiring import Session
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.safe import PlainStatic
from tests.replay import NOW, replay_events, replay_sweep, source_of
from tests.test_ui_app import settle


def test_columns_are_linear_in_time_and_keep_each_columns_peak() -> None:
    points = [(0.0, 10.0), (10.0, 90.0), (11.0, 20.0), (50.0, 30.0)]
    trend = resample(points, end=60.0, columns=6)
    assert (trend.start, trend.end, trend.column_s) == (0.0, 60.0, 10.0)
    assert trend.values == [10.0, 90.0, 20.0, 20.0, 20.0, 30.0]  # held within HOLD_S
    assert trend.gaps == 0


def test_a_silence_longer_than_the_hold_is_a_gap_not_a_zero() -> None:
    points = [(0.0, 80.0), (1000.0, 80.0)]
    trend = resample(points, end=1000.0, columns=10)
    assert trend.values[0] == 80.0 and trend.values[-1] == 80.0
    assert trend.values[1:-1] == [None] * 8 and trend.gaps == 8  # 100 s columns > HOLD_S
    assert trend.column_s > HOLD_S
    assert bars(trend.values) == "▇" + " " * 8 + "▇"  # blank for no data, never a false 0


def test_bars_use_a_fixed_scale_not_the_datas_range() -> None:
    assert bars([97.0, 97.0]) == "██"  # pinned high stays high (a self-scaled line goes flat)
    assert bars([5.0, 6.0]) == "▁▁"  # 5 -> 6 % is not a cliff
    assert bars([0.0, 50.0, 100.0, None]) == "▁▅█ "
    assert bars([-5.0, 250.0]) == "▁█"  # out-of-range values clamp


def test_the_axis_is_as_wide_as_the_line_it_labels() -> None:
    assert axis_line(20, "-10h", "-5h", "now") == "-10h    -5h      now"
    assert len(axis_line(60, "-1d", "-12h", "now")) == 60
    assert axis_line(8, "-10h", "-5h", "now") == "-10h now"  # too narrow: the ends only


async def test_the_box_screen_trend_spans_the_run_kept_in_the_store(tmp_path: Path) -> None:
    loaded = replay_sweep(tmp_path)
    db = tmp_path / "store" / "replay.db"
    store = Store.open(db, sweep="replay", role="test")
    try:
        with store.batch():
            for minute in range(0, 600, 5):  # ten hours of history, before this session
                store.sample("a1", NOW - 36000 + minute * 60, {metric_gpu_util(0): 40.0 + minute % 50})
    finally:
        store.close()
    session = Session(db)
    app = CockpitApp(loaded, source=lambda: source_of(replay_events(with_key_problem=False)),
                     clock=lambda: NOW, acks=AckStore(tmp_path / "acks.json"), banners=False,
                     session=session)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        app.open_box("a1")
        await pilot.pause(0.5)
        screen = app.screen
        assert isinstance(screen, BoxScreen)
        label = str(screen.query_one("#spark-head-gpu", PlainStatic).render())
        assert "whole run" in label, label
        trend, scope = app.trend("a1", metric_gpu_util(0), [], 60)
        assert scope == "whole run" and trend.axis() == ("-10h", "-5h", "now")
        line = str(screen.query_one("#spark-gpu0-util", PlainStatic).render())
        assert line.startswith("gpu0 util") and set(line[12:].strip()) <= set("▁▂▃▄▅▆▇█ ")
        assert line[12:].strip()
        # GPU memory, and each mount's bytes and inodes (this session: no store history for them).
        assert screen.query("#spark-gpu0-mem")
        legend = str(screen.query_one("#spark-head-disk", PlainStatic).render())
        assert "=/root/autodl-tmp" in legend and "bytes full in" in legend, legend
        assert screen.query("#spark-m0-inodes")
        await pilot.press("escape", "q")
