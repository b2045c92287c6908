"""The shared notebook display types: one look for every chapter's tables."""
import math

from gpucourse.display import Note, Table, format_value


def test_table_text_and_html_show_every_cell_once():
    t = Table([{"op": "add <fp32>", "GB/s": 1234.5678, "note": None},
               {"op": "sum", "GB/s": 1e-7, "note": "ok"}], caption="measured here")
    text = str(t).splitlines()
    assert text[0] == "measured here" and text[1].split() == ["op", "GB/s", "note"]
    assert "1235" in text[2] and "1.000e-07" in text[3]
    h = t._repr_html_()
    assert h.count("<tr>") == 3 and "add &lt;fp32&gt;" in h and "<th>GB/s</th>" in h
    assert t.rows == list(t) and t.columns == ["op", "GB/s", "note"]


def test_pairs_and_lists_build_the_same_kind_of_table():
    p = Table.pairs([("block 32", "occupancy 50 %"), ("block 1024", "occupancy 100 %")], "sweep")
    assert "<thead>" not in p._repr_html_() and "<th style='text-align:left'>block 32</th>" in p._repr_html_()
    assert str(p).splitlines()[1].startswith("block 32  ")
    g = Table.from_lists(["version", "GFLOP/s"], [["v1", 12.0], ["v2", 250.25]])
    assert g[1] == {"version": "v2", "GFLOP/s": 250.25} and g.columns == ["version", "GFLOP/s"]
    assert "no rows" in Table()._repr_html_() and str(Table(caption="c")) == "c"


def test_format_value_and_note():
    assert format_value(0.0) == "0.0" and format_value(math.inf) == "inf" and format_value(3) == "3"
    assert format_value(2.5e6) == "2.500e+06" and format_value(None) == ""
    n = Note("No reference measurement yet.")
    assert n == "No reference measurement yet." and n._repr_markdown_() == "*No reference measurement yet.*"
