"""The custody gate holds on real evidence (issue 12), on real files through LocalBox (the real
manifest script under /bin/sh), real torch.save checkpoints and real child processes.

One test (or parametrized group) per hole the issue lists:
1. an action that destroys data needs N/N whatever `reversible` says; a process-killing one
   needs N/N or proof that no cell is running;
2. a cell counts only with a FINISHED exit=0 mark for its latest run;
3. dot-folders (`.git/`) and names that are not plain components are never pulled;
5. an executed action always leaves an audit line and a reaped child;
6. JSON bodies by encoder, shell-wrapper scripts quoted, secrets never in an argv;
7. the runbook's PULL_MANIFEST.json is pulled and cross-checked; its verify_local.py passes on
   our pull, and its PULL_VERIFIED.json is shown, never trusted;
8. `verify --json` carries each failed cell's rule id, class and excerpt.
(4, content proof on load, is tests/test_loadcheck_content.py.)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cockpit.models.custody import CellStatus, CellVerdict, Manifest, Verification
from cockpit.models.gate import Gate, GateError, GateState, Need, need_of, render_step
from cockpit.models.sweep import Instance
from cockpit.services.config.profiles import load_named
from cockpit.services.custody.audit import read_audit
from cockpit.services.custody.flow import Custody
from cockpit.services.custody.teardown import execute
from cockpit.services.custody.verify import make_pool, marker_path, report_json, run_verification
from cockpit.services.transport.remote import LocalBox
from tests.test_custody_flow import FINISHED_BOTH, box_tree, local_factory, mark, recording_cli

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "reference" / "seed-scripts"
LOGS = Path(__file__).resolve().parent / "data" / "logs"


@pytest.fixture(scope="module")
def pool():  # type: ignore[no-untyped-def]
    with make_pool(2) as workers:
        yield workers


def custody(inst: Instance, tmp_path: Path, profile: str = "vastai") -> Custody:
    return Custody(inst, load_named(profile), "s", tmp_path / "pulled" / inst.name,
                   (recording_cli(tmp_path),), local_factory)


# -- 2. evidence per cell ----------------------------------------------------------------
STARTED_ONLY = mark(1, "STARTING", "a") + mark(1, "FINISHED", "a", 0) + mark(2, "STARTING", "b")
RERUN_GOING = FINISHED_BOTH + mark(2, "STARTING", "b")  # b's earlier exit 0 is not this run's
B_CRASHED = mark(1, "STARTING", "a") + mark(1, "FINISHED", "a", 0) + mark(2, "STARTING", "b") \
    + mark(2, "FINISHED", "b", 1)
ONLY_A = mark(1, "STARTING", "a") + mark(1, "FINISHED", "a", 0)  # a resume truncated the log
GARBLED = mark(1, "FINISHED", "a", 0) + mark(2, "FINISHED", "b", 0).replace("exit=0", "exit=" + "9" * 5000)


@pytest.mark.parametrize(("log", "b_status", "b_reason"), [
    (None, CellStatus.UNPROVEN, "no queue_log: exit codes unknown"),
    (STARTED_ONLY, CellStatus.RUNNING, "no FINISHED mark yet"),
    (RERUN_GOING, CellStatus.RUNNING, "no FINISHED mark yet"),
    (B_CRASHED, CellStatus.FAILED_ON_BOX, "failed on the box (exit=1"),
    (ONLY_A, CellStatus.UNPROVEN, "no FINISHED mark in"),
    (GARBLED, CellStatus.UNPROVEN, "garbled FINISHED mark"),
    ("missing", CellStatus.UNPROVEN, "is not on the box"),
])
async def test_a_cell_counts_only_on_its_finished_mark(tmp_path: Path, pool: object, log: str | None,
                                                      b_status: CellStatus, b_reason: str) -> None:
    inst = box_tree(tmp_path / "box", log=None if log in (None, "missing") else log)
    if log == "missing":
        inst = inst.model_copy(update={"queue_log": str(tmp_path / "box" / "no-such.log")})
    keeper = custody(inst, tmp_path)
    report = await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert report.verification is not None, report.error
    verdicts = {v.cell: v for v in report.verification.verdicts}
    assert verdicts["b"].status is b_status, verdicts["b"]
    assert b_reason in verdicts["b"].reason
    assert "missing directory" not in verdicts["b"].reason
    assert not report.verification.complete and keeper.gate.state is GateState.LOCKED
    assert not marker_path(keeper.dest).exists()
    if log is None:
        assert verdicts["a"].status is CellStatus.UNPROVEN, "no exit codes at all: nothing is OK"
    if b_status is CellStatus.RUNNING:
        assert not (keeper.dest / "b").exists(), "a running cell's files are not pulled"
    if b_status is not CellStatus.RUNNING and log is not None and log != "missing":
        assert verdicts["a"].status is CellStatus.OK


async def test_an_unproven_or_running_cell_can_be_excluded_by_typing_its_name(
        tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box", log=STARTED_ONLY)
    keeper = custody(inst, tmp_path)
    await keeper.verify(pool, {})  # type: ignore[arg-type]
    with pytest.raises(GateError, match="only a cell without a finished result"):
        keeper.exclude("a", "a")  # a is OK: never written off
    with pytest.raises(GateError, match="not excluded"):
        keeper.exclude("b", "B")
    keeper.exclude("b", "b")
    assert keeper.gate.state is GateState.VERIFIED and keeper.gate.reason.startswith("1/1 loaded")
    events = [r["event"] for r in read_audit()]
    assert events.count("exclude refused") == 2 and events[-1] == "exclude"


# -- 1. what an action needs comes from what it destroys -----------------------------------
def locked_one_of_two(running: bool) -> Verification:
    second = CellVerdict("b", CellStatus.RUNNING) if running else \
        CellVerdict("b", CellStatus.FAILED_ON_BOX, ("exit=1",), ended=True)
    return Verification("x1", "d" * 64, (CellVerdict("a", CellStatus.OK, ended=True), second), 1, 0.0)


@pytest.mark.parametrize(("profile", "action", "need"), [
    ("runpod", "stop", Need.VERIFIED),       # wipes the container disk /
    ("gpushare", "shutdown", Need.VERIFIED),  # /root resets, /hy-tmp wiped
    ("lanrui", "stop", Need.VERIFIED),       # system disk
    ("paperspace", "shut_down", Need.VERIFIED),
    ("kubernetes", "scale_down_node_pool", Need.VERIFIED),
    ("vastai", "stop", Need.IDLE),           # kills the running training
    ("autodl", "shutdown", Need.IDLE),
    ("vastai", "destroy", Need.VERIFIED),
])
def test_a_reversible_stop_that_destroys_data_needs_n_of_n(profile: str, action: str, need: Need) -> None:
    prof = load_named(profile)
    act = next(a for a in prof.teardown.actions if a.id == action)
    assert need_of(act) is need
    inst = Instance(name="x1", profile=profile, host="h", instance_id="42")
    step = render_step(inst, act)
    gate = Gate("x1")
    gate.verified(locked_one_of_two(running=True))
    assert gate.state is GateState.LOCKED
    with pytest.raises(GateError, match="locked"):
        gate.approve(step, "x1")  # the demo's r1 case: LOCKED 1/2, typed name
    gate.verified(locked_one_of_two(running=False))  # 1/2, but no cell runs any more
    allowed, why = gate.can_approve(step)
    assert allowed is (need is Need.IDLE), why


def test_every_shipped_action_is_classified_as_the_readme_says() -> None:
    """The README's table (action → destroys → needs) is the shipped profiles' truth."""
    from cockpit.services.config.profiles import load_all

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    label = {Need.VERIFIED: "N/N", Need.IDLE: "N/N, or no cell running", Need.NAME: "typed name only"}
    for name, prof in load_all().profiles.items():
        for act in prof.teardown.actions:
            row = f"| {name} | `{act.id}` | {'; '.join(act.destroys) or '—'} | {label[need_of(act)]} |"
            assert row in readme, f"README lacks or misstates: {row}"


async def test_a_process_killing_stop_runs_on_proof_that_no_cell_runs_and_relocks_when_one_starts(
        tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box", log=B_CRASHED)
    keeper = custody(inst, tmp_path)
    await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert keeper.gate.state is GateState.LOCKED  # 1/2: b failed on the box
    stop = render_step(inst, next(a for a in load_named("vastai").teardown.actions if a.id == "stop"))
    destroy = render_step(inst, next(a for a in load_named("vastai").teardown.actions if a.id == "destroy"))
    with pytest.raises(GateError, match="needs N/N"):
        keeper.approve(destroy, "v1")
    with pytest.raises(GateError, match="not approved"):
        keeper.approve(stop, "v2")
    plan = keeper.approve(stop, "v1")
    # Before it runs, the queue starts b again: killing processes now would kill a training.
    with (tmp_path / "box" / "master.log").open("a") as log:
        log.write(mark(2, "STARTING", "b"))
    with pytest.raises(GateError, match="a cell started since"):
        await keeper.run(plan)
    assert not (tmp_path / "calls").exists(), "nothing ran"
    assert keeper.gate.state is GateState.LOCKED
    with (tmp_path / "box" / "master.log").open("a") as log:
        log.write(mark(2, "FINISHED", "b", 1))
    await keeper.verify(pool, {})  # type: ignore[arg-type]
    result = await keeper.run(keeper.approve(stop, "v1"))
    assert result.ok and (tmp_path / "calls").read_text() == "stop instance 9\n"
    audit = read_audit()
    events = [r["event"] for r in audit]
    assert events[:2] == ["approval refused", "approval refused"]
    assert "refused" in events and events[-1] == "executed"
    assert audit[-1]["verified"] == "1/2 loaded" and audit[-1]["basis"] == "no cell running"
    assert audit[-1]["needs"].startswith("N/N verified, or proof that no cell is running")


# -- 3. ordinary files only ------------------------------------------------------------------
async def test_a_git_folder_or_an_odd_name_is_never_pulled_and_makes_the_cell_error(
        tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box")
    git = tmp_path / "box" / "durable" / "a" / ".git"
    git.mkdir()
    (git / "config").write_text(f"[core]\n\tfsmonitor = touch {tmp_path}/PWNED\n")
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "box" / "durable" / "b" / "notes\nfake line.txt").write_text("x")
    with open(os.fsencode(tmp_path / "box" / "durable" / "b") + b"/latin1-\xe9t\xe9.txt", "wb") as odd:  # noqa: ASYNC230
        odd.write(b"not UTF-8 in its name")
    keeper = custody(inst, tmp_path)
    report = await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert report.verification is not None
    verdicts = {v.cell: v for v in report.verification.verdicts}
    assert verdicts["a"].status is CellStatus.ERROR and ".git" in verdicts["a"].reason
    assert verdicts["b"].status is CellStatus.ERROR
    assert "notes␊fake line.txt" in verdicts["b"].reason, "the newline is shown, not obeyed"
    assert "latin1-\\xe9t\\xe9.txt" in verdicts["b"].reason, "an undecodable name is shown as bytes"
    pulled = [p.name for p in keeper.dest.rglob("*")]
    assert ".git" not in pulled and "config" not in pulled and not any("\n" in n for n in pulled)
    assert keeper.gate.state is GateState.LOCKED


def test_plain_components() -> None:
    from cockpit.models.custody import plain_component, plain_path

    assert plain_component("best.pth") and plain_component("eval out $(x);'q' 显存.json")
    assert plain_path("protocol/epoch_3/metrics.json")
    for bad in (".git", ".bashrc", "..", ".", "", "a\nb", "a\x1b[2Jb", "a\\b", "x" * 256,
                "显" * 86, "bad\udcffbyte"):
        assert not plain_component(bad), bad
    assert not plain_path("a/.git/config") and not plain_path("/etc/passwd")


async def test_a_symlink_planted_in_the_pull_folder_is_never_followed(tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    dest = tmp_path / "pulled" / "v1"
    dest.mkdir(parents=True)
    (dest / "a").symlink_to(outside)
    keeper = custody(inst, tmp_path)
    report = await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert list(outside.iterdir()) == [], "nothing was written through the link"
    assert report.pull is not None and any("symlink" in o.detail for o in report.pull.failures)
    assert report.verification is not None and not report.verification.complete


# -- 5. the executor always audits and reaps ---------------------------------------------------
STATE = Manifest("box", "/d", ())


async def unchanged() -> Manifest:
    """The remote state, recomputed: the same as when it was verified."""
    return STATE


def stand_in(tmp_path: Path, name: str, body: str) -> Path:
    """A platform CLI stand-in `name` (a shell script) in its own bin folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text("#!/bin/sh\n" + body)
    (bin_dir / name).chmod(0o755)
    return bin_dir


