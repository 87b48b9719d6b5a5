"""The failure rulebook: signatures with stable catalog ids, a class, and one remediation.

Rules are data (`cockpit/data/rules.yaml`, plus an optional user file), validated strictly
on load. Every pattern is compiled with RE2, not Python's `re`: RE2 runs the whole rulebook
as one automaton in time linear in the log size, so a 1 GB log is scanned at hundreds of
MB/s and a user's careless pattern (`(a+)+$`) can never hang the cockpit on a 10 MB line.
The price is RE2 syntax: no back-references and no look-around, checked at load time.

Classes follow platform-facts §3.1 (probabilistic, disk-full, real-bug) plus host-oom,
hardware, environment and ops. `retry` says whether re-running the *identical* config is
allowed; the remediation is the one fixed thing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from cockpit.models import regex

RuleClass = Literal[
    "probabilistic", "disk-full", "real-bug", "host-oom", "hardware", "environment", "ops"]
SEVERE_CLASSES: frozenset[str] = frozenset({"real-bug", "host-oom", "hardware", "disk-full"})
"""Classes that make `cockpit classify` exit 1: the run is lost or the box is unsafe."""

Tier = Literal["scheduler", "signal", "kernel", "text", "symptom"]
TIERS: tuple[str, ...] = ("scheduler", "signal", "kernel", "text", "symptom")
"""Evidence order, strongest first (issue 17). A scheduler's state with a reason (Slurm
oom-kill, time limit, preemption, eviction) explains the signals that follow it; a signal a
launcher or the shell reports (SIGKILL, SIGTERM, SIGHUP, a cancelled step) outranks what the
kernel or the GPU driver logged, which outranks what the program printed; a symptom (an NCCL
watchdog firing because a peer died, a launcher's `ChildFailedError` wrapper, a Ctrl-C after a
hang) names the run only when nothing else does."""

def _check_pattern(value: str) -> str:
    problem = regex.syntax_error(value)
    if problem is not None:
        raise ValueError(f"{value!r} is not a valid RE2 pattern: {problem} (RE2 has no "
                         f"back-references or look-around)")
    return value


RuleId = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")]
Pattern = Annotated[str, Field(min_length=1), AfterValidator(_check_pattern)]


class RuleSpec(BaseModel):
    """One rule as written in a rule file."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: RuleId
    title: Annotated[str, Field(min_length=1, max_length=80)]
    klass: RuleClass = Field(alias="class")
    retry: bool
    """Whether a retry with the identical config is allowed (§3.1: never retry blindly)."""
    remediation: Annotated[str, Field(min_length=1)]
    patterns: tuple[Pattern, ...] = ()
    """Any of these, searched in one line, triggers the rule."""
    unless: tuple[Pattern, ...] = ()
    """A line that also matches one of these is not this failure."""
    context: tuple[Pattern, ...] = ()
    """Inside a traceback, one of these must match a frame or message line as well (e.g.
    `torch/optim/` tells an OOM in the optimizer step from one in the forward pass)."""
    scope: Literal["line", "traceback", "cut"] = "line"
    """`traceback`: the rule only names the exception line that ends a Python traceback
    (`KeyError: ...` alone on a line elsewhere is just text). `cut`: the rule only names a
    traceback that the log ends inside, before its exception line (a pasted excerpt cut short,
    or a process killed while printing it); its patterns are searched in the innermost frame
    shown, its `File` line and its code line (`Rulebook.match_cut`)."""
    exit_codes: tuple[int, ...] = ()
    """A cell that FINISHED with one of these codes and no matching log line gets this rule."""
    tier: Tier = "text"
    """Where the evidence comes from (see `TIERS`): picks a log's primary cause when it holds
    several events (`cockpit.models.classify.primary_cause`)."""
    warning: bool = False
    """The failure is one that libraries report as a Python warning (CUDA capability not
    supported, driver too old, not enough disk space): the rule matches even on a line that
    the `ignore` patterns drop as a handled warning."""
    source: str = ""
    """Where the fact comes from (catalog section), for people maintaining the rulebook."""

    @model_validator(mode="after")
    def _has_trigger(self) -> RuleSpec:
        if not self.patterns and not self.exit_codes:
            raise ValueError("a rule needs at least one of patterns or exit_codes")
        return self


