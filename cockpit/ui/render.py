"""Rich renderables for the cockpit's cells and panels, coloured from the active theme.

Colours are never literals here: a `Palette` is read from the app's theme variables
(`$success`, `$warning`, `$error`, `$secondary`), so every theme, including high contrast,
colours thresholds its own way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cockpit.models.durations import format_bytes, format_duration
from cockpit.models.gate import Gate, GateState
from cockpit.models.health import Judgement
from cockpit.models.hostview import HostTracker
from cockpit.models.profile import StorageTier
from cockpit.models.queue import CellState, CellView
from cockpit.models.snapshot import NA, HostState, Mount, Reachability
from cockpit.models.summary import log_age, mean_util, pct, state_text, worst, worst_disk, worst_inodes
from cockpit.models.text import remote_text, visible

BAR_WIDTH = 12


@dataclass(frozen=True)
class Palette:
    """Status colours of the active theme."""

    ok: str
    warn: str
    bad: str
    muted: str

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> Palette:
        """Read the palette from `App.theme_variables`."""
        return cls(variables.get("success", ""), variables.get("warning", ""),
                   variables.get("error", ""), variables.get("secondary", ""))

    def fill(self, value: float | NA, warn: float = 80.0, bad: float = 90.0) -> str:
        """Style for a fill level (disk, inodes, memory): higher is worse."""
        if isinstance(value, NA):
            return self.muted
        return self.bad if value >= bad else self.warn if value >= warn else self.ok

    def busy(self, value: float | NA) -> str:
        """Style for GPU utilisation: an idle GPU you are paying for is the warning."""
        if isinstance(value, NA):
            return self.muted
        return self.ok if value >= 60 else self.warn if value >= 10 else self.bad


def styled(text: str, style: str) -> Text:
    """`text` in `style` (empty style = default colour), shown literally: never markup,
    controls made visible, since a cell's text may come from the box."""
    return remote_text(text, style=style or "")


def bar(value: float | NA, style: str, width: int = BAR_WIDTH) -> Text:
    """`█████░░░░░  52%`; an unknown value shows as a dotted bar and `n/a`."""
    if isinstance(value, NA):
        return Text("·" * width + "  n/a")
    filled = max(0, min(width, round(width * value / 100.0)))
    out = Text("█" * filled, style=style)
    out.append("░" * (width - filled))
    out.append(f" {value:3.0f}%", style=style)
    return out


def human_count(value: float) -> str:
    """`12.3k`, `4.1M` for inode counts."""
    sign = "-" if value < 0 else ""
    size = abs(value)
    if size >= 1e6:
        return f"{sign}{size / 1e6:.1f}M"
    if size >= 1e3:
        return f"{sign}{size / 1e3:.1f}k"
    return f"{sign}{size:.0f}"


def fmt_num(value: float | NA, unit: str = "", digits: int = 0) -> str:
    """A number with its unit, or `n/a`."""
    return "n/a" if isinstance(value, NA) else f"{value:.{digits}f}{unit}"


# -- fleet cells ------------------------------------------------------------------------
def fleet_cells(tracker: HostTracker, palette: Palette, now: float) -> dict[str, Text | str]:
    """The fleet-table cells of one box that come from its snapshot and queue."""
    snap = tracker.snapshot
    if snap is None:
        return {}
    gpus = snap.gpu.gpus
    problem = gpu_judgement(tracker, now)
    if gpus:
        util = mean_util(snap)
        mems = [g.mem_pct for g in gpus]
        mem = worst(mems)
        util_cell: Text | str = styled(f"{pct(util)} x{len(gpus)}", palette.busy(util))
        mem_cell: Text | str = styled(pct(mem), palette.fill(mem, 90, 97))
    else:
        util_cell = styled(snap.gpu.message or snap.gpu.status.value, palette.muted)
        mem_cell = ""
    if problem is not None:
        # The failure in the alarm colour, its words whole: the column shows their start,
        # the filter (/) searches all of them, and the box's GPU panel prints them in full.
        util_cell = styled(problem.text, palette.bad)
    disk = worst_disk(snap)
    inodes = worst_inodes(snap)
    memory = snap.memory.pct
    alerts = tracker.alerts(now)
    cells: dict[str, Text | str] = {
        "GPU": util_cell,
        "VRAM": mem_cell,
        "disk": styled(pct(disk), palette.fill(disk)),
        "inodes": styled(pct(inodes), palette.fill(inodes)),
        "mem": styled(pct(memory), palette.fill(memory)),
        "queue": remote_text(tracker.queue_view().summary),
        "log age": log_age(snap),
        "alerts": styled(str(len(alerts)) if alerts else "-", palette.bad if alerts else palette.muted),
    }
    if tracker.state.reachability is not Reachability.CONNECTED:
        # The last numbers of a box not heard from are history, not the present: dimmed
        # (the state cell says since when), still readable, never blanked.
        for column, cell in cells.items():
            if column != "alerts":
                cells[column] = dimmed(cell)
    return cells