def verified_gate(inst: Instance) -> Gate:
    gate = Gate(inst.name)
    gate.verified(Verification(inst.name, STATE.digest, (CellVerdict("a", CellStatus.OK, ended=True),),
                               1, 0.0))
    return gate


async def test_a_cli_printing_one_huge_line_is_recorded_and_reaped(tmp_path: Path) -> None:
    bin_dir = stand_in(tmp_path, "vastai", "head -c 3000000 /dev/zero | tr '\\0' x\necho; echo done\n")
    inst = Instance(name="v1", profile="vastai", host="h", instance_id="7")
    gate = verified_gate(inst)
    destroy = next(a for a in load_named("vastai").teardown.actions if a.id == "destroy")
    plan = gate.approve(render_step(inst, destroy), "v1")

    result = await execute(gate, plan, fresh_state=unchanged, cli_path=[bin_dir])
    assert result.ok and result.output.rstrip().endswith("done")
    assert len(result.output) < 300_000, "output is bounded in memory"
    assert gate.state is GateState.DONE
    line = read_audit()[-1]
    assert line["event"] == "executed" and line["exit_code"] == 0 and line["verified"] == "1/1 loaded"


async def test_a_cancelled_run_is_recorded_and_its_child_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    bin_dir = stand_in(tmp_path, "runpodctl", f"echo $$ > {pid_file}\nexec sleep 60\n")
    inst = Instance(name="r1", profile="runpod", host="h", instance_id="p1")
    gate = verified_gate(inst)
    terminate = next(a for a in load_named("runpod").teardown.actions if a.id == "terminate")
    plan = gate.approve(render_step(inst, terminate), "r1")

    task = asyncio.ensure_future(execute(gate, plan, fresh_state=unchanged, cli_path=[bin_dir]))
    async with asyncio.timeout(60):
        while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(pid_file.read_text())
    assert not os.path.exists(f"/proc/{pid}"), "the child was killed and reaped"  # noqa: ASYNC240
    line = read_audit()[-1]
    assert line["event"] == "executed" and "interrupted" in line["output_tail"]
    assert gate.state is GateState.FAILED


