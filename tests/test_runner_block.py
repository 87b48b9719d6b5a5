"""Issue 14: the `runner:` block `cockpit discover` writes for a hand-started runbook queue, and
the command `resume` / `rerun` build from it (no box needed: the discovery script's output is
parsed as the box would print it; the live recipes are in test_runbook_queue_e2e.py).

- Only the RUNNER_ENV names leave the box and reach the sweep; an API key never does, even if
  the box's filter let one through; a value with control characters is NOT FOUND, not printed.
- The printed sweep loads as printed, with the runner block.
- The command is every value shell-quoted: a PROXY_HOOK holding `;` and quotes comes back as
  one word, in tmux (`2>&1 | tee -a LOG`) and under nohup (`</dev/null >>LOG 2>&1 &`).
"""

from __future__ import annotations

import base64
import shlex
from pathlib import Path

import pytest
from pydantic import ValidationError

from cockpit.models.sweep import Instance
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.queue.discover import (
    MAX_ENV_VALUE,
    environ,
    find_queues,
    parse,
    sweep_document,
)
from cockpit.services.queue.launch import hand_command, resume_hint

HOOK = "source /etc/net; echo 'x' $HOME"
"""A PROXY_HOOK a shell would split and expand if it were not quoted."""


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def box_output(env: bytes, *, stdout: str = "/w/master.log", regular: bool = True) -> str:
    """What the discovery script prints for one nohup runner in /w with `env` as its
    (already filtered) environment."""
    args = "bash\nrun_queue.sh\nqueue.txt"
    return "\n".join([
        "A 10 1 10 10", "A 11 10 10 10",
        f"P 10 1 10 {b64(args)} {b64('/w')} 10",
        f"F 10 1 {'f' if regular else 'o'} 101 {b64(stdout)}",
        f"E 10 {b64(env)}",
    ]) + "\n"


def test_only_allow_listed_names_are_kept() -> None:
    raw = b"PY=python\0OPENAI_API_KEY=sk-1\0DATA_DIR=/d\0PY=second\0RUN_ONE\0"
    assert environ(b64(raw)) == {"PY": "python", "DATA_DIR": "/d"}
    assert environ("not base64!") == {}


def test_discover_prints_a_loadable_runner_block(tmp_path: Path) -> None:
    env = (b"PY=" + b"p" * (MAX_ENV_VALUE + 1) + b"\0DURABLE_DIR=/w\0PROXY_HOOK=" + HOOK.encode()
           + b"\0DATA_DIR=/d\nevil\0AWS_SECRET_ACCESS_KEY=abc\0")
    (found,) = find_queues(*parse(box_output(env)))
    assert found.runner == {"script": "/w/run_queue.sh", "shell": "bash", "cwd": "/w",
                            "output": "redirect", "env": {"DURABLE_DIR": "/w", "PROXY_HOOK": HOOK}}
    assert "control characters" in found.missing["runner.env.DATA_DIR"]
    assert f"longer than {MAX_ENV_VALUE}" in found.missing["runner.env.PY"]
    text = sweep_document("found", [("box1", "generic-ssh", [found])])
    assert "abc" not in text and "AWS_" not in text and "evil" not in text
    assert "# runner.env.DATA_DIR: NOT FOUND" in text
    path = tmp_path / "s.yaml"
    path.write_text(text)
    (inst,) = load_sweep(path).sweep.instances
    assert inst.runner is not None and inst.runner.env["PROXY_HOOK"] == HOOK


def test_unreadable_environment_is_not_taken_for_an_empty_one() -> None:
    output = box_output(b"").replace(f"E 10 {b64(b'')}", "E 10 -")
    (found,) = find_queues(*parse(output))
    assert found.runner is None and "environment could not be read" in found.missing["runner"]
    (empty,) = find_queues(*parse(box_output(b"")))
    assert empty.runner is not None and empty.runner["env"] == {}


def test_no_master_log_no_runner() -> None:
    (found,) = find_queues(*parse(box_output(b"PY=p\0", stdout="/dev/pts/3", regular=False)))
    assert found.runner is None and "no master log" in found.missing["runner"]


def instance(**extra: object) -> Instance:
    return Instance.model_validate({
        "name": "b1", "profile": "generic-ssh", "host": "h", "queue": "/w/q 1.txt",
        "queue_log": "/w/master log", "runner": {
            "script": "/w/run_queue.sh", "cwd": "/w", "output": "tee",
            "env": {"PROXY_HOOK": HOOK, "PY": "python"}}, **extra})


UNSET = ["env", "-u", "PROJECT_REPO_DIR", "-u", "DATA_DIR", "-u", "DURABLE_DIR", "-u", "CRED_FILE",
         "-u", "RUN_ONE", "-u", "WANDB_MODE"]
"""The RUNNER_ENV names the runner did not have: unset, so the re-run has exactly its env."""


def test_hand_command_quotes_every_value_in_tmux_and_nohup() -> None:
    tmux = hand_command(instance(tmux_session="q1"), 3, of="/w/orig.txt")
    argv = shlex.split(tmux)
    assert argv[:5] == ["tmux", "new-session", "-d", "-s", "q1"] and len(argv) == 6
    inner = shlex.split(argv[5])
    assert inner == ["cd", "/w", "&&", *UNSET, f"PROXY_HOOK={HOOK}", "PY=python", "bash",
                     "/w/run_queue.sh", "/w/q 1.txt", "3", "/w/orig.txt", "2>&1", "|", "tee",
                     "-a", "/w/master log"]
    nohup = hand_command(instance(), 2)
    assert shlex.split(nohup) == ["cd", "/w", "&&", "{", *UNSET, f"PROXY_HOOK={HOOK}", "PY=python",
                                  "nohup", "bash", "/w/run_queue.sh", "/w/q 1.txt", "2",
                                  "</dev/null", ">>/w/master log", "2>&1", "&", "}"]
    assert resume_hint(instance(), 2)[0] == nohup


def test_the_model_refuses_other_names_control_characters_and_no_log() -> None:
    with pytest.raises(ValidationError):
        instance(runner={"script": "/s", "cwd": "/w", "output": "tee",
                         "env": {"OPENAI_API_KEY": "x"}})
    with pytest.raises(ValidationError):
        instance(runner={"script": "/s", "cwd": "/w", "output": "tee", "env": {"PY": "a\nb"}})
    with pytest.raises(ValidationError):
        Instance.model_validate({"name": "b1", "profile": "generic-ssh", "host": "h",
                                 "queue": "/w/q", "runner": {"script": "/s", "cwd": "/w",
                                                             "output": "redirect"}})