def dimmed(cell: Text | str) -> Text:
    """`cell` with `dim` added over its colours (a stale box's numbers)."""
    out = cell.copy() if isinstance(cell, Text) else remote_text(cell)
    out.stylize("dim")
    return out


def teardown_note(gate: Gate | None) -> tuple[str, bool | None] | None:
    """The last teardown action on a box and its result: (`destroy done`, True), (`stop
    failed: …`, False), (`running destroy`, None); None before any action ran."""
    if gate is None:
        return None
    if gate.state in (GateState.EXECUTING, GateState.APPROVED):
        return gate.reason, None
    for state, reason in reversed(gate.history):
        if state in (GateState.DONE, GateState.FAILED):
            return reason, state is GateState.DONE
    return None


def state_cell(state: HostState, palette: Palette, now: float,
               gate: Gate | None = None) -> Text:
    """Connection state, coloured: connected, stale (the run may be fine), or refused.

    After a teardown action the cell starts with it and its result (`destroy done ·
    unreachable`): a destroyed box must not just look like a dropped link."""
    reach = state.reachability
    style = palette.ok if reach is Reachability.CONNECTED else (
        palette.warn if reach in (Reachability.STALE, Reachability.CONNECTING) else palette.bad)
    cell = Text()
    note = teardown_note(gate)
    if note is not None:
        words, ok = note
        cell.append_text(styled(words, palette.ok if ok else palette.warn if ok is None
                                else palette.bad))
        cell.append(" · ")
    cell.append_text(styled(state_text(state, now, short=True), style))
    # A box whose records could not all be read, or whose watcher crashed, says so here:
    # "connected" alone would hide that its numbers may be incomplete or old.
    if state.crashes:
        cell.append(f" crashed x{state.crashes}", style=palette.bad)
    if state.bad_records:
        cell.append(f" bad x{state.bad_records}", style=palette.bad)
    return cell


# -- box panels -------------------------------------------------------------------------
def gpu_judgement(tracker: HostTracker, now: float | None = None) -> Judgement | None:
    """The box's GPU failure (nvidia-smi failed, a GPU lost or not answering), if any."""
    return next((j for j in tracker.judgements(now) if j.kind == "gpu-failed"), None)


def gpu_panel(tracker: HostTracker, palette: Palette) -> RenderableType:
    """Per-GPU numbers, MIG mode and devices, compute processes, why PIDs may be missing,
    and nvidia-smi's own words, whole, when it failed for some GPU or all of them."""
    snap = tracker.snapshot
    if snap is None:
        return Text("waiting for the first probe record…")
    problem = gpu_judgement(tracker)
    failure: list[RenderableType] = []
    if problem is not None:
        failure.append(remote_text(problem.text, style=palette.bad))
        failure.append(remote_text(problem.detail))
    if not snap.gpu.gpus:
        if failure:
            return Group(*failure)
        return remote_text(f"no GPU readings: {snap.gpu.message or snap.gpu.status.value}",
                           style=palette.muted)
    mig = any(gpu.mig_enabled for gpu in snap.gpu.gpus)
    table = Table(box=None, pad_edge=False, expand=True)
    table.add_column("#", no_wrap=True)
    # The model name gives way first; the numbers keep at least their header's width (at
    # 120 columns rich squeezed every column alike and `util`/`temp` read `ut…`/`te…`).
    table.add_column("GPU", no_wrap=True, overflow="ellipsis", max_width=14, min_width=4)
    for column, least in (("util", 4), ("mem", 8), ("temp", 4), ("power", 8), ("SM", 7),
                          *((("MIG", 3),) if mig else ())):
        table.add_column(column, no_wrap=True, min_width=least)
    for gpu in snap.gpu.gpus:
        mem = "n/a" if isinstance(gpu.mem_used_mib, NA) or isinstance(gpu.mem_total_mib, NA) else (
            f"{gpu.mem_used_mib / 1024:.1f}/{gpu.mem_total_mib / 1024:.0f}G")
        power = fmt_num(gpu.power_w, "W")
        if not isinstance(gpu.power_limit_w, NA) and not isinstance(gpu.power_w, NA):
            power += f"/{gpu.power_limit_w:.0f}"
        table.add_row(
            Text(str(gpu.index)), remote_text(gpu.name.replace("NVIDIA ", "")),
            styled(pct(gpu.util_pct), palette.busy(gpu.util_pct)),
            styled(mem, palette.fill(gpu.mem_pct, 90, 97)),
            styled(fmt_num(gpu.temp_c, "C"), palette.fill(gpu.temp_c, 80, 88)),
            Text(power), Text(fmt_num(gpu.sm_clock_mhz, "MHz")),
            *((remote_text(str(gpu.mig_mode)) if not isinstance(gpu.mig_mode, NA)
               else Text("n/a"),) if mig else ()),
        )
    procs = [(gpu.index, p) for gpu in snap.gpu.gpus for p in gpu.processes]
    lines: list[RenderableType] = [table, *_mig_lines(tracker, palette), *failure]
    if procs:
        text = Text("processes: ")
        text.append(", ".join(f"gpu{i} pid {p.pid} ({fmt_num(p.used_mib, ' MiB')})"
                              for i, p in procs))
        lines.append(text)
    elif any(not isinstance(g.mem_used_mib, NA) and g.mem_used_mib > 512 for g in snap.gpu.gpus):
        lines.append(Text("memory is in use but no compute PIDs are listed: inside a container "
                          "the driver cannot map PIDs to this namespace (normal on rented boxes)",
                          style=palette.muted))
    else:
        lines.append(Text("no compute processes", style=palette.muted))
    return Group(*lines)


