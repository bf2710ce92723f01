"""The HTML report: self-contained, escaped, well-formed, its numbers add up, and its text and
tables are the sections of the text report (sections.build), the per-module one cut to --depth."""

import re
from html.parser import HTMLParser

import pytest

from memgraph.analysis.group_by import at_depth
from memgraph.analysis.result import (
    SCHEMA_VERSION,
    ModalityRow,
    ModuleRow,
    Peak,
    Result,
    TensorRow,
    TimelinePoint,
)
from memgraph.model_spec.options import TrainingOptions
from memgraph.render import sections
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
               ModuleRow(module="blocks.0.<b>attn</b>", saved_activation_bytes=1024, peak_bytes=4096),
               ModuleRow(module="blocks.0.mlp.fc", parameters=50, trainable_parameters=0, parameter_bytes=200,
                         saved_activation_bytes=2048, peak_bytes=1024)]
    # two modalities with parameters, so the per-modality section is built; they add up to the totals
    modalities = [ModalityRow(modality="vision <encoder>", parameters=50, parameter_bytes=200, peak_bytes=1_000_000),
                  ModalityRow(modality="language model", parameters=1000, trainable_parameters=1000,
                              parameter_bytes=4000, saved_activation_bytes=27_072, peak_bytes=1_345_678)]
    device = {"gpu": "h100-80gb", "gpu_name": "GPU <x> & co", "capacity_bytes": 80 * 2**30,
              "allocator_options": "expandable_segments:True", "first_iteration_reserved": 4 * 2**20,
              "steady_state_reserved": 4 * 2**20, "context_bytes": 600 * 2**20,
              "steady_state_device_total": 604 * 2**20, "headroom_bytes": 80 * 2**30 - 604 * 2**20, "fits": True,
              "oom_event": None, "segments": 2, "cuda_malloc_calls": 2,
              # schema 3: the upper end (allocator/replay.py DevicePeaks); an unknown named with markup
              "steady_state_allocated": 2_345_678, "allocated_upper": 2_345_678, "reserved_upper": 4 * 2**20,
              "unknowns_block_bytes": 0, "context_upper_bytes": 900 * 2**20,
              "steady_state_device_total_upper": 904 * 2**20, "fits_with_margin": True, "context_estimated": True,
              "context_assumption": "estimated for <sm90>", "cuda_version": 13, "module_loading": "lazy"}
    unknowns = [{"name": "context <range>", "expected_bytes": 600 * 2**20, "upper_bytes": 900 * 2**20,
                 "source": "test", "counter": "total"}]
    return Result(
        schema_version=SCHEMA_VERSION, model="tests.fixtures.nets:<script>mlp</script>", target="cuda",
        metric="torch.cuda.max_memory_allocated",
        options=TrainingOptions(batch_size=2, optimizer="adamw", freeze=("<b>frozen</b>.*",)).to_dict(),
        batch=["x=float32[2,100]"], optimizer_impl="foreach", parameters=1000, trainable_parameters=1000,
        static={"parameters": 4000, "buffers": 0, "gradients": 4000, "optimizer_state": 8000},
        first_iteration_peak=_peak(1_234_567, 1, 8), steady_state_peak=_peak(2_345_678, 2, 16),
        modules=modules, timeline=timeline, iteration_starts=[1, 10], trace_seconds=0.5, analysis_seconds=0.01,
        ops={"count": 20, "unknown": {"aten.<i>weird</i>": 3}},
        versions={"memgraph": "0.1.0", "torch": "2.4.0"}, notes=["a note with & ampersand"],
        device=device, modalities=modalities, peak_modality="language model",
        phase_peaks=[_peak(2_000_000, 2, 12), _peak(2_345_678, 2, 16)], unknowns=unknowns,
    )


