"""The built book's prose reads as written by a person: every page's text (code, maths and
scripts left out) has no "N of M" with N > M, no phrase said twice within a few words ("so far …
so far"), no "1 are" (a count of one with a plural verb), and no raw ``{…}``, ``None`` or ``nan``
left by a formatter. Planted sentences prove each check catches its fault and passes its fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup  # with the book's theme (pydata-sphinx-theme)

from tests.test_browser import HTML, book_is_fresh, pages

# Elements whose text is not prose: code (a code cell's source, a code block, inline code), maths
# (MathJax's source), scripts, the theme's chrome. A cell's printed output is read: a reader sees it.
SKIP = {"script", "style", "code", "kbd", "samp", "math", "nav", "header", "footer", "svg",
        "button", "label"}
CODE_BLOCK = re.compile(r"\bhighlight-(?!myst-ansi\b)")  # a code block; myst-ansi: an output
SKIP_CLASSES = {"math", "cell_input", "headerlink", "bd-sidebar-primary", "bd-sidebar-secondary",
                "bd-header-article", "prev-next-area", "bd-footer-article", "bd-footer",
                "bd-toc", "bd-search"}
BLOCKS = ["p", "li", "td", "th", "h1", "h2", "h3", "h4", "div", "dd", "dt", "figcaption", "pre",
          "br", "tr"]

# a number that names (stage 1, layer 12, k = 3) rather than counts is left alone
LABEL = r"(?<!stage )(?<!layer )(?<!block )(?<!seed )(?<!rung )(?<!phase )(?<!= )"
N_OF_M = re.compile(r"\b(\d[\d,]*) of (?:the |its |their |our |these |all )?"
                    r"(?:[a-zA-Z0-9'’-]+ ){0,3}?" + LABEL + r"(\d[\d,]*)\b")
ONE_PLURAL = re.compile(LABEL + r"(?<![\d.,−-])\b1 (?:(?:[a-z-]+ )?(?:are|were|do|have|hold)\b(?! by)|"
                        r"(?:claims|checks|seeds|teachers|cells|images|tests|parts|verdicts|"
                        r"blocks|layers|models|students|chapters)\b)")
RAW = re.compile(r"\{[^{}\s][^{}]*\}|\bNone\b|\bnan\b|\bNaN\b")
NEAR = 6  # words: a phrase said again this soon was said twice by a template
# gpu_check is one word; a number is a token too, so that the names in a list of measurements
# ("cls 0.95 [0.93, 0.97], registers 0.98") are not read as a phrase ("cls registers")
WORD = re.compile(r"[A-Za-z][A-Za-z_'’-]*|\d[\d.,]*")
# Words that make a repeated pair of words no fault ("does not … does not" in a list of verdicts).
FUNCTION = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "and", "or",
            "is", "are", "its", "it", "as", "from", "that", "this", "be", "not", "each", "their",
            "than", "one", "per", "over", "into", "has", "have", "every", "which", "where", "no",
            "does", "do", "same", "seed", "layer", "layers", "k", "p"}


def prose(html: str) -> list[str]:
    """The prose of an HTML page's ``main``: one string per paragraph, cell, item or output line
    group, whitespace collapsed."""
    soup = BeautifulSoup(html, "html.parser")
    root = soup.find("main") or soup.body or soup
    skipped = [e for e in root.find_all(True)
               if e.name in SKIP or set(e.get("class") or ()) & SKIP_CLASSES
               or CODE_BLOCK.search(" ".join(e.get("class") or ()))]
    for e in skipped:
        if not e.decomposed:
            e.decompose()
    for e in root.find_all(BLOCKS):
        e.insert_before("\x00")
        e.insert_after("\x00")
    return [t for b in root.get_text().split("\x00") if (t := " ".join(b.split()))]


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;:!?])\s+(?=[A-Z(*])", text) if s]


def faults(text: str) -> list[str]:
    """What is wrong with one paragraph of generated prose."""
    out = []
    for m in N_OF_M.finditer(text):
        n, total = (int(g.replace(",", "")) for g in m.groups())
        if n > total:
            out.append(f"{m[0]!r}: {n} of {total}")
    out += [f"{m[0]!r}: a count of one with a plural" for m in ONE_PLURAL.finditer(text)]
    out += [f"{m[0]!r}: raw value" for m in RAW.finditer(text)]
    for s in sentences(text):
        words = [w.lower() for w in WORD.findall(s)]
        seen: dict[tuple[str, str], int] = {}
        for i, pair in enumerate(zip(words, words[1:])):
            if set(pair) & FUNCTION or pair == ("et", "al") or min(map(len, pair)) < 2 \
                    or not (pair[0][0].isalpha() and pair[1][0].isalpha()):
                continue
            if pair in seen and 2 < i - seen[pair] <= NEAR:
                out.append(f"{' '.join(pair)!r} twice in: {s[:100]!r}")
                break
            seen[pair] = i
    return out


def site_faults(site: Path) -> list[str]:
    return [f"{page.relative_to(site).as_posix()}: {f}" for page in pages(site)
            for block in prose(page.read_text(errors="replace")) for f in faults(block)]


@pytest.mark.parametrize("bad", [
    "65 of the design's 48 stage-1 teachers are measured.",
    "So far no cell measured so far holds.",
    "1 are not testable here.",
    "The book runs 1 checks.",
    "13 of the 12 layers are measured.",
    "The counts are {2: 25, 3: 10, 4: 25}.",
    "The model is None.",
    "val acc nan, trajectory 13 layers.",
    "Rank falls for cls tokens and rank falls for patches.",
])
def test_a_planted_fault_is_caught(bad: str) -> None:
    assert faults(bad), bad


@pytest.mark.parametrize("good", [
    "48 of the design's 65 stage-1 teachers are measured.",
    "So far no cell holds.",
    "1 is not testable here; 3 are inconclusive.",
    "The book runs 1 check of 25 claims.",
    "Of the 3 seeds, 1 holds and 2 do not.",
    "At k = 2 of 12 blocks, the cut holds.",
    "65 cells stored, 13 of stage 1 to measure; cells of stage 1 are listed.",
    "The value 0.1 are the ends of an interval is not plain; 2 are.",
    "Seed 0: cls 0.95 [0.93, 0.97], registers 0.98, seed 1: cls 0.94, registers 0.97.",
])
def test_its_fix_passes(good: str) -> None:
    assert faults(good) == [], good


def test_code_and_maths_are_not_prose() -> None:
    html = ('<main><p>The dict <code>{2: 25}</code> and $x$ <span class="math">\\(\\{a\\}\\)</span>'
            ' are fine.</p><div class="cell_input"><pre>x = None</pre></div>'
            '<div class="highlight-python"><pre>nan</pre></div>'
            '<p>But {2: 25} is not.</p><div class="output stream highlight-myst-ansi"><pre>'
            'val acc nan</pre></div></main>')
    assert prose(html) == ["The dict and $x$ are fine.", "But {2: 25} is not.", "val acc nan"]
    assert [f for b in prose(html) for f in faults(b)] == ["'{2: 25}': raw value",
                                                           "'nan': raw value"]


def test_a_planted_page_is_caught_and_a_clean_one_passes(tmp_path: Path) -> None:
    (tmp_path / "good.html").write_text("<main><p>Of the 25 claims, 5 hold.</p></main>")
    assert site_faults(tmp_path) == []
    (tmp_path / "bad.html").write_text("<main><p>Of the 5 claims, 25 of 5 hold.</p></main>")
    assert site_faults(tmp_path) == ["bad.html: '25 of 5': 25 of 5"]


def test_the_books_prose() -> None:
    if not book_is_fresh():
        pytest.skip("the book is not built, or older than its sources: `python -m raptor build`")
    problems = site_faults(HTML)
    assert not problems, "\n".join(problems)
