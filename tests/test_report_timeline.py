"""`cockpit report`: a post-mortem timeline from a real store file, text and JSON, through the
command's own parser (and once as `python -m`), with hostile names from a box kept as data."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.commands import report
from cockpit.services.store.db import Store, StoreReader, default_db_path
from cockpit.services.store.timeline import BoxRows, _billing, billing_sql, build_timeline

T0 = 1_790_000_000.0
H = 3600.0
HOSTILE = "evil\x1b[2J[bold]cell"


def run_report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="cockpit")
    report.add_parser(parser.add_subparsers(dest="command", required=True))
    code = report.run(parser.parse_args(["report", *argv]))
    out, err = capsys.readouterr()
    return code, out, err


def make_store(path: Path) -> None:
    """Ten watched hours of two boxes: a1 (2.00/h) runs three cells — one finishes, one fails
    with a classified cause and an alert, one stalls — goes unreachable for 30 min and burns
    idle for an hour; a2 (no price) has a cell with a hostile name."""
    store = Store.open(path, sweep="rep", role="test")
    with store.batch():
        for i in range(0, int(10 * H) + 1, 30):
            store.sample("a1", T0 + i, {"price_h": 2.0, "gpu0.util": 90.0})
            store.sample("a2", T0 + i, {"gpu0.util": 0.0})
        store.cell_change("a1", "c1", "pending", "running", T0 + 60, epochs=3)
        store.cell_change("a1", "c1", "running", "running", T0 + H, epoch=1, epochs=3)
        store.cell_change("a1", "c1", "running", "running", T0 + 2 * H, epoch=2, epochs=3)
        store.cell_change("a1", "c1", "running", "finished ok", T0 + 3 * H, epoch=3, epochs=3,
                          exit_code=0, evidence="master log: FINISHED exit=0")
        store.cell_change("a1", "c2", "pending", "running", T0 + 3 * H)
        store.event("a1", "c2", "cuda-oom", "resource", "CUDA out of memory",
                    "Tried to allocate 2.00 GiB", T0 + 4 * H - 5)
        store.cell_change("a1", "c2", "running", "failed", T0 + 4 * H, exit_code=1)
        alert = store.alert(("failed", "a1", "c2", "x"), "a1", "cell-failed",
                            "a1: c2 failed: CUDA out of memory", T0 + 4 * H + 1, cell="c2")
        store.delivery(alert, "slack://…", True, 1, "", T0 + 4 * H + 2)
        store.cell_change("a1", "c3", "pending", "running", T0 + 4 * H)
        stall = store.judgement_started("a1", "stalled", "stalled 25m", T0 + 5 * H, cell="c3")
        store.judgement_ended(stall, T0 + 6 * H)
        stale = store.judgement_started("a1", "stale", "stale 5m", T0 + 6 * H)
        store.judgement_ended(stale, T0 + 6.5 * H)
        store.judgement_started("a1", "idle-burn", "GPUs idle 10m", T0 + 9 * H)  # still open
        store.cell_change("a2", HOSTILE, "pending", "running", T0 + 9.5 * H)
        store.event("a2", HOSTILE, "real-bug", "real-bug", "Traceback",
                    "\x1b]0;owned\x07 [red]not markup[/red]", T0 + 9.6 * H)
        store.cell_change("a2", HOSTILE, "running", "failed", T0 + 9.6 * H, exit_code=1)
        store.touch(T0 + 10 * H)
    store.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "rep.db"
    make_store(path)
    return path


def test_text_report_tells_each_box_story_with_cost(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_report(["rep", "--db", str(db)], capsys)
    assert code == 0, err
    a1 = out[out.index("\na1 "):out.index("\na2 ")]
    assert "2.00/h  watched 10h  cost so far 20.00" in a1
    assert "unreachable 30m" in a1 and "idle burn 1h (2.00)" in a1 and "alerts 1" in a1
    for needle in ("c1  started (3 epochs)", "c1  epoch 2/3", "c1  finished ok",
                   "c2  failed exit 1: CUDA out of memory: Tried to allocate 2.00 GiB",
                   "c3  stalled for 1h", "unreachable for 30m", "idle burn for 1h (still at the last tick)",
                   "ALERT cell-failed: a1: c2 failed: CUDA out of memory [slack://… ok]"):
        assert needle in a1, needle
    assert a1.index("c1  started") < a1.index("c2  failed") < a1.index("unreachable for")
    a2 = out[out.index("\na2 "):]
    assert "cost so far unknown (no price in the sweep)" in a2
    # A box's text is data: no escape sequence reaches the terminal, brackets stay literal.
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold]cell" in a2 and "[red]not markup[/red]" in a2


def test_json_report_has_the_documented_shape(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_report(["rep", "--db", str(db), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["sweep"] == "rep" and doc["until"] == T0 + 10 * H and doc["since"] is None
    a1, a2 = doc["boxes"]
    assert a1["instance"] == "a1" and a1["cost"] == 20.0 and a1["watched_s"] == 10 * H
    assert a1["idle_burn_s"] == H and a1["idle_cost"] == 2.0 and a1["unreachable_s"] == 0.5 * H
    cells = {c["cell"]: c for c in a1["cells"]}
    assert cells["c1"]["state"] == "finished ok" and cells["c1"]["epoch"] == 3
    assert cells["c1"]["started_at"] == T0 + 60 and cells["c1"]["ended_at"] == T0 + 3 * H
    assert cells["c2"]["cause"] == "CUDA out of memory: Tried to allocate 2.00 GiB"
    assert cells["c3"]["state"] == "running" and cells["c3"]["ended_at"] is None
    kinds = {e["kind"] for e in a1["timeline"]}
    assert kinds >= {"started", "progress", "finished", "failed", "failure", "stalled",
                     "stale", "idle-burn", "alert"}
    idle = next(e for e in a1["timeline"] if e["kind"] == "idle-burn")
    assert idle["until"] == T0 + 10 * H  # still open: runs to the last tick
    assert a2["cost"] is None and a2["price_per_hour"] is None and a2["watched_s"] == 10 * H
    assert a2["cells"][0]["cell"] == HOSTILE  # exact in JSON, escaped for the terminal
    assert "\x1b" not in out


def test_since_keeps_the_window_and_cells_started_before_it(db: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_report(["rep", "--db", str(db), "--json", "--since", "3h"], capsys)
    assert code == 0
    a1 = json.loads(out)["boxes"][0]
    assert a1["cost"] == 6.0 and a1["watched_s"] == 3 * H
    assert all(e["at"] >= T0 + 7 * H or e["until"] >= T0 + 7 * H for e in a1["timeline"])
    assert [e["kind"] for e in a1["timeline"]] == ["idle-burn"]
    assert a1["unreachable_s"] == 0 and a1["alerts"] == 0
    # The cells' states still come from their whole history.
    assert {c["cell"]: c["state"] for c in a1["cells"]}["c1"] == "finished ok"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.db"
    code, out, err = run_report(["rep", "--db", str(missing)], capsys)
    assert code == 2 and out == "" and str(missing) in err and err.count("\n") == 1
    code, _, err = run_report(["rep"], capsys)  # the default path, under the data dir
    assert code == 2 and str(default_db_path("rep")) in err
    code, _, err = run_report(["rep", "--db", str(missing), "--since", "yesterday"], capsys)
    assert code == 2 and "--since" in err
    code, _, err = run_report([str(tmp_path / "absent.yaml")], capsys)
    assert code == 2 and "absent.yaml" in err
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    code, _, err = run_report(["rep", "--db", str(garbage)], capsys)
    assert code == 2 and "garbage.db" in err and "Traceback" not in err


def test_sweep_file_names_the_store_and_orders_its_boxes(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("""sweep: rep
instances:
  - name: a2
    profile: generic-ssh
    host: box-2
  - name: a0
    profile: generic-ssh
    host: box-0