class RuleFile(BaseModel):
    """A rule file: `ignore` patterns plus the rules, most specific first."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    version: Literal[1]
    ignore: tuple[Pattern, ...] = ()
    """Lines matching one of these are never failures (handled warnings and the like)."""
    rules: tuple[RuleSpec, ...]


@dataclass(frozen=True)
class Rule:
    """A compiled rule."""

    spec: RuleSpec
    order: int
    matcher: regex.Regex | None
    unless: regex.Regex | None
    context: regex.Regex | None

    @property
    def id(self) -> str:
        """The stable catalog id (U10, M2, MN3, ...)."""
        return self.spec.id

    @property
    def klass(self) -> str:
        """The failure class."""
        return self.spec.klass

    @property
    def remediation(self) -> str:
        """The one fixed thing to do."""
        return self.spec.remediation

    @property
    def severe(self) -> bool:
        """Whether this class means the run is lost or the box unsafe."""
        return self.spec.klass in SEVERE_CLASSES

    @property
    def rank(self) -> int:
        """The rule's tier as a number: lower is stronger evidence (`TIERS`)."""
        return TIERS.index(self.spec.tier)


PROCESS_TAGS = (r'(?:[ \t]*\d{1,5}: |\[(?:rank|default)\d+\]: ?|\([\w.:-]* ?pid=\d+[^)\n]*\) '
                r'|\[\d+,\d+\]<std(?:out|err)>: ?)+')
"""The tags launchers put before each line of one process, differing from process to process:
`srun -l`'s task label (` 2: `), torchrun's rank (`[rank5]: `, `--tee`'s `[default0]:`), a Ray
worker's (`(RolloutWorker pid=155213) `), mpirun's `--tag-output` (`[1,0]<stderr>:`). Valid in
both RE2 and Python `re`."""
LINE_STAMP = (r'(?:\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?'
              r'|\[\d\d:\d\d:\d\d(?:[.,]\d+)?\]):? ')
"""A timestamp a log collector puts before every line, differing line by line (`kubectl logs
--timestamps`, `docker logs -t`, Jenkins' `[2025-04-08T07:03:00.638Z] `, TensorFlow's
`2022-12-08 11:37:51.345475: `, a notebook runner's `[01:17:10.938]: `). Valid in both RE2 and
Python `re`."""
LEVEL_TAG = r'\[(?:INFO|WARN(?:ING)?|ERROR|CRITICAL|FATAL|DEBUG)\] '
"""A logger's level tag that a tool re-logging a child's stderr puts before each of its lines
(`[2025-03-07 02:53:29] [INFO] File "..."`)."""
TRACEBACK = (r'(?:Traceback \(most recent call last\)|^(?:' + LINE_STAMP + r')?(?:' + LEVEL_TAG
             + r')?(?:' + PROCESS_TAGS + r')?\s*File "[^"]*", line \d+, in )')
"""Where a Python traceback may start: its header (also as rich draws it, in a box), or (in
an excerpt that lost the header, as pasted logs often do) its first `File "...", line N, in f`
frame, also behind a line stamp, a logger's level tag or a process's tags (Ray prints an
actor's traceback without a header, each line behind `(Actor pid=N) `)."""


