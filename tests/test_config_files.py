"""Shipped profiles, the profile and sweep schemas, and their `file:line: field: message` errors.

Broken files are real profiles (or small sweeps) with one deliberate mistake; the expected line
is always computed from the text written, never hard-coded.
"""

from __future__ import annotations

import os
import re
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.models.profile import TEMPLATE_FIELDS, Profile
from cockpit.services.config.profiles import load_all, load_profile, profile_paths, profiles_dir
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.config.yamlfile import ConfigError, Problem
from cockpit.services.transport.probe import watched_mounts

REPO = Path(__file__).resolve().parents[1]

EXPECTED_PROFILES = frozenset({
    "autodl", "matpool", "gpushare", "featurize", "lanrui", "generic-ssh", "lambda",
    "paperspace", "runpod", "vastai", "slurm", "kubernetes", "local",
})

DUMMY_TEMPLATE_VALUES = {
    "instance_id": "i-0123", "host": "box-1.example", "name": "proj-a1", "region": "west-b",
}


# -- helpers ---------------------------------------------------------------------------------


def line_of(text: str, pattern: str) -> int:
    """1-based number of the only line of `text` matching the regex `pattern`."""
    hits = [n for n, line in enumerate(text.splitlines(), start=1) if re.search(pattern, line)]
    assert len(hits) == 1, f"{pattern!r} matches lines {hits}, expected exactly one"
    return hits[0]