# -- 6. templates and secrets -------------------------------------------------------------------
def test_a_json_body_is_built_by_an_encoder(tmp_path: Path) -> None:
    terminate = load_named("lambda").teardown.actions[0]
    step = render_step(Instance(name="l1", profile="lambda", host="h", instance_id='i-mine","i-OTHER'),
                       terminate)
    body = json.loads(step.argv[-1])  # type: ignore[index]
    assert body == {"instance_ids": ['i-mine","i-OTHER']}


@pytest.mark.parametrize("template", [
    "sh -c 'echo {instance_id} > out'",
    "bash -lc 'echo {instance_id} > out'",
    "timeout 60 sh -c 'echo {instance_id} > out'",
    "env X=1 sh -c 'echo {instance_id} > out'",
    "nohup sh -ec 'echo {instance_id} > out'",
])
def test_every_shell_wrapper_gets_quoted_values(tmp_path: Path, template: str) -> None:
    from cockpit.models.profile import TeardownAction

    action = TeardownAction(id="x", label="x", stops_meter="yes", reversible=False, command=template)
    hostile = "1; touch PWNED $(touch PWNED2) `touch PWNED3`"
    step = render_step(Instance(name="v1", profile="vastai", host="h", instance_id=hostile), action)
    assert step.argv is not None
    subprocess.run(step.argv, cwd=tmp_path, check=True, timeout=60,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    assert not list(tmp_path.glob("PWNED*")), "nothing in the value ran"
    assert (tmp_path / "out").read_text() == hostile + "\n"


async def test_the_api_key_never_appears_in_any_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "lk-s3cret-0123456789"
    monkeypatch.setenv("LAMBDA_API_KEY", secret)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A stand-in curl: records its own argv and its parent's (the shell's) as the kernel shows
    # them to `ps`, and what it was given on standard input.
    (bin_dir / "curl").write_text(
        "#!/bin/bash\n"
        f"tr '\\0' ' ' < /proc/$$/cmdline > {tmp_path}/curl.cmdline\n"
        f"tr '\\0' ' ' < /proc/$PPID/cmdline > {tmp_path}/parent.cmdline\n"
        f"cat > {tmp_path}/curl.stdin\n"
        "echo '{}'\n")
    (bin_dir / "curl").chmod(0o755)
    inst = Instance(name="l1", profile="lambda", host="h", instance_id="i-123")
    gate = verified_gate(inst)
    terminate = load_named("lambda").teardown.actions[0]
    step = render_step(inst, terminate)
    assert secret not in step.command_text
    plan = gate.approve(step, "l1")

    result = await execute(gate, plan, fresh_state=unchanged, cli_path=[bin_dir])
    assert result.ok, result.output
    assert secret not in (tmp_path / "curl.cmdline").read_text()
    assert secret not in (tmp_path / "parent.cmdline").read_text()
    assert '"i-123"' in (tmp_path / "curl.cmdline").read_text()
    assert (tmp_path / "curl.stdin").read_text() == f'user = "{secret}:"\n', "it still got the key"
    assert secret not in json.dumps(read_audit())


