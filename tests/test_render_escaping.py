"""Names are user input: the terminal table shows control characters instead of sending them, and markdown
keeps pipes and HTML out of its structure (the HTML report escapes them too: tests/test_report_html.py)."""

from memgraph.render.text import render_markdown, render_table, visible
from tests.test_report_html import _result


def _hostile():
    r = _result()
    r.model = "evil\x1b[31m|<script>"
    r.modules[0].module = "fc1\x07|<b>"
    return r


def test_visible_writes_control_characters_out():
    assert visible("a\x1b[2Jb\x00\x9b") == "a\\x1b[2Jb\\x00\\x9b"


def test_the_terminal_table_sends_no_control_character():
    text = render_table(_hostile(), depth=3)
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b[31m" in text and "fc1\\x07" in text


def test_markdown_cells_keep_pipes_and_tags_out_of_the_structure():
    text = render_markdown(_hostile(), depth=3)
    assert "<script>" not in text and "<b>" not in text and "\x1b" not in text
    assert "evil\\x1b[31m\\|&lt;script>" in text
    assert "fc1\\x07\\|&lt;b>" in text