def edit(text: str, old: str, new: str) -> str:
    """Replace the single occurrence of `old` (fails loudly if the fixture text drifted)."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def shipped_text(name: str) -> str:
    return (profiles_dir() / f"{name}.yaml").read_text(encoding="utf-8")


def write_profile(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problem_at(problems: tuple[Problem, ...], line: int, field: str) -> Problem:
    """The problem reported for `field` at `line`; fails listing what was reported instead."""
    for problem in problems:
        if problem.line == line and problem.field == field:
            return problem
    raise AssertionError(f"no problem at line {line} for {field!r}; got: {[str(p) for p in problems]}")


@dataclass(frozen=True)
class Ran:
    """One finished `python -m cockpit ...`."""

    returncode: int
    stdout: str
    stderr: str


def run_cli_batch(jobs: dict[str, tuple[str, ...]], cwd: Path) -> dict[str, Ran]:
    """Run every `cockpit` command line in `jobs` as its own fresh process, concurrently."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["HOME"] = str(cwd / "home")
    env["COCKPIT_STATE_DIR"] = str(cwd / "state")
    env.pop("SSH_AUTH_SOCK", None)
    procs = {
        key: subprocess.Popen([sys.executable, "-m", "cockpit", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env, cwd=cwd)
        for key, args in jobs.items()
    }
    results: dict[str, Ran] = {}
    try:
        for key, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=60)
            results[key] = Ran(proc.returncode, stdout, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


@pytest.fixture(scope="module")
def shipped() -> dict[str, Profile]:
    loaded = load_all()
    assert not loaded.problems, [str(p) for p in loaded.problems]
    return loaded.profiles


# -- shipped profiles ------------------------------------------------------------------------


def test_exactly_the_expected_profiles_ship_and_all_load(shipped: dict[str, Profile]) -> None:
    assert {p.stem for p in profile_paths()} == EXPECTED_PROFILES
    assert set(shipped) == EXPECTED_PROFILES


@pytest.mark.parametrize("name", sorted(EXPECTED_PROFILES))
def test_profile_shape(name: str, shipped: dict[str, Profile]) -> None:
    profile = shipped[name]
    assert profile.platform == name
    assert len(profile.storage.tiers) >= 1
    for action in profile.teardown.actions:
        assert action.command or action.manual_steps, f"{name}: {action.id} cannot be run"
    for group, month in profile.stamps().items():
        assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", month), (group, month)


def test_autodl_release_clock_and_inode_cap(shipped: dict[str, Profile]) -> None:
    autodl = shipped["autodl"]
    clocks = {c.id: c for c in autodl.danger_clocks.clocks}
    assert clocks["auto_release"].duration == "15d"
    assert clocks["auto_release"].seconds == 15 * 86400
    durable = [t for t in autodl.storage.tiers if t.durable]
    assert [t.path for t in durable] == ["/root/autodl-fs"]
    assert all(t.inode_cap is not None and t.inode_cap > 0 for t in durable)
    assert autodl.meter.irreversible is False  # 关机 is the safe verb, 释放 the irreversible one
    release = next(a for a in autodl.teardown.actions if a.id == "release")
    assert release.reversible is False


def test_vastai_destroy_is_irreversible_and_stop_keeps_billing(shipped: dict[str, Profile]) -> None:
    vast = shipped["vastai"]
    assert vast.meter.stop_verb == "destroy"
    assert vast.meter.irreversible is True
    actions = {a.id: a for a in vast.teardown.actions}
    assert actions["destroy"].reversible is False
    assert actions["destroy"].stops_meter == "yes"
    assert actions["stop"].stops_meter != "yes"
    assert vast.billing.stopped_still_bills is True


def test_lambda_ssh_user_is_ubuntu(shipped: dict[str, Profile]) -> None:
    assert shipped["lambda"].ssh.user == "ubuntu"


def test_command_templates_use_allowed_fields_and_render(shipped: dict[str, Profile]) -> None:
    commands = [(p.platform, a.id, a.command) for p in shipped.values()
                for a in p.teardown.actions if a.command is not None]
    assert commands, "no shipped profile has a command template"
    for platform, action, command in commands:
        fields = {name for _, name, spec, _ in string.Formatter().parse(command) if name is not None}
        assert fields <= TEMPLATE_FIELDS, (platform, action, fields)
        rendered = command.format(**DUMMY_TEMPLATE_VALUES)
        for field in fields:
            assert DUMMY_TEMPLATE_VALUES[field] in rendered, (platform, action)
    lambda_terminate = next(c for p, _, c in commands if p == "lambda")
    assert '{"instance_ids":["i-0123"]}' in lambda_terminate.format(**DUMMY_TEMPLATE_VALUES)


# -- broken profiles -------------------------------------------------------------------------

# (case, platform, old, new, needle on the reported line, field, message part). A missing key is
# reported on its parent's line; a model-level check (the template) on the action's `- id:` line.
BROKEN_PROFILES = [
    ("wrong-type", "autodl",
     "      survives_stop: true\n      survives_destroy: true\n",
     '      survives_stop: "yes"\n      survives_destroy: true\n',
     'survives_stop: "yes"', "storage.tiers[2].survives_stop", "valid boolean"),
    ("unknown-key", "autodl",
     "      survives_destroy: true\n", "      survives_destory: true\n",
     "survives_destory", "storage.tiers[2].survives_destory", "unknown key"),
    ("missing-field", "autodl", "  stop_verb: 关机\n", "",
     "^meter:", "meter.stop_verb", "required field is missing"),
    ("duplicate-key", "autodl", "  stop_verb: 关机\n", "  stop_verb: 关机\n  stop_verb: 释放\n",
     "stop_verb: 释放", "meter.stop_verb", "duplicate key"),
    ("bad-month", "autodl", 'meter:\n  verified: "2026-06"', 'meter:\n  verified: "2026-13"',
     '"2026-13"', "meter.verified", "YYYY-MM"),
    ("bad-duration", "autodl", "duration: 15d", "duration: 15 days",
     "duration: 15 days", "danger_clocks.clocks[0].duration", "expected a duration"),
    ("bad-template", "vastai", "vastai destroy instance {instance_id}", "vastai destroy instance {iid}",
     "- id: destroy", "teardown.actions[1]", "unknown field(s) ['iid']"),
]


@pytest.mark.parametrize(("case", "platform", "old", "new", "needle", "field", "message"), BROKEN_PROFILES,
                         ids=[c[0] for c in BROKEN_PROFILES])
def test_broken_profile_names_file_line_and_field(
    tmp_path: Path, case: str, platform: str, old: str, new: str, needle: str, field: str, message: str,
) -> None:
    text = edit(shipped_text(platform), old, new)
    path = write_profile(tmp_path, platform, text)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    line = line_of(text, needle)
    problem = problem_at(info.value.problems, line, field)
    assert message in problem.message
    assert f"{path}:{line}: {field}: " in str(info.value)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("  stop_verb: 关机\n", "    stop_verb: 关机\n", "    stop_verb: 关机"),  # over-indented
        ("\ndetach:\n", "\ndetach:\n\tprimitive: tmux\n", "\tprimitive"),  # a tab
        ("  keeps: [/root/autodl-fs]\n      destroys: [/, /root/autodl-tmp]\n",
         "  keeps: [/root/autodl-fs\n      destroys: [/, /root/autodl-tmp]\n",
         "      destroys: [/, /root/autodl-tmp]"),  # unclosed [
    ],
    ids=["indentation", "tab", "unclosed-flow-sequence"],
)
def test_yaml_syntax_error_has_line(tmp_path: Path, old: str, new: str, needle: str) -> None:
    text = shipped_text("autodl")
    broken = edit(text, old, new)
    path = write_profile(tmp_path, "autodl", broken)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    # For the unclosed `[` the parser notices on the first line that cannot continue the sequence.
    line = next(n for n, line in enumerate(broken.splitlines(), start=1) if needle in line)
    assert str(info.value).startswith(f"{path}:{line}: YAML syntax error"), str(info.value)


