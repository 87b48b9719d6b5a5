"""Widgets through which text from a box reaches the screen: plain, never markup.

In Textual a `str` given to `Static`, `Label`, `update()`, a `DataTable` cell or `notify()` is
parsed as markup: a log line `[/bold]` crashes the app, a cell name `[@click=app.quit]`
becomes an action, `[enforce fail at …]` is eaten as a tag. A `Text` is never parsed, but Rich
passes ESC and the other controls through to the terminal. So the cockpit's screens show
content only through these widgets:

- `PlainStatic` / `PlainLabel`: markup off, and whatever they are given (str, `Text`, a
  `Group` or `Table` of them) passes `shown()`, which makes controls visible;
- `PlainTable`: every cell passes `shown(…, one_line=True)` on `add_row` and `update_cell`.

Renderers still build remote parts with `cockpit.models.text.remote_text` (the rule is visible
where the text is made); these widgets make it hold even where a renderer forgets.
`tests/test_hostile_text.py` drives the real app with hostile records and checks every widget,
and checks that `cockpit/ui/` constructs no bare `Static`, `Label` or `DataTable`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.visual import VisualType
from textual.widgets import DataTable, Label, Static

from cockpit.models.text import clean_text, remote_text


def shown(content: Any, *, one_line: bool = False) -> Any:
    """`content` made safe to show: a str becomes a plain `Text`, a `Text` gets its controls
    made visible, a `Group` or a Rich `Table` has its parts treated the same way (in place for
    a table). Anything else (numbers are formatted by the table; Textual's own visuals) is
    returned unchanged."""
    if isinstance(content, str):
        return remote_text(content, one_line=one_line)
    if isinstance(content, Text):
        return clean_text(content, one_line=one_line)
    if isinstance(content, Group):
        return Group(*(shown(part) for part in content.renderables), fit=content.fit)
    if isinstance(content, Table):
        for column in content.columns:
            # Rich keeps a column's cells in `_cells` and offers no setter; a str cell there
            # would be parsed as markup when the table renders.
            column._cells[:] = [shown(cell, one_line=True) for cell in column._cells]
        return content
    return content


class PlainStatic(Static):
    """A `Static` that shows its content literally (see the module doc)."""

    def __init__(self, content: VisualType = "", **kwargs: Any) -> None:
        kwargs["markup"] = False
        super().__init__(shown(content), **kwargs)

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(shown(content), layout=layout)


class PlainLabel(Label):
    """A `Label` that shows its content literally (see the module doc)."""

    def __init__(self, content: VisualType = "", **kwargs: Any) -> None:
        kwargs["markup"] = False
        super().__init__(shown(content, one_line=True), **kwargs)

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(shown(content, one_line=True), layout=layout)


class PlainTable(DataTable[Any]):
    """A `DataTable` whose cells are shown literally, one line each (see the module doc)."""

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        return super().add_row(*(shown(cell, one_line=True) for cell in cells), **kwargs)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, *,
                    update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, shown(value, one_line=True),
                            update_width=update_width)