def _mig_lines(tracker: HostTracker, palette: Palette) -> list[RenderableType]:
    """`gpu0 MIG: 3g.40gb #0 MIG-..., 1g.10gb #1 MIG-...` for each GPU with MIG enabled."""
    snap = tracker.snapshot
    if snap is None:
        return []
    out: list[RenderableType] = []
    for gpu in snap.gpu.gpus:
        if not gpu.mig_enabled:
            continue
        line = Text(f"gpu{gpu.index} MIG: ")
        if gpu.mig_devices:
            line.append_text(remote_text(", ".join(
                f"{d.profile} #{d.device} {d.uuid}" for d in gpu.mig_devices)))
        elif snap.gpu.mig_error:
            line.append_text(remote_text(snap.gpu.mig_error, style=palette.bad))
        else:
            line.append("enabled, no MIG devices (none created yet)", style=palette.warn)
        out.append(line)
    return out


def tier_for(tracker: HostTracker, mount: Mount) -> StorageTier | None:
    """The profile tier whose (possibly overridden) path is this mount."""
    for tier in tracker.profile.storage.tiers:
        if tracker.instance.mounts.get(tier.id, tier.path) == mount.path:
            return tier
    return None


def _survival(tier: StorageTier | None, palette: Palette) -> Text:
    if tier is None:
        return Text("(not a profile tier)", style=palette.muted)
    out = remote_text(f"{tier.label}: ")
    out.append("survives stop" if tier.survives_stop else "LOST on stop",
               style=palette.ok if tier.survives_stop else palette.bad)
    out.append(", ")
    out.append("survives destroy" if tier.survives_destroy else "LOST on destroy",
               style=palette.ok if tier.survives_destroy else palette.bad)
    if tier.inode_cap:
        out.append(f", inode cap {human_count(tier.inode_cap)}")
    return out


def disk_panel(tracker: HostTracker, palette: Palette) -> RenderableType:
    """Every watched mount: bytes and inodes bars, survival, trend, time to full; memory."""
    snap = tracker.snapshot
    if snap is None:
        return Text("waiting for the first probe record…")
    parts: list[RenderableType] = []
    for mount in snap.mounts:
        head = remote_text(mount.path, style="bold")
        if not isinstance(mount.fstype, NA):
            head.append(visible(f"  {mount.fstype}"), style=palette.muted)
        parts.append(head)
        parts.append(_survival(tier_for(tracker, mount), palette))
        if mount.error:
            parts.append(remote_text(f"  {mount.error}", style=palette.bad))
            continue
        trend = tracker.mount_trend(mount)
        line = Text("bytes  ")
        line.append_text(bar(mount.bytes_pct, palette.fill(mount.bytes_pct)))
        line.append(_trend(trend.bytes_delta, trend.bytes_full_s, format_bytes), style=palette.muted)
        parts.append(line)
        line = Text("inodes ")
        line.append_text(bar(mount.inodes_pct, palette.fill(mount.inodes_pct)))
        line.append(_trend(trend.inodes_delta, trend.inodes_full_s, human_count),
                    style=palette.muted)
        parts.append(line)
    mem = snap.memory
    line = remote_text(f"memory ({mem.source}) ")
    line.append_text(bar(mem.pct, palette.fill(mem.pct)))
    if not isinstance(mem.current_bytes, NA):
        limit = "no limit" if isinstance(mem.max_bytes, NA) else format_bytes(mem.max_bytes)
        line.append(f"  {format_bytes(mem.current_bytes)} of {limit}")
    kills = mem.oom_kills
    line.append(f"  OOM kills: {fmt_num(kills)}",
                style=palette.bad if not isinstance(kills, NA) and kills > 0 else "")
    parts.append(line)
    return Group(*parts)


