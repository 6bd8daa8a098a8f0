"""The documentation keeps up with the code: every public name has its entry in docs/api.md."""
import os
import pathlib
import re

import taskgraph as tg

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def test_every_public_name_is_in_the_api_reference():
    text = (DOCS / "api.md").read_text()
    missing = [n for n in tg.__all__ if not re.search(rf"`tg\.{n}\b", text)]
    assert not missing, f"not documented in docs/api.md: {missing}"


def test_every_name_of_the_dask_backend_is_in_the_api_reference():
    import importlib.util
    if importlib.util.find_spec("distributed") is None and not os.environ.get("TASKGRAPH_REQUIRE_DASK"):
        import pytest
        pytest.skip("the dask extra is not installed (make setup installs it)")
    import taskgraph.dask
    text = (DOCS / "api.md").read_text()
    missing = [n for n in taskgraph.dask.__all__ if f"`taskgraph.dask.{n}" not in text]
    assert not missing, f"not documented in docs/api.md: {missing}"


def test_every_design_note_named_in_the_docs_exists():
    for md in list(DOCS.rglob("*.md")) + [DOCS.parent / "README.md"]:
        for ref in re.findall(r"(?:docs/)?(design/[a-z_]+\.md)", md.read_text()):
            assert (DOCS / ref).exists(), f"{md.name} names {ref}, which does not exist"
