"""An output format a newcomer might add (tests/test_tables.py): CSV of any listing's columns,
with a header row. Its writer is the whole of it; run as a program, it adds its one row to
`cli/output.py`'s table and runs the CLI (`python -m tests.fakes.csv_format ARGS`), where
`SESSIONTOOL_OUTPUT_FORMAT=fakecsv` picks it for every command. Named as no real row will be,
so that the test goes on welcoming a new row when a real CSV format is added."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

NAME = "fakecsv"

if TYPE_CHECKING:
    from sessiontool.cli.output import View
    from sessiontool.cli.render import Look


def write(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    from sessiontool.cli import columns, output, render

    if view.columns is None:  # no listing: what a pipe gets from it
        output.FORMATS["tsv"].write(view, look, fields)
        return
    spec, default = view.columns()
    names = list(fields or default)
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(names)
    out.writerows(columns.rows(spec, names, view.rows(view.data) if view.rows else []))
    render.write_out(buf.getvalue())


if __name__ == "__main__":
    from sessiontool.cli import output
    from sessiontool.cli.main import main

    output.FORMATS[NAME] = output.Format(write, columns=True)
    main()
