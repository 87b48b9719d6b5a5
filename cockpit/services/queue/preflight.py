"""`cockpit preflight`: one probe record plus driver, CUDA and Xid facts per box, judged by
`models.preflight`. Read-only, like the probe: nothing on the box is created or changed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from cockpit.models.preflight import Level, PreflightFacts, PreflightReport, evaluate
from cockpit.models.profile import Profile
from cockpit.models.sweep import Instance, Sweep
from cockpit.models.text import visible
from cockpit.services.transport.fleet import HostWatcher
from cockpit.services.transport.remote import Box, LocalBox, SshBox

FACTS_SCRIPT = r"""
d=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
c=$(nvidia-smi -q 2>/dev/null | grep -m1 'CUDA Version' | sed 's/.*: *//')
printf '@@driver %s\n@@cuda %s\n' "$d" "$c"
if dmesg >/dev/null 2>&1; then
  echo "@@xid"
  dmesg 2>/dev/null | grep 'NVRM: Xid' | tail -n 5
else
  echo "@@xid denied"
fi
"""


def parse_facts(text: str) -> PreflightFacts:
    """Read FACTS_SCRIPT's output."""
    driver = cuda = ""
    xid: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@driver "):
            driver = line[9:].strip()
        elif line.startswith("@@cuda "):
            cuda = line[7:].strip()
        elif line.startswith("@@xid"):
            xid = None if line.strip() == "@@xid denied" else []
        elif xid is not None and line.strip():
            xid.append(line.strip())
    return PreflightFacts(driver, cuda, tuple(xid) if xid is not None else None)


async def _facts(watcher: HostWatcher) -> PreflightFacts:
    box: Box = LocalBox() if watcher.instance.is_local else SshBox(watcher.conn)
    result = await box.run(["/bin/sh", "-c", FACTS_SCRIPT], 60)
    return parse_facts(result.stdout.decode(errors="replace"))


async def preflight_instance(instance: Instance, profile: Profile, sweep: Sweep, sweep_dir: Path,
                             *, timeout: float = 60.0) -> PreflightReport:
    """Connect, take one record and the facts, judge, disconnect."""
    watcher = HostWatcher(instance, profile, sweep.ssh, sweep_dir)
    try:
        async with asyncio.timeout(timeout):
            if not await watcher.connect():
                return PreflightReport(instance.name, error=f"cannot connect: "
                                       f"{watcher.state.reachability.value} {watcher.state.detail}")
            snap = await watcher.tick()
            facts = await _facts(watcher)
    except TimeoutError:
        return PreflightReport(instance.name, error=f"no answer within {timeout:.0f}s")
    except Exception as exc:  # a dropped link mid-check: reported for this box
        return PreflightReport(instance.name, error=f"check failed: {exc}")
    finally:
        await watcher.close()
    return evaluate(instance, profile, snap, facts)


async def preflight(sweep: Sweep, profiles: dict[str, Profile], sweep_dir: Path,
                    instances: Sequence[Instance]) -> list[PreflightReport]:
    """Every chosen box, in parallel."""
    return list(await asyncio.gather(*(preflight_instance(i, profiles[i.profile], sweep, sweep_dir)
                                       for i in instances)))


def report_text(report: PreflightReport) -> str:
    """One box for a terminal (and the TUI's report screen): every line through `visible()`,
    since reasons quote the box (GPU names, driver strings, error messages)."""
    lines = [visible(f"== {report.instance}: {report.level.name}")]
    if report.error:
        lines.append(visible(f"FAIL    {report.error}"))
    for check in report.checks:
        lines.append(visible(f"{check.level.name:<7} {check.name}: {check.reason}"))
    return "\n".join(lines) + "\n"


def report_json(report: PreflightReport) -> dict[str, object]:
    """One box as JSON."""
    return {"instance": report.instance, "result": report.level.name, "error": report.error or None,
            "checks": [{"check": c.name, "result": c.level.name, "reason": c.reason}
                       for c in report.checks]}


def exit_code(reports: Sequence[PreflightReport]) -> int:
    """0 when no box FAILs (WARN allowed), 1 when one does."""
    return 1 if any(r.level is Level.FAIL for r in reports) else 0
