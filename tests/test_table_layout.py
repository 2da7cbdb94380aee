"""The table layout against tabulate's "plain" format, which it reproduces without tabulate's cost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tabulate import tabulate

from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._output.tables import _paint, _Painted, table

_WORDS = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=14)
_CELLS = st.one_of(
    _WORDS, st.none(), st.integers(-999, 99999), st.just(""),
    st.sampled_from([_paint("rejected", True), _paint("ok", True)]),  # _paint's colours
    st.text(max_size=6),  # anything at all: line breaks, wide and combining characters
)


def tabulated(headers: list[str], rows: list[list], no_headers: bool) -> str:
    """The layout as tabulate writes it, lines stripped on the right (kubectl's tables have no
    trailing blanks), of the cells as shown (each made safe to show, but what _paint painted)."""
    rows = [[c if c is None or isinstance(c, _Painted) else shown(str(c).strip()) for c in row] for row in rows]
    text = tabulate(rows, headers=() if no_headers else headers, tablefmt="plain", disable_numparse=True,
                    stralign="left")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda columns: st.tuples(
    st.lists(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ-", min_size=1, max_size=10), min_size=columns,
             max_size=columns),
    st.lists(st.lists(_CELLS, min_size=columns, max_size=columns), max_size=8))), st.booleans())
def test_table_is_tabulates_plain_layout(table_, no_headers):
    headers, rows = table_
    assert table(headers, rows, no_headers) == tabulated(headers, rows, no_headers)


def test_table_pads_columns_to_the_widest_cell_and_colour_takes_no_room():
    text = table(["NAME", "STATUS"], [["a", _paint("rejected", True)], ["a-long-name", "ok"]])
    assert text == ("NAME         STATUS\n"
                    "a            \x1b[31mrejected\x1b[0m\n"
                    "a-long-name  ok\n")
