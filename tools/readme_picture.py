"""`make pictures`: draws README.md's pictures.

* docs/img/fib-trace.svg: the README's first python block ends by drawing the executed graph
  into fib.svg; this runs that block as it is written (in a scratch directory, with the
  interpreter running this) and copies the picture. So the picture is what the code draws;
  tests/test_docs.py checks that they still agree.
* docs/img/notebook-trace.png: a trace of the same computation displayed in a notebook
  (``tr._repr_html_()`` in an output cell under a markdown cell), rendered by headless
  Chromium (skipped, with a message, when Chromium is not installed).
* docs/img/dashboard.png: the live dashboard (``tg.dashboard()``) during a real run of
  examples/dashboard.py (a pipeline of three task functions, a few failures, fork-join fib,
  a traced compute), as headless Chromium shows it (driven over its DevTools protocol,
  tests/cdp.py)."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "img" / "fib-trace.svg"
NOTEBOOK = ROOT / "docs" / "img" / "notebook-trace.png"
DASHBOARD = ROOT / "docs" / "img" / "dashboard.png"
# A notebook page: a markdown cell, then the cell that displays the trace (the look of a
# notebook's own styles is not ours to copy: plain cells, as a renderer without a theme shows).
_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body{{font-family:sans-serif;margin:16px;width:968px}} .prompt{{font-family:monospace;color:#555}}
</style></head><body><div class="md"><h2>Fork-join fib on 2 workers</h2><p>The trace of the
README's first example, displayed by its cell.</p></div><div class="prompt">In [3]: tr</div>
<div class="prompt">Out[3]:</div><div class="out">{output}</div></body></html>"""


def first_block(readme: pathlib.Path = ROOT / "README.md") -> str:
    """The README's first python block, and the file it draws (named in its last
    visualize call)."""
    m = re.search(r"^```python\n(.*?)^```", readme.read_text(), re.M | re.S)
    if not m:
        raise SystemExit("README.md has no python block")
    return m.group(1)


def drawn_file(code: str) -> str:
    names = re.findall(r"\.visualize\(\s*[\"']([^\"']+\.svg)[\"']", code)
    if not names:
        raise SystemExit("README.md's first block draws no .svg picture")
    return names[-1]


def notebook_picture(code: str, d: pathlib.Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print(f"no headless Chromium: {NOTEBOOK.relative_to(ROOT)} not redrawn")
        return
    # The block, with its trace displayed as a notebook would: tr._repr_html_() into a file.
    show = code + "\nopen('trace.html', 'w').write(tr._repr_html_())\n"
    subprocess.run([sys.executable, "-c", show], cwd=d, check=True, capture_output=True)
    page = d / "notebook.html"
    page.write_text(_PAGE.format(output=(d / "trace.html").read_text()), encoding="utf-8")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1000,1080", f"--screenshot={NOTEBOOK}", page.as_uri()],
                   check=True, capture_output=True)
    print(f"wrote {NOTEBOOK.relative_to(ROOT)}")


def dashboard_picture() -> None:
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        print(f"no headless Chromium: {DASHBOARD.relative_to(ROOT)} not redrawn")
        return
    import importlib.util
    import time
    sys.path.insert(0, str(ROOT / "tests"))
    from cdp import Browser
    spec = importlib.util.spec_from_file_location("dashboard_example", ROOT / "examples" / "dashboard.py")
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # a module as any imported one (its tasks' home)
    spec.loader.exec_module(example)

    def shoot(d):
        with Browser() as b:
            b.open(d.url, width=1200, height=1400)
            b.wait_for("document.body.dataset.updates >= 2", timeout=120)
            time.sleep(5)  # the stream fills its window
            b.wait_for("document.querySelectorAll('.trace img, .trace p.note').length > 0", timeout=60)
            b.screenshot(DASHBOARD)

    example.run(window=3.0, while_running=shoot, quiet=True)
    print(f"wrote {DASHBOARD.relative_to(ROOT)}")


def main() -> int:
    code = first_block()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-c", code], cwd=d, check=True)
        shutil.copyfile(pathlib.Path(d) / drawn_file(code), PICTURE)
        print(f"wrote {PICTURE.relative_to(ROOT)}")
        notebook_picture(code, pathlib.Path(d))
    dashboard_picture()
    return 0


if __name__ == "__main__":
    sys.exit(main())