def test_a_duplicate_instance_id_is_refused_with_file_line_field(tmp_path: Path) -> None:
    sweep = tmp_path / "dup.yaml"
    sweep.write_text("sweep: s\ninstances:\n"
                     "  - {name: a, profile: vastai, host: h1, instance_id: '42'}\n"
                     "  - name: b\n    profile: vastai\n    host: h2\n    instance_id: '42'\n")
    run = subprocess.run([sys.executable, "-m", "cockpit", "status", str(sweep)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"{sweep}:7: instances[1].instance_id: duplicate instance_id '42'" in run.stderr


# -- 7. the runbook's custody files ------------------------------------------------------------
needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the runbook's scripts are not at {SEEDS} "
                                 "(../shared is absent, as in a user's own clone)")


def runbook_manifest(durable: Path, cells: list[str]) -> None:
    roster = durable.parent / "roster.txt"
    roster.write_text("\n".join(cells) + "\n")
    subprocess.run([sys.executable, str(SEEDS / "build_pull_manifest.py"), str(durable),
                    "--run-id", "sweep-1", "--expected-roster", str(roster)], check=True, timeout=60,
                   capture_output=True)


@needs_seeds
async def test_the_runbook_manifest_is_pulled_and_cross_checked(tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box")
    durable = tmp_path / "box" / "durable"
    for cell in ("a", "b"):  # the runbook's verifier wants a model_state_dict key
        torch.save({"model_state_dict": {"w": torch.ones(4)}}, durable / cell / "best.pth")
    runbook_manifest(durable, ["a", "b"])
    keeper = custody(inst, tmp_path)
    report = await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert report.verification is not None and report.verification.complete, report.verification
    assert (keeper.dest / "PULL_MANIFEST.json").read_bytes() == (durable / "PULL_MANIFEST.json").read_bytes()
    assert report.runbook_marker is None and marker_path(keeper.dest).exists()
    assert not (keeper.dest / "PULL_VERIFIED.json").exists(), "our receipt is not in its folder"
    # The runbook's own verifier passes on our pull, and writes its marker beside the data.
    run = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(SEEDS / "verify_local.py"), str(keeper.dest), "--expect", "2"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (keeper.dest / "PULL_VERIFIED.json").exists()
    again = await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert again.verification is not None and again.verification.complete
    assert again.runbook_marker and "not trusted" in again.runbook_marker
    # A cell re-run after the runbook's manifest was built: the two disagree, N/N is blocked.
    torch.save({"w": torch.full((4,), 2.0)}, durable / "b" / "best.pth")
    changed = await keeper.verify(pool, {})  # type: ignore[arg-type]
    assert changed.verification is not None and not changed.verification.complete
    assert any("b/best.pth" in b and "differs" in b for b in changed.verification.blockers)
    assert keeper.gate.state is GateState.LOCKED and not marker_path(keeper.dest).exists()


# -- 8. the classified cause in verify --json ------------------------------------------------------
async def test_verify_json_carries_the_failed_cells_rule_class_and_excerpt(
        tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box", log=B_CRASHED)
    logs = tmp_path / "box" / "logs"
    logs.mkdir()
    (logs / "b.log").write_bytes((LOGS / "m2_cuda_oom_forward.log").read_bytes())
    inst = inst.model_copy(update={"run_logs": str(logs)})
    report = await run_verification(LocalBox(), inst, tmp_path / "pulled" / "v1", "s", pool)  # type: ignore[arg-type]
    doc = report_json(report)
    cells = {c["cell"]: c for c in doc["cells"]}  # type: ignore[attr-defined]
    b = cells["b"]
    assert b["status"] == "failed on box" and b["rule"] == "M2" and b["class"] == "real-bug"
    assert "CUDA out of memory" in b["excerpt"]
    assert cells["a"]["rule"] is None and doc["complete"] is False


def test_the_dry_run_prints_what_every_action_needs(tmp_path: Path) -> None:
    from cockpit.services.config.profiles import load_all
    from cockpit.services.custody.plan import plan_text

    for name, prof in load_all().profiles.items():
        inst = Instance(name="x1", profile=name, host="h", instance_id="42")
        text = plan_text(inst, prof, tmp_path)
        assert text.count("  needs:") == len(prof.teardown.actions), name
        for act in prof.teardown.actions:
            assert f"[{act.id}]" in text and need_of(act).value in text


async def test_a_check_that_crashes_is_that_files_failure_and_verification_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from cockpit.services.custody import verify

    real = verify.check_file

    def crashing(path: str, prefer: str | None = None) -> object:
        if path.endswith("b/best.pth"):
            raise MemoryError("the worker ran out of memory")
        return real(path, prefer)

    monkeypatch.setattr(verify, "check_file", crashing)
    inst = box_tree(tmp_path / "box")
    with ThreadPoolExecutor(2) as threads:
        report = await run_verification(LocalBox(), inst, tmp_path / "pulled" / "v1", "s", threads)
    assert report.verification is not None, report.error
    verdicts = {v.cell: v for v in report.verification.verdicts}
    assert verdicts["a"].status is CellStatus.OK
    assert verdicts["b"].status is CellStatus.ERROR and "the check itself failed" in verdicts["b"].reason
    assert not list((tmp_path / "pulled").rglob("*.tmp"))


def test_the_receipt_survives_a_lone_surrogate_and_leaves_no_temp_file(tmp_path: Path) -> None:
    from cockpit.services.custody.verify import read_marker, write_marker

    dest = tmp_path / "pulled" / "v1"
    verdict = CellVerdict("a", CellStatus.OK, metric="acc=\udcff\ud800", ended=True)
    marker = write_marker(dest, Verification("v1", "d" * 64, (verdict,), 1, 0.0), "s")
    assert marker == marker_path(dest) and read_marker(dest) is not None
    assert [p.name for p in (tmp_path / "pulled").iterdir()] == ["v1.cockpit-verified.json"]


@pytest.mark.parametrize(("doc", "prefer", "shown"), [
    ({"epoch": 3, "val_acc": 0.9123, "loss": 0.2}, None, "epoch=3 val_acc=0.9123"),
    ({"epoch": 3, "eval_loss": 0.5, "train_loss": 0.3}, None, "epoch=3 eval_loss=0.5"),
    ({"Accuracy": 0.8, "loss": 0.3}, None, "Accuracy=0.8"),
    ({"metric": "val_mIoU", "val_mIoU": 0.61, "loss": 0.3}, None, "val_mIoU=0.61"),
    ({"epoch": 1, "bleu": 31.2, "my_score": 7}, "my_score", "epoch=1 my_score=7"),
    ({"epoch": 1, "loss": 0.4}, "absent_key", "epoch=1 loss=0.4"),
    ({"epoch": 1, "flag": True, "note": "x"}, None, "epoch=1"),
])
def test_the_headline_metric_follows_the_sweep_then_the_file_then_the_preference_list(
        doc: dict[str, object], prefer: str | None, shown: str) -> None:
    from cockpit.models.custody import headline_metric

    assert headline_metric(doc, prefer) == shown


async def test_verify_shows_the_metric_the_sweep_names(tmp_path: Path, pool: object) -> None:
    inst = box_tree(tmp_path / "box").model_copy(update={"metric": "val_dice"})
    for cell, dice in (("a", 0.71), ("b", 0.73)):
        (tmp_path / "box" / "durable" / cell / "best_metrics.json").write_text(
            json.dumps({"epoch": 4, "loss": 0.5, "val_dice": dice}))
    report = await run_verification(LocalBox(), inst, tmp_path / "pulled" / "v1", "s", pool)  # type: ignore[arg-type]
    assert report.verification is not None and report.verification.complete
    assert [v.metric for v in report.verification.verdicts] == ["epoch=4 val_dice=0.71",
                                                                "epoch=4 val_dice=0.73"]
