"""`cockpit preflight`: one probe record plus driver, CUDA and Xid facts per box, judged by
`models.preflight`. Read-only, like the probe: nothing on the box is created or changed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from cockpit.models.preflight import (
    Level,
    PreflightFacts,
    PreflightReport,
    evaluate,
    group_report,
    parse_interfaces,
)
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostSnapshot
from cockpit.models.sweep import Instance, Sweep
from cockpit.models.text import visible
from cockpit.services.transport.fleet import HostWatcher
from cockpit.services.transport.remote import Box, LocalBox, SshBox

FACTS_SCRIPT = r"""
d=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
c=$(nvidia-smi -q 2>/dev/null | grep -m1 'CUDA Version' | sed 's/.*: *//')
printf '@@driver %s\n@@cuda %s\n' "$d" "$c"
if ls /dev/nvidia-nvswitch* >/dev/null 2>&1; then echo "@@nvswitch yes"; else echo "@@nvswitch no"; fi
if command -v systemctl >/dev/null 2>&1; then
  printf '@@fabricmanager %s\n' "$(systemctl is-active nvidia-fabricmanager 2>/dev/null | head -n 1)"
fi
if command -v ip >/dev/null 2>&1; then
  echo "@@ip"
  { ip -o link show; ip -o addr show; } 2>/dev/null | head -n 256 | cut -c1-300
fi
echo "@@xidstart"
if dmesg >/dev/null 2>&1; then
  echo "@@xid"
  dmesg 2>/dev/null | grep 'NVRM: Xid' | tail -n 5
else
  echo "@@xid denied"
fi
"""
"""Read-only facts: driver and CUDA, NVSwitch presence and the fabric manager's state (MN1),
the interfaces with MTUs and addresses NCCL could bind (MN2, MN4; bounded to 256 lines of 300
characters), and the last Xid lines."""


def parse_facts(text: str) -> PreflightFacts:
    """Read FACTS_SCRIPT's output (total: an unexpected line is skipped)."""
    driver = cuda = ""
    xid: list[str] | None = None
    nvswitch: bool | None = None
    fabric: str | None = None
    ip_lines: list[str] | None = None
    section = ""
    for line in text.splitlines():
        if line.startswith("@@driver "):
            driver = line[9:].strip()
        elif line.startswith("@@cuda "):
            cuda = line[7:].strip()
        elif line.startswith("@@nvswitch "):
            nvswitch = line.split()[-1] == "yes"
        elif line.startswith("@@fabricmanager"):
            fabric = line[len("@@fabricmanager"):].strip()[:40] or "unknown"
        elif line.strip() == "@@ip":
            section, ip_lines = "ip", []
        elif line.strip() == "@@xidstart":
            section = ""
        elif line.startswith("@@xid"):
            section = "xid"
            xid = None if line.strip() == "@@xid denied" else []
        elif section == "ip" and ip_lines is not None:
            ip_lines.append(line)
        elif section == "xid" and xid is not None and line.strip():
            xid.append(line.strip())
    return PreflightFacts(driver, cuda, tuple(xid) if xid is not None else None,
                          nvswitch=nvswitch, fabric_manager=fabric,
                          interfaces=parse_interfaces("\n".join(ip_lines))
                          if ip_lines is not None else None)


async def _facts(watcher: HostWatcher) -> PreflightFacts:
    box: Box = LocalBox() if watcher.instance.is_local else SshBox(watcher.conn)
    result = await box.run(["/bin/sh", "-c", FACTS_SCRIPT], 60)
    return parse_facts(result.stdout.decode(errors="replace"))


async def preflight_instance(instance: Instance, profile: Profile, sweep: Sweep, sweep_dir: Path,
                             *, timeout: float = 60.0) -> PreflightReport:
    """Connect, take one record and the facts, judge, disconnect."""
    report, _snap, _facts_read = await _checked(instance, profile, sweep, sweep_dir, timeout=timeout)
    return report


async def _checked(instance: Instance, profile: Profile, sweep: Sweep, sweep_dir: Path,
                   *, timeout: float = 60.0
                   ) -> tuple[PreflightReport, HostSnapshot | None, PreflightFacts]:
    """One box's report, with the record and facts it rests on (for the job groups)."""
    watcher = HostWatcher(instance, profile, sweep.ssh, sweep_dir)
    try:
        async with asyncio.timeout(timeout):
            if not await watcher.connect():
                return PreflightReport(instance.name, error=f"cannot connect: "
                                       f"{watcher.state.reachability.value} {watcher.state.detail}"
                                       ), None, PreflightFacts()
            snap = await watcher.tick()
            facts = await _facts(watcher)
    except TimeoutError:
        return (PreflightReport(instance.name, error=f"no answer within {timeout:.0f}s"), None,
                PreflightFacts())
    except Exception as exc:  # a dropped link mid-check: reported for this box
        return PreflightReport(instance.name, error=f"check failed: {exc}"), None, PreflightFacts()
    finally:
        await watcher.close()
    return evaluate(instance, profile, snap, facts), snap, facts


async def preflight(sweep: Sweep, profiles: dict[str, Profile], sweep_dir: Path,
                    instances: Sequence[Instance]) -> list[PreflightReport]:
    """Every chosen box, in parallel; then one report per job group all of whose members
    were checked (same GPUs, driver and CUDA, fabric manager, NCCL interface and MTU)."""
    checked = await asyncio.gather(*(_checked(i, profiles[i.profile], sweep, sweep_dir)
                                     for i in instances))
    reports = [report for report, _, _ in checked]
    by_name = {inst.name: (snap, facts) for inst, (_, snap, facts) in zip(instances, checked, strict=True)}
    for job in sweep.jobs:
        if all(m.instance in by_name for m in job.members):
            reports.append(group_report(job.name, {
                m.instance: (len(m.ranks), *by_name[m.instance]) for m in job.members}))
    return reports


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
