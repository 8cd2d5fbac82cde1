"""Tables on a terminal, and a plain layout when stdout is not one (CI logs, pipes).

docs/ARCHITECTURE.md, "CLI output": a Rich table fits itself to the console's width (80
columns when stdout is not a terminal), wrapping cells and squeezing columns, down to
zero width for one whose neighbours may not wrap. In a log that loses data, so off a
terminal a table is printed plain: a title line, then one line per row, each column padded
to its widest cell and separated by two spaces, nothing wrapped or cut.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from probe_service.safe_text import safe_line

__all__ = ["plain_lines", "print_table"]

_GAP = "  "


def _cell(value: object) -> str:
    # Cells went through ``untrusted`` already; a str cell is made one line here too.
    return safe_line(value.plain if isinstance(value, Text) else str(value))


def plain_lines(table: Table) -> list[str]:
    """The table as plain lines: title, header (when it shows one) and rows."""
    columns = [[_cell(c) for c in column.cells] for column in table.columns]
    headers = [_cell(column.header) for column in table.columns]
    rows = [list(cells) for cells in zip(*columns, strict=True)] if columns else []
    if table.show_header:
        rows.insert(0, headers)
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(len(headers))]
    lines = [_cell(table.title)] if table.title else []
    for row in rows:
        padded = _GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(padded.rstrip())
    return lines


def print_table(console: Console, table: Table) -> None:
    """Print ``table``: Rich's layout on a terminal, ``plain_lines`` otherwise."""
    if console.is_terminal:
        console.print(table)
        return
    for line in plain_lines(table):
        console.print(Text(line), soft_wrap=True)
