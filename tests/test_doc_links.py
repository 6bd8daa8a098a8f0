"""The documentation's links lead somewhere, and its pages speak in the present tense.

* Every link of README.md, CHANGELOG.md and docs/**/*.md that points into this repository (a
  relative link, or an absolute https://github.com/taskgraph-ft/taskgraph/blob|tree/main/ or
  raw.githubusercontent.com link, which README.md uses because it is also the long description
  on the package index) names a file that exists and, with a '#anchor', a heading of that page
  (GitHub's anchors: lower case, punctuation dropped, spaces to '-', '-1', '-2' ... for
  repeated headings). Links elsewhere on the web are not fetched.
* The pages state what is, not how it came to be: no issue numbers, no rounds of work or
  benchmarking, no dates or times of day of a run, no word of who ran what. That history is in
  git; user-visible changes are in CHANGELOG.md.
"""
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md"] + sorted((ROOT / "docs").rglob("*.md"))
PAGES = [p for p in PAGES if p.exists()]
REPO = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
REPO = REPO.rstrip("/")
RAW = REPO.replace("https://github.com/", "https://raw.githubusercontent.com/")
IN_REPO = (f"{REPO}/blob/main/", f"{REPO}/tree/main/", f"{RAW}/main/")


def rel(page):
    return page.relative_to(ROOT).as_posix()


def prose(text):
    """The text outside fenced code blocks (a block becomes as many empty lines)."""
    return re.sub(r"^\s*```.*?^\s*```[^\n]*$", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.M | re.S)


def links(text):
    """The targets of the page's [text](target) and ![alt](target) links, outside code."""
    text = re.sub(r"`[^`\n]*`", "", prose(text))
    return re.findall(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)


def github_anchor(heading):
    """The anchor GitHub gives a heading: its text (links by their text, no markup), lower
    case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page):
    """Every anchor of a page's headings, repeated ones numbered as GitHub numbers them."""
    seen, out = {}, set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", prose(page.read_text()), re.M):
        a = github_anchor(heading)
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def target_of(page, url):
    """(path in this repository, anchor) a link points at, or None for a link elsewhere."""
    for base in IN_REPO:
        if url.startswith(base):
            path, _, anchor = url[len(base):].partition("#")
            return ROOT / path, anchor
    if re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I):  # https:, mailto:, ... elsewhere
        return None
    path, _, anchor = url.partition("#")
    return (page.parent / path if path else page), anchor


def test_the_checks_see_the_links_and_anchors():
    """The parsers work: known links and headings are found."""
    readme = (ROOT / "README.md").read_text()
    assert any(u.startswith(f"{REPO}/blob/main/docs/") for u in links(readme))
    assert "tgcompute" in anchors(ROOT / "docs" / "api" / "compute.md")
    assert github_anchor("`@tg.task`, `tg.Task`") == "tgtask-tgtask"
    assert github_anchor("Work, span, parallelism") == "work-span-parallelism"
    assert links("see [a](b.md#c) and ![p](img/x.svg) but not `[d](e)`") == ["b.md#c", "img/x.svg"]


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_link_names_a_file_and_a_heading_that_exist(page):
    problems = []
    for url in links(page.read_text()):
        target = target_of(page, url)
        if target is None:
            continue
        path, anchor = target
        path = path.resolve()
        if not path.is_relative_to(ROOT):
            problems.append(f"{url}: points outside the repository")
        elif not path.exists():
            problems.append(f"{url}: no file {path.relative_to(ROOT).as_posix()}")
        elif anchor and path.suffix != ".md":
            problems.append(f"{url}: an anchor into a file that is not a page")
        elif anchor and anchor not in anchors(path):
            problems.append(f"{url}: {path.relative_to(ROOT).as_posix()} has no heading "
                            f"with the anchor #{anchor}")
    assert not problems, f"{rel(page)}:\n" + "\n".join(problems)


# ------------------------------------------------------------------ the present tense
# What the pages must not say, with why. Precise on purpose: "round-robin", "a scheduler round
# trip", "1,000 rounds of" a test, "5 alternated rounds" of a measurement and CPython's own
# issues (gh-117783, cited for a fact of the interpreter) are not history.
HISTORY = [
    (r"\bissues?\s+#?\d+", "an issue number"),
    (r"(?<![\w&/])#\d+\b", "an issue number"),
    (r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)"
     r"|this|that|last|latest|previous|earlier|next|final)\s+round(?:'s)?\b(?![- ]trip|-robin)",
     "a round of work or benchmarking"),
    (r"\brounds?\s+of\s+(?:work|benchmarks?|benchmarking|review|measurements?|fixes)\b",
     "a round of work or benchmarking"),
    (r"\b20\d\d-[01]\d-[0-3]\d\b", "the date of a run"),
    (r"\b[0-2]?\d:[0-5]\d(?:\s*-\s*[0-2]?\d:[0-5]\d)?\s*UTC\b", "the time of day of a run"),
    (r"\bmeasured at [0-2]?\d:[0-5]\d\b", "the time of day of a run"),
    (r"\bthe lead\b", "who did what"),
    (r"\b(?:a|the|another) (?:helper|reviewer|maintainer) (?:ran|measured|found|wrote|tried)\b",
     "who did what"),
    (r"\bthe review(?:er)?(?:'s)?\b", "who did what"),
    (r"(?-i:\b(?:I|[Ww]e) (?:ran|measured|found|tried|re-ran)\b)", "who did what"),
]

# Pages that others are rewriting now (each entry says so). Their check is expected to fail
# until then, and fails the suite once it passes (strict): delete the entry with the rewrite.
REWRITE_PENDING = {}


def history(text):
    """[(line number, what, the words)] of the history a page's prose tells."""
    found = []
    body = prose(text)
    body = re.sub(r"\]\([^)]*\)", "]()", body)  # link targets: anchors such as #5-... are not issues
    for n, line in enumerate(body.splitlines(), 1):
        for pattern, what in HISTORY:
            for m in re.finditer(pattern, line, re.I):
                found.append((n, what, m.group(0)))
    return found


def test_the_history_check_tells_history_from_ordinary_words():
    told = [
        "as measured in the sixth round of issue 27", "the third round's code", "(#27)",
        "make bench at 23:30 UTC", "figures of 2026-12-04", "the lead measured it",
        "a helper ran the benchmarks", "found by the review", "we measured 1.9x",
    ]
    for words in told:
        assert history(words), f"not flagged: {words!r}"
    fine = [
        "round-robin start", "a scheduler round trip", "1,000 rounds of parking",
        "5 alternated rounds", "rounds to the nearest", "CPython's gh-117783",
        "[work inflation](performance.md#5-work-inflation-when-the-tasks-themselves-get-slower)",
        "a lead time", "the helpers that rebuild a Task", "the round-off",
    ]
    for words in fine:
        assert not history(words), f"flagged: {words!r}: {history(words)}"


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=pytest.mark.xfail(reason=REWRITE_PENDING[rel(p)], strict=True))
    if rel(p) in REWRITE_PENDING else p for p in PAGES], ids=rel)
def test_the_page_tells_no_history(page):
    found = history(page.read_text())
    assert not found, f"{rel(page)} tells history (it belongs in git and CHANGELOG.md):\n" + \
        "\n".join(f"  line {n} of its prose: {what}: {words!r}" for n, what, words in found)