def test_unclosed_quote_is_a_syntax_error_with_a_line(tmp_path: Path) -> None:
    text = shipped_text("autodl")
    last = text.rstrip("\n").splitlines()[-1]
    assert last.endswith('"')
    broken = text.rstrip("\n")[:-1] + "\n"
    path = write_profile(tmp_path, "autodl", broken)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    match = re.match(re.escape(str(path)) + r":(\d+): YAML syntax error", str(info.value))
    assert match, str(info.value)
    assert int(match.group(1)) >= line_of(broken, re.escape(last[:-1]))


def test_unclosed_quote_points_at_the_opening_quote(tmp_path: Path) -> None:
    path = tmp_path / "autodl.yaml"
    path.write_text('platform: autodl\ndisplay_name: "AutoDL\nkind: ssh-rental\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:2: YAML syntax error")


def test_platform_must_match_file_name(tmp_path: Path) -> None:
    text = edit(shipped_text("autodl"), "platform: autodl\n", "platform: matpool\n")
    path = write_profile(tmp_path, "autodl", text)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    problem_at(info.value.problems, line_of(text, "platform: matpool"), "platform")


def test_nested_template_field_is_rejected(tmp_path: Path) -> None:
    text = edit(shipped_text("vastai"), "vastai destroy instance {instance_id}",
                "vastai destroy instance {instance_id:{foo}}")
    with pytest.raises(ConfigError):
        load_profile(write_profile(tmp_path, "vastai", text))


# -- sweep files -----------------------------------------------------------------------------

GOOD_SWEEP = """\
# a minimal sweep
sweep: t1
instances:
  - name: a1
    profile: autodl
    host: autodl-proj-1
  - name: l1
    profile: lambda
    host: lambda-1
"""


def test_minimal_sweep_loads_with_profile_defaults(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(GOOD_SWEEP, encoding="utf-8")
    loaded = load_sweep(path)
    sweep = loaded.sweep
    assert sweep.sweep == "t1"
    assert (sweep.interval, sweep.pull_dir) == ("2s", "./pulled")
    assert sweep.ssh.connect_timeout == "10s" and sweep.ssh.keepalive_count_max == 1
    assert sweep.ssh.keepalive_interval == "3s"
    assert set(loaded.profiles) == {"autodl", "lambda"}
    assert loaded.directory == tmp_path.resolve()
    a1 = sweep.instance("a1")
    assert a1.stall_after == "30m" and a1.port is None and a1.mounts == {}
    assert watched_mounts(a1, loaded.profiles["autodl"]) == ["/", "/root/autodl-tmp", "/root/autodl-fs"]
    # Lambda's /lambda/nfs/<name> is a template, not a mount point, until the sweep names it.
    l1 = sweep.instance("l1")
    assert all("<" not in m for m in watched_mounts(l1, loaded.profiles["lambda"]))


def test_sweep_mounts_override_a_profile_tier(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(edit(GOOD_SWEEP, "host: autodl-proj-1\n",
                         "host: autodl-proj-1\n    mounts:\n      data: /mnt/big\n"), encoding="utf-8")
    loaded = load_sweep(path)
    mounts = watched_mounts(loaded.sweep.instance("a1"), loaded.profiles["autodl"])
    assert mounts == ["/", "/mnt/big", "/root/autodl-fs"]


def sweep_text(*extra_lines: str, profile: str = "autodl") -> str:
    body = "".join(f"    {line}\n" for line in extra_lines)
    return f"sweep: t1\ninstances:\n  - name: a1\n    profile: {profile}\n    host: box\n{body}"


DUPLICATE_NAMES = sweep_text() + "  - name: a1\n    profile: autodl\n    host: box2\n"

# (case, file text, regex for the reported line, field, message part)
BAD_SWEEPS = [
    ("unknown-key", sweep_text("queue_lgo: /root/q.txt"), "queue_lgo", "instances[0].queue_lgo",
     "unknown key"),
    ("wrong-type", sweep_text('price_per_hour: "cheap"'), "cheap", "instances[0].price_per_hour",
     "valid number"),
    ("missing-instances", "sweep: t1\npull_dir: ./p\n", "^sweep:", "instances",
     "required field is missing"),
    ("unknown-profile", sweep_text(profile="nosuch"), "nosuch", "instances[0].profile",
     "no profile 'nosuch' (known: " + ", ".join(sorted(EXPECTED_PROFILES)) + ")"),
    ("unknown-tier", sweep_text("mounts:", "  scratch: /mnt/x"), "scratch",
     "instances[0].mounts.scratch", "has no tier 'scratch' (tiers: system, data, shared)"),
    ("newline-in-path", sweep_text('queue: "a\\nb"'), "queue:", "instances[0].queue",
     "control characters"),
    ("bad-duration", sweep_text("stall_after: 5 min"), "stall_after", "instances[0].stall_after",
     "expected a duration"),
    ("duplicate-key", sweep_text("port: 22", "port: 2222"), "2222", "instances[0].port", "duplicate key"),
]

# (case, file bytes, what follows the file name in the message)
UNLOADABLE_SWEEPS = [
    ("empty", b"", ":1: the file is empty"),
    ("only-comments", b"# nothing here\n", ":1: the file is empty"),
    ("a-list", b"- a1\n- a2\n", ":1: a sweep file must be a mapping of keys"),
    ("not-utf8", b"sweep: t\xff\xfe1\n", ": cannot read: "),
    ("yaml-syntax", b"sweep: t1\ninstances: [\n", r":\d+: YAML syntax error"),
    ("duplicate-names", DUPLICATE_NAMES.encode(), r":\d+: instances\[1\]\.name: duplicate name 'a1'"),
    ("missing-file", None, ": file not found"),
    # An instance name becomes a tmux session, a file and a folder name: metacharacters are refused.
    ("hostile-name", b'sweep: t1\ninstances:\n  - name: "a1; touch x $(id)"\n    profile: autodl\n'
     b"    host: box\n", r":3: instances\[0\]\.name: String should match pattern"),
]


def broken_profile_dir() -> dict[str, str]:
    """A folder for `profiles check --dir`: one good profile and two broken ones."""
    return {
        "lambda": shipped_text("lambda"),
        "autodl": edit(shipped_text("autodl"), "duration: 15d", "duration: 15 days"),
        "vastai": edit(shipped_text("vastai"), "  stop_verb: destroy\n",
                       "  stop_verb: destroy\n   oops: 1\n"),
    }


# `python -m cockpit status` starts asyncssh and friends (~0.5 s of CPU each), so every bad
# sweep goes through cli.main in-process and these few also through a fresh interpreter.
STATUS_IN_SUBPROCESS = frozenset({"unknown-key", "unknown-profile", "not-utf8", "missing-file", "empty"})


@dataclass(frozen=True)
class Batch:
    root: Path
    runs: dict[str, Ran]
    files: dict[str, Path]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Batch:
    """Every CLI case of this module, each in a fresh interpreter, run concurrently."""
    root = tmp_path_factory.mktemp("cli")
    files: dict[str, Path] = {}
    jobs: dict[str, tuple[str, ...]] = {
        "list": ("profiles", "list"),
        "show-autodl": ("profiles", "show", "autodl"),
        "show-unknown": ("profiles", "show", "nosuch"),
        "check-fresh": ("profiles", "check", "--today", "2026-07", "--max-age-months", "6"),
        "check-stale": ("profiles", "check", "--today", "2027-06", "--max-age-months", "6"),
        "check-bad-today": ("profiles", "check", "--today", "2026-13"),
        "check-missing-dir": ("profiles", "check", "--dir", str(root / "no-such-dir")),
    }
    folder = root / "broken-profiles"
    for name, text in broken_profile_dir().items():
        files[f"profile-{name}"] = write_profile(folder, name, text)
    jobs["check-broken-dir"] = ("profiles", "check", "--dir", str(folder))
    sweeps: list[tuple[str, bytes | None]] = [(case, text.encode()) for case, text, *_ in BAD_SWEEPS]
    sweeps += [(case, content) for case, content, _ in UNLOADABLE_SWEEPS]
    for case, content in sweeps:
        path = root / case / "bad.yaml"
        path.parent.mkdir()
        if content is not None:
            path.write_bytes(content)
        files[case] = path
        if case in STATUS_IN_SUBPROCESS:
            jobs[f"status-{case}"] = ("status", str(path))
    return Batch(root, run_cli_batch(jobs, root), files)


def run_status(path: Path, capsys: pytest.CaptureFixture[str]) -> Ran:
    """`cockpit status PATH` in this process (an uncaught exception fails the test)."""
    code = main(["status", str(path)])
    out, err = capsys.readouterr()
    return Ran(code, out, err)


# -- the profiles CLI ------------------------------------------------------------------------


def test_cli_profiles_list(cli: Batch) -> None:
    ran = cli.runs["list"]
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) == len(EXPECTED_PROFILES)
    assert {line.split()[0] for line in lines} == EXPECTED_PROFILES
    assert ran.stderr == ""


def test_cli_profiles_show_autodl(cli: Batch) -> None:
    ran = cli.runs["show-autodl"]
    assert ran.returncode == 0, ran.stderr
    assert "id: auto_release" in ran.stdout
    assert re.search(r"^\s+duration: 15d$", ran.stdout, re.MULTILINE)


def test_cli_profiles_show_unknown(cli: Batch) -> None:
    ran = cli.runs["show-unknown"]
    assert ran.returncode == 2
    assert "no profile 'nosuch'" in ran.stderr and "autodl" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_cli_profiles_check_fresh(cli: Batch) -> None:
    ran = cli.runs["check-fresh"]
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"{len(EXPECTED_PROFILES)} profile(s) valid" in ran.stdout
    assert "STALE" not in ran.stdout


def test_cli_profiles_check_stale(cli: Batch) -> None:
    ran = cli.runs["check-stale"]
    assert ran.returncode == 1, ran.stdout + ran.stderr
    stale = [line for line in ran.stdout.splitlines() if line.startswith("STALE ")]
    assert stale
    assert any(line.startswith("STALE autodl.storage: verified 2026-06") for line in stale)


def test_cli_profiles_check_bad_today(cli: Batch) -> None:
    ran = cli.runs["check-bad-today"]
    assert ran.returncode == 2
    assert "2026-13" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_cli_profiles_check_broken_dir(cli: Batch) -> None:
    ran = cli.runs["check-broken-dir"]
    texts = broken_profile_dir()
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
    autodl_line = line_of(texts["autodl"], "duration: 15 days")
    assert f"{cli.files['profile-autodl']}:{autodl_line}: danger_clocks.clocks[0].duration:" in ran.stderr
    vast_line = line_of(texts["vastai"], "oops: 1")
    assert f"{cli.files['profile-vastai']}:{vast_line}: YAML syntax error" in ran.stderr
    assert "lambda" not in ran.stderr


def test_cli_profiles_check_missing_dir(cli: Batch) -> None:
    assert cli.runs["check-missing-dir"].returncode == 2


# -- the status CLI on bad sweep files -------------------------------------------------------


@pytest.mark.parametrize(("case", "text", "pattern", "field", "message"), BAD_SWEEPS,
                         ids=[c[0] for c in BAD_SWEEPS])
def test_bad_sweep(
    cli: Batch, capsys: pytest.CaptureFixture[str], case: str, text: str, pattern: str, field: str,
    message: str,
) -> None:
    path = cli.files[case]
    line = line_of(text, pattern)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert message in problem_at(info.value.problems, line, field).message
    runs = [run_status(path, capsys)]
    if case in STATUS_IN_SUBPROCESS:
        runs.append(cli.runs[f"status-{case}"])
    for ran in runs:
        assert ran.returncode == 2, ran.stdout + ran.stderr
        assert "Traceback" not in ran.stderr
        assert f"{path}:{line}: {field}: " in ran.stderr
        assert message in ran.stderr
        assert ran.stdout == ""


@pytest.mark.parametrize(("case", "content", "message"), UNLOADABLE_SWEEPS,
                         ids=[c[0] for c in UNLOADABLE_SWEEPS])
def test_unloadable_sweep(
    cli: Batch, capsys: pytest.CaptureFixture[str], case: str, content: bytes | None, message: str,
) -> None:
    path = cli.files[case]
    with pytest.raises(ConfigError):
        load_sweep(path)
    runs = [run_status(path, capsys)]
    if case in STATUS_IN_SUBPROCESS:
        runs.append(cli.runs[f"status-{case}"])
    for ran in runs:
        assert ran.returncode == 2, ran.stdout + ran.stderr
        assert "Traceback" not in ran.stderr
        assert re.search(re.escape(str(path)) + message, ran.stderr), ran.stderr
        assert ran.stdout == ""


def test_duplicate_instance_names_point_at_the_duplicate(cli: Batch) -> None:
    with pytest.raises(ConfigError) as info:
        load_sweep(cli.files["duplicate-names"])
    second = [n for n, line in enumerate(DUPLICATE_NAMES.splitlines(), start=1) if "name: a1" in line][1]
    problem_at(info.value.problems, second, "instances[1].name")


def test_one_bad_instance_gives_one_problem(cli: Batch) -> None:
    with pytest.raises(ConfigError) as info:
        load_sweep(cli.files["unknown-key"])
    assert [p.field for p in info.value.problems] == ["instances[0].queue_lgo"]


def test_merge_key_override_is_not_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("sweep: t1\ninstances:\n  - &first\n    name: a1\n    profile: autodl\n    host: box1\n"
                    "  - <<: *first\n    name: a2\n    host: box2\n", encoding="utf-8")
    sweep = load_sweep(path).sweep
    assert [(i.name, i.host) for i in sweep.instances] == [("a1", "box1"), ("a2", "box2")]


def test_models_reject_duplicates_when_built_without_the_loader() -> None:
    """The loader reports duplicates at their line; the models still refuse them on their own."""
    from pydantic import ValidationError

    from cockpit.models.sweep import Sweep

    inst = {"name": "a1", "profile": "generic-ssh", "host": "h"}
    with pytest.raises(ValidationError, match=r"duplicate instance name\(s\): a1"):
        Sweep.model_validate({"sweep": "s", "instances": (inst, dict(inst))})
    with pytest.raises(ValidationError, match="list at least one instance"):
        Sweep.model_validate({"sweep": "s", "instances": ()})