class _Checker(HTMLParser):
    """Records unbalanced tags, every table (header, rows, row and cell classes) and the text of
    headings, paragraphs and preformatted blocks."""

    TEXT = ("h1", "h2", "p", "pre")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.rows, self.tables, self.texts = [], [], [], [], []
        self._cell = self._text = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"headers": [], "rows": [], "row_classes": [], "num": []})
        if tag == "tr":
            self.rows.append([])
            if "thead" not in self.stack:
                self.tables[-1]["row_classes"].append(attrs.get("class") or "")
        if tag in ("td", "th"):
            self._cell = []
            if attrs.get("class") == "num" and tag == "th":
                self.tables[-1]["num"].append(len(self.rows[-1]))
        if tag in self.TEXT:
            self._text = []
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
        if tag == "tr" and self.tables and "table" in self.stack:
            table = self.tables[-1]
            if "thead" in self.stack:
                table["headers"] = self.rows[-1]
            else:
                table["rows"].append(self.rows[-1])
        if tag in self.TEXT and self._text is not None:
            self.texts.append("".join(self._text).strip("\n") if tag == "pre" else "".join(self._text).strip())
            self._text = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._text is not None:
            self._text.append(data)


def _parse(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    return checker


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(_result())


@pytest.fixture(scope="module")
def parsed(page) -> _Checker:
    return _parse(page)


def _table(parsed: _Checker, *headers: str) -> dict:
    """The one table whose header starts with ``headers``."""
    (table,) = [t for t in parsed.tables if t["headers"][:len(headers)] == list(headers)]
    return table


def test_self_contained(page):
    assert "<svg" in page
    assert re.findall(r"https?://[^\s\"'<>)]*", page.replace(SVG_NS, "")) == []
    # the model name contains <script>: it must come out escaped; the only scripts are the timeline's hover
    # data (JSON, ``<`` escaped) and its code
    assert re.findall(r"<script[^>]*>", page, re.I) == ['<script type="application/json" id="timeline-data">',
                                                        "<script>"]
    assert "&lt;script&gt;mlp&lt;/script&gt;" in page
    assert "<link" not in page.lower() and "@import" not in page and "url(" not in page


def test_well_formed(parsed):
    assert parsed.errors == []
    assert parsed.stack == []


def test_peaks_and_modules_appear(page):
    r = _result()
    assert human_bytes(r.steady_state_peak.bytes) in page
    assert human_bytes(r.first_iteration_peak.bytes) in page
    assert "fc1" in page
    assert "blocks.<wbr>0.<wbr>&lt;b&gt;attn&lt;/b&gt;" in page  # module paths may wrap after their dots
    assert "torch.cuda.max_memory_allocated" in page
    assert "no kernel workspace" in page and "no later op reads it" in page


def test_user_input_is_escaped(page):
    """Model, module, op, modality and GPU names come from the user: never raw markup."""
    for raw in ("<b>attn</b>", "<b>evil</b>", "<i>weird</i>", "<script>mlp", "<encoder>", "<x>", "<b>frozen</b>"):
        assert raw not in page
    for escaped in ("&lt;b&gt;evil&lt;/b&gt;", "aten.&lt;i&gt;weird&lt;/i&gt;", "&lt;script&gt;mlp&lt;/script&gt;",
                    "vision &lt;encoder&gt;", "GPU &lt;x&gt; &amp; co", "a note with &amp; ampersand",
                    "&lt;b&gt;frozen&lt;/b&gt;.*"):
        assert escaped in page


def test_breakdown_adds_up(parsed):
    peak = _result().steady_state_peak
    table = _table(parsed, "category", "size")
    body, total = table["rows"][:-1], table["rows"][-1]
    assert table["row_classes"] == [""] * len(body) + ["total"]
    assert [row[0] for row in body] == [c for c, b in peak.by_category.items() if b]
    printed_total = int(total[2].replace(",", ""))
    assert total[0] == "total" and printed_total == peak.bytes
    assert sum(int(row[2].replace(",", "")) for row in body) == printed_total
    assert total[1] == human_bytes(peak.bytes)
    assert table["num"] == [1, 2, 3]  # size, bytes, share are right-aligned


def test_module_table_has_total(parsed):
    r = _result()
    table = _table(parsed, "module")
    names = [row[0] for row in table["rows"]]
    assert "fc1" in names and "blocks.0.<b>attn</b>" in names  # parsed text is the unescaped name
    total = table["rows"][-1]
    assert total[0] == "total" and table["row_classes"][-1] == "total"
    assert total[1] == f"{sum(m.parameters for m in r.modules):,}"  # 1000 + 0 + 50
    assert total[5] == human_bytes(sum(m.peak_bytes for m in r.modules))  # 40000 + 4096 + 1024


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_html_renders_the_text_sections(depth):
    """Every title, line and table of sections.build is in the page, in order, and no other table is."""
    r = _result()
    built = sections.build(r, depth)
    assert {s.key for s in built} >= {"summary", "breakdown", "phase_peaks", "top_tensors", "modalities", "modules",
                                      "ops"}  # the fixture exercises every section
    parsed = _parse(render_html(r, depth))
    titles = iter(parsed.texts)
    assert all(any(text == s.title for text in titles) for s in built)  # each title, in the sections' order
    for s in built:
        if s.preformatted:
            assert "\n".join(s.lines) in parsed.texts
        else:
            assert all(line in parsed.texts for line in s.lines if line)
    tables = [s for s in built if s.rows]
    assert [t["headers"] for t in parsed.tables] == [s.headers for s in tables]
    assert [t["rows"] for t in parsed.tables] == [[[str(c) for c in row] for row in s.rows] for s in tables]
    assert [t["num"] for t in parsed.tables] == [sorted(s.numeric) for s in tables]
    assert [t["row_classes"][-1] == "total" for t in parsed.tables] == [s.total for s in tables]


def test_module_table_honours_depth():
    r = _result()
    by_depth = {}
    for depth in (1, 2, 3):
        rows = _table(_parse(render_html(r, depth)), "module")["rows"]
        by_depth[depth] = [row[0] for row in rows]
        shown = [m for m in at_depth(r.modules, depth) if m.parameters or m.saved_activation_bytes or m.peak_bytes]
        assert by_depth[depth] == [m.module or "(top level)" for m in shown] + ["total"]
    assert by_depth[1] == ["blocks", "fc1", "total"]
    assert by_depth[2] == ["blocks.0", "fc1", "total"]
    assert by_depth[3] == ["blocks.0.<b>attn</b>", "blocks.0.mlp", "fc1", "total"]
    blocks = _table(_parse(render_html(r, 1)), "module")["rows"][0]
    assert blocks[4] == human_bytes(1024 + 2048)  # saved activations of blocks.0.<b>attn</b> + blocks.0.mlp.fc
    assert blocks[5] == human_bytes(4096 + 1024)  # their bytes at the peak


def test_timeline_markers(page):
    """The steady state (iteration 2, events 11-19 of the fixture) with its phases in the strip above the plot
    and the steady-state peak marked; iteration 1 is named in the caption."""
    svg = page[page.index('<svg class="timeline"'): page.index("</svg>")]
    assert svg.count('<circle class="peak"') >= 1 and "<title>peak 2.24 MiB (2,345,678 B)" in svg
    phases = re.findall(r'<rect class="phase"[^>]*><title>(\w+), iteration (\d+)', svg)
    assert phases == [("forward", "2"), ("backward", "2"), ("optimizer", "2"), ("zero_grad", "2")]
    assert "Iteration 1, left out, peaks at 1.18 MiB" in page  # 1,234,567 B


def test_empty_optional_parts():
    r = _result()
    r.timeline, r.ops, r.notes, r.modules = [], {"count": 0, "unknown": {}}, [], []
    r.device, r.modalities, r.phase_peaks = None, [], []
    page = render_html(r)
    assert "No timeline recorded" in page and "no registry entry" not in page
    checker = _parse(page)
    assert checker.errors == [] and checker.stack == []
    assert [t["headers"][0] for t in checker.tables] == ["category", "kind", "category", "module"]  # breakdown, static, tensors, modules