class Rulebook:
    """Rules in priority order, compiled into one RE2 automaton for the scan.

    The scan looks for *any* rule pattern or a traceback header; only the matched line is
    then tested rule by rule, so the cost of a clean log does not grow with the rule count.
    """

    def __init__(self, rules: Sequence[RuleSpec], ignore: Sequence[str] = ()) -> None:
        compiled: list[Rule] = []
        for order, spec in enumerate(rules):
            compiled.append(Rule(
                spec, order,
                regex.compile_any(spec.patterns) if spec.patterns else None,
                regex.compile_any(spec.unless) if spec.unless else None,
                regex.compile_any(spec.context) if spec.context else None,
            ))
        self.rules: tuple[Rule, ...] = tuple(compiled)
        self.by_id: dict[str, Rule] = {rule.id: rule for rule in compiled}
        self.ignore = regex.compile_any(ignore) if ignore else None
        every = [p for spec in rules if spec.scope == "line" for p in spec.patterns]
        self.scanner = regex.compile_any([*every, TRACEBACK], multiline=True)

    def __len__(self) -> int:
        return len(self.rules)

    def match_line(self, line: bytes, *, traceback: Sequence[bytes] | None = None) -> Rule | None:
        """The first rule that matches `line`, honouring `unless`, `context` and `ignore`.

        `traceback` holds the traceback's lines when `line` is its exception line; rules
        with a `context` or the `traceback` scope match only then.
        """
        hush = self.ignore.search(line) if self.ignore is not None else None
        for rule in self.rules:
            if rule.matcher is None:
                continue
            found = rule.matcher.search(line)
            if found is None:
                continue
            if hush is not None and not rule.spec.warning and found.start() >= hush.start():
                # Inside a handled warning. Text BEFORE the warning's marker is another
                # stream's line that lost its newline (an error glued to a UserWarning).
                continue
            if rule.spec.scope == "cut" or (rule.spec.scope == "traceback" and traceback is None):
                continue
            if rule.unless is not None and rule.unless.search(line):
                continue
            if rule.context is not None and not any(
                    rule.context.search(other) for other in traceback or ()):
                continue
            return rule
        return None

    def match_cut(self, frame: bytes, code: bytes) -> Rule | None:
        """The first `cut` rule for a traceback the log ends inside, before its exception
        line: the innermost frame shown (`frame`, its `File "..."` line, and `code`, the
        source line under it) says where the program was, which is all the evidence left
        (inside a network call, inside an import, or anywhere else)."""
        for rule in self.rules:
            if rule.spec.scope != "cut" or rule.matcher is None:
                continue
            if rule.matcher.search(frame) is None and rule.matcher.search(code) is None:
                continue
            if rule.unless is not None and (rule.unless.search(frame) or rule.unless.search(code)):
                continue
            return rule
        return None

    def for_exit(self, code: int, runner_known: bool = False) -> Rule | None:
        """The rule that explains a bare exit code, if any.

        Codes from 126 up are conventions of the shell and the kernel (126/127: cannot run /
        not found; 128+N: killed by signal N) and mean the same whoever ran the cell. A lower
        code means what the program that exited chose: 2 is argparse's usage error as often
        as a durable-sync gate, 3 any script's `sys.exit(3)`. Those classify only when the
        runner that produced them is known to be ours (`runner_known`: the cockpit's own
        run_one.sh, e.g. under Slurm); otherwise the exit stays unclassified ("read the log").
        """
        if code < SHELL_CODES and not runner_known:
            return None
        return next((rule for rule in self.rules if code in rule.spec.exit_codes), None)


SHELL_CODES = 126
"""Exit codes from here up are the shell's and the kernel's (see `Rulebook.for_exit`)."""


def merge(shipped: RuleFile, *extra: RuleFile) -> Rulebook:
    """User rules come first (they know their code); a user rule with a shipped id replaces it."""
    user_rules = [rule for f in extra for rule in f.rules]
    replaced = {rule.id for rule in user_rules}
    rules = [*user_rules, *(r for r in shipped.rules if r.id not in replaced)]
    ignore = [*shipped.ignore, *(p for f in extra for p in f.ignore)]
    return Rulebook(rules, ignore)


def parse_rule_file(data: Any) -> RuleFile:
    """Validate plain data as a rule file (raises pydantic's ValidationError)."""
    return RuleFile.model_validate(data)