def _trend(delta: float | None, full_s: float | None, fmt: Callable[[float], str]) -> str:
    out = ""
    if delta is not None:
        out += f" {'+' if delta >= 0 else ''}{fmt(delta)}/session"
    if full_s is not None:
        out += f" · full in {format_duration(full_s)}"
    return out


def queue_header(tracker: HostTracker, palette: Palette) -> Text:
    """Progress, resume index and ETA of the queue."""
    view = tracker.queue_view()
    inst = tracker.instance
    if not view.cells:
        return Text("no queue file or queue log read yet" if inst.queue or inst.queue_log
                    else "this instance has no `queue:` in the sweep file", style=palette.muted)
    out = Text(f"{view.finished}/{len(view.cells)} finished")
    if view.failed:
        out.append(f", {len(view.failed)} failed", style=palette.bad)
    if view.eta_s is not None:
        out.append(f", queue ETA {format_duration(view.eta_s)}")
    if view.done:
        out.append("  QUEUE DONE", style=palette.ok)
    hint = resume_hint_of(tracker)
    if hint is not None:
        start, command, note = hint
        out.append(f"\nresume at cell {start} (c: copy): ")
        out.append(visible(command), style="bold")
        out.append(visible(f"\n{note}"), style=palette.muted)
    behind = view.unproven_before_resume if tracker.alive is False else ()
    if behind:
        out.append(visible(f"\nno proof of success, not reached by a resume: "
                           f"{', '.join(c.name for c in behind)} (X: rerun the highlighted cell)"),
                   style=palette.warn)
    return out


def resume_hint_of(tracker: HostTracker) -> tuple[int, str, str] | None:
    """Where a resume would start, the exact command and its note; None while the queue runs
    (or its processes could not be checked) or when no cell is left to resume."""
    from cockpit.services.queue.launch import resume_hint

    view = tracker.queue_view()
    if tracker.alive is not False or view.resume_from is None:
        return None
    command, note = resume_hint(tracker.instance, view.resume_from)
    return view.resume_from, command, note


def cell_detail(cell: CellView | None, palette: Palette) -> Text:
    """The queue panel's detail line: the highlighted cell's state and the evidence it rests
    on (both may carry text from the box: made visible)."""
    if cell is None:
        return Text("no cell highlighted", style=palette.muted)
    out = remote_text(f"{cell.index} {cell.name}: ", style="bold")
    out.append(visible(cell.state_text))
    out.append(visible(f" · {cell.evidence or 'no evidence recorded'}"), style=palette.muted)
    return out


def cell_row(cell: CellView, palette: Palette) -> tuple[Text | str, ...]:
    """One queue-table row."""
    style = {CellState.OK: palette.ok, CellState.FAILED: palette.bad,
             CellState.INTERRUPTED: palette.warn, CellState.RUNNING: palette.warn,
             CellState.PENDING: palette.muted, CellState.EARLIER: palette.muted}[cell.state]
    return (str(cell.index), remote_text(cell.name), styled(cell.state_text, style),
            f"{cell.epoch}/{cell.epochs}" if cell.epoch else f"-/{cell.epochs}",
            format_duration(cell.elapsed_s) if cell.elapsed_s is not None else "",
            format_duration(cell.eta_s) if cell.eta_s is not None else "")


def clock_time(at: float) -> str:
    """`14:03:22` in local time."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def health_lines(tracker: HostTracker, palette: Palette, now: float) -> Text:
    """The box's run-health judgements, alarms first, one line each."""
    judgements = sorted(tracker.judgements(now), key=lambda j: not j.alarm)
    shown = [j for j in judgements if j.alarm or j.kind != "finished"]
    if not shown:
        done = sum(j.kind == "finished" for j in judgements)
        return Text(f"health: nothing to report ({done} finished)" if done else
                    "health: nothing to report", style=palette.muted)
    text = Text()
    for index, judgement in enumerate(shown[:4]):
        if index:
            text.append("\n")
        text.append("⚠ " if judgement.alarm else "· ",
                    style=palette.bad if judgement.alarm else palette.muted)
        text.append(visible(judgement.text), style="bold" if judgement.alarm else palette.muted)
        if judgement.rule_id:
            text.append(f" ({judgement.rule_id})", style=palette.muted)
    if len(shown) > 4:
        text.append(f"\n… {len(shown) - 4} more", style=palette.muted)
    return text
