"""`cockpit classify`: classify whole log files offline, with the same engine as the TUI.

Files are read in 16 MiB blocks, so a 10 GB log needs no more memory than one block and
the unfinished line the classifier carries. Findings are collapsed like the failure log
does (same event key: one row, with a count and the first line).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cockpit.models.classify import Finding, LogClassifier, primary_cause
from cockpit.models.rules import Rulebook
from cockpit.models.text import visible

BLOCK = 16 << 20


@dataclass
class Event:
    """Findings of one kind in one file: the first one, and how many there were."""

    first: Finding
    count: int = 1


@dataclass
class FileReport:
    """What one input yielded, or why it could not be read."""

    path: str
    bytes_read: int = 0
    events: dict[str, Event] = field(default_factory=dict)
    error: str = ""

    @property
    def severe(self) -> bool:
        """Whether a run-ending class (real-bug, host-oom, hardware, disk-full) was found."""
        return any(e.first.rule.severe for e in self.events.values())

    @property
    def cause(self) -> Finding | None:
        """The event that names the log, in evidence order (`primary_cause`): what the
        scheduler said before what the driver logged before what the program printed."""
        return primary_cause([e.first for e in self.events.values()])

    def add(self, findings: Iterable[Finding]) -> None:
        """Collapse findings into events."""
        for finding in findings:
            event = self.events.get(finding.key)
            if event is None:
                self.events[finding.key] = Event(finding)
            else:
                event.count += 1


def classify_stream(rulebook: Rulebook, stream: IO[bytes], report: FileReport) -> None:
    """Feed `stream` through one classifier, block by block."""
    classifier = LogClassifier(rulebook)
    while block := stream.read(BLOCK):
        report.bytes_read += len(block)
        report.add(classifier.feed(block))
    report.add(classifier.finish())


def classify_paths(rulebook: Rulebook, paths: Iterable[str], stdin: IO[bytes]) -> list[FileReport]:
    """Classify each path (`-` is standard input); an unreadable one gets an error, not a crash."""
    reports = []
    for name in paths:
        report = FileReport(name)
        reports.append(report)
        if name == "-":
            classify_stream(rulebook, stdin, report)
            continue
        path = Path(name)
        try:
            with path.open("rb") as stream:
                classify_stream(rulebook, stream, report)
        except IsADirectoryError:
            report.error = "is a directory, not a log file"
        except FileNotFoundError:
            report.error = "no such file"
        except OSError as exc:
            report.error = f"cannot read: {exc.strerror or exc}"
    return reports


def report_text(reports: list[FileReport]) -> str:
    """One block per event: where, which rule and class, the excerpt, the fix.

    Each line passes `visible()`: the excerpt and frame are the log's own text, the path may
    be a name the box chose, and extra rule files are the user's but cheap to treat alike."""
    out: list[str] = []
    for report in reports:
        if report.error:
            continue
        path = visible(report.path)
        if not report.events:
            out.append(f"{path}: no failure found ({report.bytes_read} bytes)\n")
            continue
        for event in sorted(report.events.values(), key=lambda e: e.first.line_no):
            f = event.first
            times = f" x{event.count}" if event.count > 1 else ""
            out.append(f"{path}:{f.line_no}: " + visible(f"{f.rule.id} [{f.rule.klass}] "
                                                        f"{f.rule.spec.title}{times}") + "\n")
            out.append(f"    {visible(f.excerpt)}\n")
            if f.frame:
                out.append(f"    at {visible(f.frame)}\n")
            retry = "retry allowed" if f.rule.spec.retry else "do not retry blindly"
            out.append(f"    fix ({retry}): {visible(f.rule.remediation, one_line=False)}\n")
        cause = report.cause
        if cause is not None and len(report.events) > 1:
            out.append(f"{path}: cause {visible(cause.rule.id)} [{cause.rule.klass}] "
                       f"(line {cause.line_no}; the other events follow from it or matter less)\n")
    return "".join(out)


def report_json(reports: list[FileReport]) -> dict[str, Any]:
    """The same as a JSON document."""
    return {
        "severe": any(r.severe for r in reports),
        "files": [{
            "path": r.path,
            "bytes": r.bytes_read,
            "error": r.error or None,
            "cause": r.cause.rule.id if r.cause is not None else None,
            "events": [{
                "rule": e.first.rule.id,
                "class": e.first.rule.klass,
                "title": e.first.rule.spec.title,
                "line": e.first.line_no,
                "count": e.count,
                "excerpt": e.first.excerpt,
                "frame": e.first.frame or None,
                "exception": e.first.exception or None,
                "retry": e.first.rule.spec.retry,
                "remediation": e.first.rule.remediation,
            } for e in sorted(r.events.values(), key=lambda e: e.first.line_no)],
        } for r in reports],
    }
