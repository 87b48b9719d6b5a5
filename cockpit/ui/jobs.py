"""The job view: one distributed job across its boxes (issue 21).

What the job is doing as ONE job (`cockpit.models.jobs.judge_job`): its state, the cause of a
failure with the box and rank it happened on, the other boxes' reactions as its symptoms, each
rank's last progress, and each member box with its role. Redrawn once a second from the same
trackers the fleet uses; everything a box wrote is shown as plain text (`remote_text`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header

from cockpit.models.durations import format_duration
from cockpit.models.jobs import JobState, JobView, judge_job
from cockpit.models.text import remote_text, visible
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import KeyedTable, upsert_row
from cockpit.ui.render import Palette
from cockpit.ui.safe import PlainStatic

RANK_COLUMNS = ("rank", "box", "progress", "moved", "exit")
BOX_COLUMNS = ("box", "ranks", "link", "process", "job cell", "log age", "role")
MAX_RANK_ROWS = 256
"""Rank rows drawn (a 4096-rank job would make a table nobody reads; the boxes table and the
job's verdict cover the rest, and the count of the others is shown)."""


def job_title(view: JobView, palette: Palette) -> Text:
    """`ddp (torchrun, 2 ranks on 2 boxes): failed: rank 1 on b: ...`, coloured by state."""
    text = Text(visible(f"job {view.name}"), style="bold")
    text.append(visible(f" ({view.launcher}, {view.world_size} ranks on "
                        f"{len(view.members)} boxes): "))
    text.append(visible(view.text), style={
        JobState.FAILED: palette.bad, JobState.STALLED: palette.warn,
        JobState.UNKNOWN: palette.warn, JobState.FINISHED: palette.ok}.get(view.state, ""))
    return text


def job_detail(view: JobView, palette: Palette) -> Text:
    """The cause, its symptoms and what to do."""
    text = Text()
    if view.cause is not None:
        cause = view.cause
        ranks = ", ".join(map(str, cause.ranks))
        text.append("cause  ", style="bold")
        text.append(visible(f"rank {ranks} on {cause.instance}: {cause.title}"), style=palette.bad)
        if cause.rule_id:
            text.append(visible(f" ({cause.rule_id}, {cause.klass})"))
        text.append("\n       ")
        text.append(remote_text(cause.message))
        text.append("\n")
    for symptom in view.symptoms:
        ranks = ", ".join(map(str, symptom.ranks))
        text.append("symptom ", style="bold")
        text.append(visible(f"rank {ranks} on {symptom.instance}: "))
        text.append(remote_text(symptom.text))
        text.append("\n")
    if view.cause is not None:  # the verdict's detail repeats the cause and symptoms above
        text.append("next   ", style="bold")
        text.append(remote_text(f"{view.cause.remediation} The other ranks' errors are "
                                f"symptoms of this one (D20): fix the cause, not them."))
    else:
        text.append(remote_text(view.detail))
    return text


class JobScreen(CockpitScreen):
    """One job group: ranks by box, the job's state, its cause and symptoms."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]
    """
    | Key | Description |
    | :- | :- |
    | escape | Back to the fleet. |
    """

    def __init__(self, job: str) -> None:
        super().__init__(classes="jobs")
        self.job = job

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="job-title")
        yield KeyedTable(id="job-boxes", cursor_type="row", zebra_stripes=True)
        yield KeyedTable(id="job-ranks", cursor_type="row", zebra_stripes=True)
        yield PlainStatic(id="job-detail")
        yield Footer()

    def on_mount(self) -> None:
        for table_id, columns in (("#job-boxes", BOX_COLUMNS), ("#job-ranks", RANK_COLUMNS)):
            table = self.query_one(table_id, DataTable)
            for column in columns:
                table.add_column(column, key=column)
        self.title = f"job {self.job}"
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def view(self) -> JobView | None:
        """The job judged now from the boxes' trackers (None: no such job in the sweep)."""
        monitor = self.cockpit.monitor
        tracker = monitor.jobs.get(self.job)
        if tracker is None:
            return None
        return judge_job(tracker, monitor.trackers, self.cockpit.clock())

    def redraw(self) -> None:
        """Refresh the title, the boxes, the ranks and the verdict."""
        if not self.whole("#job-title"):  # popped or exiting: nothing left to paint
            return
        view = self.view()
        if view is None:
            self.query_one("#job-title", PlainStatic).update(
                Text(visible(f"no job called {self.job} in the sweep")))
            return
        now = self.cockpit.clock()
        palette = self.cockpit.palette
        self.query_one("#job-title", PlainStatic).update(job_title(view, palette))
        boxes = self.query_one("#job-boxes", DataTable)
        for member in view.members:
            role = {"cause": palette.bad, "symptom": palette.warn}.get(member.role, "")
            alive = {True: "alive", False: "gone", None: "?"}[member.alive]
            age = format_duration(member.log_age_s) if member.log_age_s is not None else "-"
            cells: tuple[Text | str, ...] = (
                remote_text(member.instance), ", ".join(map(str, member.ranks)),
                member.reach, alive, member.cell, age,
                Text(member.role or "-", style=role))
            upsert_row(boxes, member.instance, BOX_COLUMNS, cells)
        ranks = self.query_one("#job-ranks", DataTable)
        for rank in view.ranks[:MAX_RANK_ROWS]:
            if rank.step is None:
                progress = "-"
            else:
                of = f"/{rank.steps}" if rank.steps else ""
                progress = f"{rank.unit} {rank.step:g}{of}"
            moved = format_duration(max(0.0, now - rank.moved_at)) + " ago" \
                if rank.moved_at is not None else "-"
            failed = rank.exit_code not in (None, 0)
            exit_text = Text("-" if rank.exit_code is None else str(rank.exit_code),
                             style=palette.bad if failed else "")
            upsert_row(ranks, str(rank.rank), RANK_COLUMNS,
                       (str(rank.rank), remote_text(rank.instance), progress, moved, exit_text))
        detail = job_detail(view, palette)
        if len(view.ranks) > MAX_RANK_ROWS:
            detail.append(f"\n({len(view.ranks) - MAX_RANK_ROWS} more ranks not listed)")
        self.query_one("#job-detail", PlainStatic).update(detail)

    def action_back(self) -> None:
        """Back to the fleet."""
        self.app.pop_screen()


def jobs_text(views: Iterable[JobView], palette: Palette) -> Text:
    """The fleet's job rows: one line per job group, expanded to its boxes with their ranks
    and roles (`J` opens the job view)."""
    text = Text()
    for view in views:
        text.append_text(job_title(view, palette))
        for member in view.members:
            ranks = ", ".join(map(str, member.ranks))
            style = {"cause": palette.bad, "symptom": palette.warn}.get(member.role, "")
            text.append("\n  └ ")
            text.append(visible(member.instance))
            text.append("  ")
            text.append(visible(f"ranks {ranks}  {member.reach}, job cell {member.cell}"))
            if member.role:
                text.append("  ")
                text.append(visible(member.role), style=style)
        text.append("\n")
    text.rstrip()
    return text
