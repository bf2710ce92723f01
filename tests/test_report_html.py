"""The HTML report: self-contained, escaped, well-formed, and its numbers add up."""

import re
from html.parser import HTMLParser

import pytest

from memgraph.analysis.result import SCHEMA_VERSION, ModuleRow, Peak, Result, TensorRow, TimelinePoint
from memgraph.render.html import render_html
from memgraph.units import human_bytes

VOID = {"meta", "br", "wbr", "hr", "img", "input", "link", "col", "area", "base", "source", "track", "embed", "param"}
SVG_NS = "http://www.w3.org/2000/svg"


def _peak(bytes_: int, iteration: int, event: int) -> Peak:
    by_category = {"parameters": 4000, "gradients": 4000, "optimizer_state": 8000, "activations": bytes_ - 16000,
                   "temporaries": 0}
    top = [TensorRow("fc1.weight", "parameters", "fc1", "setup", 0, [10, 100], "float32", 4000, False),
           TensorRow("aten.mm.default", "activations", "<b>evil</b>", "forward", iteration, [2, 3000], "float32",
                     24000, True)]
    return Peak(bytes=bytes_, iteration=iteration, phase="backward", module="<b>evil</b>", op="aten.mm.default",
                event=event, by_category=by_category, held_past_last_use_bytes=24000, top_tensors=top)


def _result() -> Result:
    phases = ["setup"] + ["forward"] * 3 + ["backward"] * 3 + ["optimizer"] * 2 + ["zero_grad"]
    timeline = [TimelinePoint(event=i, bytes=4000 + 3000 * i, iteration=0 if i == 0 else 1, phase=ph)
                for i, ph in enumerate(phases)]
    timeline += [TimelinePoint(event=10 + p.event, bytes=p.bytes + 1000, iteration=2, phase=p.phase)
                 for p in timeline[1:]]
    modules = [ModuleRow(module="fc1", parameters=1000, trainable_parameters=1000, parameter_bytes=4000,
                         saved_activation_bytes=24000, peak_bytes=40000),
               ModuleRow(module="blocks.0.<b>attn</b>", saved_activation_bytes=1024, peak_bytes=4096)]
    return Result(
        schema_version=SCHEMA_VERSION, model="tests.fixtures.nets:<script>mlp</script>", target="cuda",
        metric="torch.cuda.max_memory_allocated",
        options={"batch_size": 2, "precision": "fp32", "optimizer": "adamw", "gradient_checkpointing": False,
                 "image_size": None, "freeze": []},
        batch=["x=float32[2,100]"], optimizer_impl="foreach", parameters=1000, trainable_parameters=1000,
        static={"parameters": 4000, "buffers": 0, "gradients": 4000, "optimizer_state": 8000},
        first_iteration_peak=_peak(1_234_567, 1, 8), steady_state_peak=_peak(2_345_678, 2, 16),
        modules=modules, timeline=timeline, iteration_starts=[1, 10], trace_seconds=0.5, analysis_seconds=0.01,
        ops={"count": 20, "unknown": {"aten.<i>weird</i>": 3}},
        versions={"memgraph": "0.1.0", "torch": "2.4.0"}, notes=["a note with & ampersand"],
    )


class _Checker(HTMLParser):
    """Records unbalanced tags and the text of <td> cells per table row."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.rows, self._cell = [], [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag in ("td", "th") and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(_result())


@pytest.fixture(scope="module")
def parsed(page) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    return checker


def test_self_contained(page):
    assert "<svg" in page
    assert re.findall(r"https?://[^\s\"'<>)]*", page.replace(SVG_NS, "")) == []
    assert "<script" not in page.lower()  # the model name contains <script>: it must come out escaped
    assert "<link" not in page.lower() and "@import" not in page and "url(" not in page


def test_well_formed(parsed):
    assert parsed.errors == []
    assert parsed.stack == []


def test_peaks_and_modules_appear(page):
    r = _result()
    assert human_bytes(r.steady_state_peak.bytes) in page
    assert human_bytes(r.first_iteration_peak.bytes) in page
    assert "fc1" in page
    assert "blocks.<wbr>0.<wbr>&lt;b&gt;attn&lt;/b&gt;" in page
    assert "<b>attn</b>" not in page and "<b>evil</b>" not in page and "<i>weird</i>" not in page
    assert "&lt;b&gt;evil&lt;/b&gt;" in page
    assert "torch.cuda.max_memory_allocated" in page
    assert "aten.&lt;i&gt;weird&lt;/i&gt;" in page and "no kernel workspace" in page
    assert "no later op reads them" in page
    assert "a note with &amp; ampersand" in page


def test_breakdown_adds_up(parsed):
    peak = _result().steady_state_peak
    categories = set(peak.by_category) | {"unattributed"}
    rows = [row for row in parsed.rows if len(row) == 5 and row[0] in categories | {"total"}]
    body = [row for row in rows if row[0] != "total"]
    total = [row for row in rows if row[0] == "total"]
    assert len(total) == 1
    assert [row[0] for row in body] == [c for c, b in peak.by_category.items() if b]
    printed_total = int(total[0][2].replace(",", ""))
    assert printed_total == peak.bytes
    assert sum(int(row[2].replace(",", "")) for row in body) == printed_total
    assert total[0][1] == human_bytes(peak.bytes)


def test_module_table_has_total(parsed):
    r = _result()
    rows = {row[0]: row for row in parsed.rows if row and row[0] in ("fc1", "blocks.0.<b>attn</b>", "total")}
    assert "fc1" in rows and "blocks.0.<b>attn</b>" in rows  # parsed text is the unescaped name
    module_total = [row for row in parsed.rows if row and row[0] == "total" and len(row) == 7]
    assert module_total and module_total[0][1] == f"{sum(m.parameters for m in r.modules):,}"
    assert module_total[0][5] == human_bytes(sum(m.peak_bytes for m in r.modules))


def test_timeline_markers(page):
    svg = page[page.index("<svg"): page.index("</svg>")]
    assert svg.count("<title>steady-state peak") == 1 and svg.count("<title>first-iteration peak") == 1
    assert "iteration 1" in svg and "iteration 2" in svg
    for phase in ("setup", "forward", "backward", "optimizer", "zero_grad"):
        assert f">{phase}</text>" in svg  # legend


def test_empty_optional_parts():
    r = _result()
    r.timeline, r.ops, r.notes, r.modules = [], {"count": 0, "unknown": {}}, [], []
    page = render_html(r)
    assert "No timeline recorded" in page and "no registry entry" not in page
    checker = _Checker()
    checker.feed(page)
    assert checker.errors == [] and checker.stack == []