""")
    make_store(default_db_path("rep"))
    code, out, err = run_report([str(sweep), "--json"], capsys)
    assert code == 0, err
    names = [b["instance"] for b in json.loads(out)["boxes"]]
    assert names == ["a2", "a0", "a1"]  # the sweep's order, then boxes only the store knows
    assert json.loads(out)["boxes"][1]["timeline"] == []


def test_runs_as_a_module(db: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "cockpit.commands.report", "rep", "--db",
                           str(db), "--json"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["boxes"][0]["cost"] == 20.0


def test_timeline_is_pure_over_rows() -> None:
    empty = build_timeline("s", [BoxRows("a1")], since=None, until=None, generated_at=1.0)
    box = empty.boxes[0]
    assert box.cost is None and box.entries == () and box.cells == () and box.watched_s == 0


def test_billing_in_sql_matches_the_pure_sum_over_buckets_raw_and_gaps(tmp_path: Path) -> None:
    path = tmp_path / "gaps.db"
    store = Store.open(path, sweep="g", role="test")
    now = T0 + 2 * 24 * H
    with store.batch():
        for i in range(0, int(2 * 24 * H), 2):
            if 10 * H <= i < 12 * H or 40 * H <= i < 41 * H:
                continue  # nobody watched: the writer was down
            price = 2.0 if i < 30 * H else 3.5
            store.sample("a1", T0 + i, {"price_h": price})
    store.compact(now)
    store.close()
    with StoreReader(path) as reader:
        assert any(p.span for p in reader.samples("a1", "price_h"))  # both kinds are there
        for since in (None, T0 + 11 * H, T0 + 30 * H + 7, now - 3 * H):
            pure = _billing(reader.samples("a1", "price_h"), since, now)
            sql = billing_sql(reader, "a1", since, now)
            assert sql == pytest.approx(pure), since
        watched, unwatched, cost, price = billing_sql(reader, "a1", None, now)
    assert price == 3.5
    assert unwatched == pytest.approx(3 * H, abs=120)
    assert watched == pytest.approx(45 * H, abs=120)
    assert cost == pytest.approx(2.0 * 28 + 3.5 * 17, rel=0.01)
