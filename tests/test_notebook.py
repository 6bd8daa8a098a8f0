"""A trace displayed in a notebook (Trace._repr_html_): its styles stay inside its own root.

The page is what nbconvert makes of a notebook whose other cells have headings, a table, a
code block and text (JupyterLab's stylesheet included), or, where nbconvert is not installed
(it does not install on 3.13t: one of its dependencies needs Rust), a page of the same
structure without that stylesheet. Headless Chromium renders it twice, with the trace's
output and with a plain one in its place, and a probe script reads the computed styles of
the other cells: they must not change. The summary keeps its monospace layout there."""
import json

import pytest

import taskgraph as tg
from helpers import dump_dom, fib, needs_chromium

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")]

MARKDOWN_BEFORE = ("# My analysis\n\n## Results\n\nSome text with `code`.\n\n| n | fib(n) |\n"
                   "|---|---|\n| 10 | 55 |\n| 20 | 6765 |\n\n```\nplain block\n```\n")
MARKDOWN_AFTER = "## After the trace\n\nMore text.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
PROPS = ["font-family", "font-size", "font-weight", "color", "background-color", "margin-top",
         "margin-bottom", "margin-left", "padding-top", "padding-bottom", "padding-left",
         "border-bottom-style", "border-bottom-width", "border-top-style", "text-align",
         "text-decoration-line", "white-space", "line-height", "max-width"]
PROBE = """<script>
(function () {
  var props = %s, out = {};
  var els = [document.body].concat(Array.prototype.slice.call(document.querySelectorAll(
      '.jp-MarkdownCell h1, .jp-MarkdownCell h2, .jp-MarkdownCell p, .jp-MarkdownCell table, ' +
      '.jp-MarkdownCell th, .jp-MarkdownCell td, .jp-MarkdownCell pre, .jp-MarkdownCell code')));
  els.forEach(function (e, i) {
    var cs = getComputedStyle(e), row = {};
    props.forEach(function (p) { row[p] = cs.getPropertyValue(p); });
    out[i + ':' + e.tagName + ':' + e.textContent.slice(0, 20)] = row;
  });
  var s = document.querySelector('.tg-report pre.tg-summary');
  var summary = s ? {font: getComputedStyle(s).fontFamily, ws: getComputedStyle(s).whiteSpace,
                     width: s.scrollWidth} : null;
  var pre = document.createElement('pre');
  pre.id = 'tg-probe';
  pre.textContent = JSON.stringify({cells: out, summary: summary});
  document.body.appendChild(pre);
})();
</script>""" % json.dumps(PROPS)


def nbconvert_page(output_html):
    """nbconvert's HTML page of a notebook: a markdown cell, a code cell whose output is
    `output_html`, another markdown cell."""
    nbconvert = pytest.importorskip("nbconvert")
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(MARKDOWN_BEFORE),
                nbformat.v4.new_code_cell("tr", execution_count=1, outputs=[
                    nbformat.v4.new_output("execute_result", {"text/html": output_html,
                                                              "text/plain": "<Trace>"},
                                           execution_count=1)]),
                nbformat.v4.new_markdown_cell(MARKDOWN_AFTER)]
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    return body


def plain_page(output_html):
    """A page of the structure nbconvert's lab template gives (its classes), without
    JupyterLab's stylesheet: the cells' own markup, as a markdown renderer makes it."""
    md = ('<div class="jp-Cell jp-MarkdownCell"><div class="jp-RenderedHTMLCommon '
          'jp-RenderedMarkdown">{}</div></div>')
    before = md.format("<h1>My analysis</h1><h2>Results</h2><p>Some text with <code>code</code>."
                       "</p><table><thead><tr><th>n</th><th>fib(n)</th></tr></thead><tbody><tr>"
                       "<td>10</td><td>55</td></tr><tr><td>20</td><td>6765</td></tr></tbody>"
                       "</table><pre><code>plain block</code></pre>")
    after = md.format("<h2>After the trace</h2><p>More text.</p><table><thead><tr><th>a</th>"
                      "<th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>")
    out = ('<div class="jp-Cell jp-CodeCell"><div class="jp-OutputArea-output jp-RenderedHTMLCommon '
           f'jp-RenderedHTML" data-mime-type="text/html">{output_html}</div></div>')
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body class="jp-Notebook">'
            f"{before}{out}{after}</body></html>")


def probe(tmp_path, name, page):
    path = tmp_path / f"{name}.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = dump_dom(path)
    start = dom.index('<pre id="tg-probe">') + len('<pre id="tg-probe">')
    import html
    return json.loads(html.unescape(dom[start:dom.index("</pre>", start)]))


@pytest.fixture(scope="module")
def trace_html():
    with tg.trace() as tr:
        assert tg.compute(fib(16, 8), workers=2) == 987
    return tr._repr_html_()


@needs_chromium
@pytest.mark.parametrize("make_page", [nbconvert_page, plain_page])
def test_a_displayed_trace_leaves_the_other_cells_as_they_were(trace_html, tmp_path, make_page):
    plain = probe(tmp_path, "without", make_page("<p>an ordinary output</p>"))
    with_trace = probe(tmp_path, "with", make_page(trace_html))
    assert len(plain["cells"]) >= 10, plain  # body, headings, text, tables, cells, code
    changed = {k: {p: (v, with_trace["cells"][k][p]) for p, v in row.items()
                   if with_trace["cells"][k][p] != v}
               for k, row in plain["cells"].items()}
    changed = {k: v for k, v in changed.items() if v}
    assert not changed, f"the trace's styles changed other cells: {changed}"
    summary = with_trace["summary"]
    assert summary is not None, "no summary in the displayed trace"
    assert summary["ws"] == "pre" and "mono" in summary["font"].lower(), summary


def test_the_displayed_trace_is_one_element_with_scoped_styles(trace_html):
    """No document, no global style: every rule of its stylesheet starts at its root."""
    import re
    assert trace_html.startswith('<div class="tg-report">') and trace_html.endswith("</div>")
    for tag in ("<html", "<head", "<body", "<!DOCTYPE"):
        assert tag not in trace_html
    css = "".join(re.findall(r"<style>(.*?)</style>", trace_html, re.S))
    selectors = [s.strip() for rule in re.findall(r"([^{}]+)\{", css) for s in rule.split(",")]
    assert selectors and all(s.startswith(".tg-report") for s in selectors), selectors
