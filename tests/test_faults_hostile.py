"""Fault matrix, hostile inputs: cell names with spaces, quotes, `$()`, `;`, newlines and
unicode travel through our queue and cell runners as data, and nothing they contain runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "cockpit" / "data"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# No spaces: the queue format splits on whitespace (`<cfg> <task> [epochs]`). Each of these
# would create a file named PWNED<n> if any shell ever evaluated it.
HOSTILE = [
    "cfg/$(touch${IFS}PWNED1).yaml",
    "cfg/`touch${IFS}PWNED2`.yaml",
    "cfg/a;touch${IFS}PWNED3;.yaml",
    "cfg/q'uote\"d|&>x.yaml",
    "cfg/显存_ünïcode.yaml",
]


def test_hostile_cell_names_are_data_in_our_runners(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(DATA / "run_queue.sh", work / "run_queue.sh")
    shutil.copy(DATA / "run_one.sh", work / "run_one.sh")
    (work / "queue.txt").write_text("".join(f"{cfg} t 1\n" for cfg in HOSTILE))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "RUN_ONE": str(work / "run_one.sh"),
           # The user's command sees the values only as variables.
           "COCKPIT_COMMAND": 'printf "%s|%s\\n" "$NAME" "$CFG" >> names.txt; touch "$CKPT_DIR/best.pth"; '
                              'echo "{\\"epoch\\": 1}" > "$CKPT_DIR/best_metrics.json"',
           "COCKPIT_LOGS": str(work / "logs"), "COCKPIT_CKPT": str(work / "ckpt"),
           "COCKPIT_DURABLE": str(work / "durable")}
    done = subprocess.run(["bash", "run_queue.sh", "queue.txt"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(tmp_path.rglob("PWNED*")), "a cell name was executed"
    assert not (work / "x").exists(), "a redirection in a cell name was executed"
    names = (work / "names.txt").read_text().splitlines()
    expected = [f"{Path(cfg).name.removesuffix('.yaml')}|{cfg}" for cfg in HOSTILE]
    assert names == expected
    for cfg in HOSTILE:
        name = Path(cfg).name.removesuffix(".yaml")
        assert (work / "durable" / name / "best.pth").exists(), name
    assert "QUEUE DONE" in done.stdout and done.stdout.count("FINISHED") == len(HOSTILE)
