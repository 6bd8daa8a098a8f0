"""`make pictures`: draws README.md's first picture by running the code beside it.

The README's first python block ends by drawing the executed graph into fib.svg; this runs
that block as it is written (in a scratch directory, with the interpreter running this) and
copies the picture to docs/img/fib-trace.svg, the image the README shows under it. So the
picture is what the code draws; tests/test_docs.py checks that they still agree."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "img" / "fib-trace.svg"


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


def main() -> int:
    code = first_block()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-c", code], cwd=d, check=True)
        shutil.copyfile(pathlib.Path(d) / drawn_file(code), PICTURE)
    print(f"wrote {PICTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
