"""The default table style is drawn without tabulate (issue #44 start-up: loading it is about
a tenth of `sessions list`'s and `migrate status`'s own work), as tabulate draws it: the same
text for every row of one-line cells, wide characters, whitespace at the ends, empty and
missing values and a verdict's colours included; a cell on several lines is left to tabulate."""

from __future__ import annotations

import click
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.output import (
    Lines,
    OutputFormat,
    render_rows,
    simple_table,
    tabulate_module,
    visible_cell,
)

TEXT = st.text(alphabet=" ab\t…é漢字/-", max_size=12)
VALUE = st.none() | TEXT | st.integers(-(10**6), 10**6) | st.booleans() | st.floats(0, 1e4)


def _tabulate(headers, cells) -> str:
    return tabulate_module().tabulate(
        cells, headers=headers, tablefmt="simple", disable_numparse=True
    )


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.text(alphabet="abé漢 ", min_size=1, max_size=8), min_size=1, max_size=5),
    st.data(),
)
def test_the_simple_table_is_tabulates(headers, data):
    rows = data.draw(st.lists(st.lists(VALUE, min_size=len(headers), max_size=len(headers))))
    cells = [[visible_cell(v) for v in row] for row in rows]
    if data.draw(st.booleans()):  # a verdict's colour, as _coloured writes it on a terminal
        cells = [[click.style(str(row[0]), fg="red", bold=True), *row[1:]] for row in cells]
    assert simple_table(headers, cells) == _tabulate(headers, cells)


def test_render_rows_leaves_cells_on_several_lines_to_tabulate():
    # A wrapped cell (terminal.fit_table); line breaks in stored text are shown as "\\n".
    rows = [{"a": Lines("one\ntwo"), "b": 1}, {"a": "x", "b": None}]
    assert render_rows(rows, OutputFormat()) == _tabulate(["a", "b"], [["one\ntwo", 1], ["x", "-"]])
    assert render_rows(rows[1:], OutputFormat()) == "a  b\n-  -\nx  -"
