"""The built book in a real browser (headless Chromium, Debian's ``chromium`` + ``chromium-driver``).

Every page of ``book/_build/html`` (built first unless it is newer than every source in ``book/``)
is served over HTTP and opened: no SEVERE console message, every image loaded, maths typeset by
MathJax (no raw ``$$``, ``\\(`` or ``\\[`` left in the text), every internal link to an existing
file and anchor, every claim ID of the claims page linked to an anchor, no stray output (a
``PosixPath(…)``, a lone ``_`` or ``None``, an object's repr), no table with pandas' integer
index, a ``nan`` or ``…`` rows, no glued value in bold, every claims table followed by a link to
its data, every figure's caption linking to its data (CSV or JSON), as the result box's copy of
a figure does, and at a 420-px-wide viewport no horizontal scrolling of the page (a wide table
scrolls in its own box), no text past its right edge, no figure wider than the screen (the box
figures included: one that scrolls in its box is not legible), and no figure text under 8 px as
rendered (font sizes read from each SVG, scaled by the width it is shown at). Each chapter that
tests claims opens with their verdicts and its key figure: at 1,280 × 900 px every badge of its
result box and the whole figure are in the first screen, the figure's text at 8 px or more; the
intro, the claims page and every chapter show their scope sentence (``book/_ext/scope.py``)
wholly in that first screen. Screenshots of each page (desktop first screen and phone) go to
``book/_build/screenshots/``. Planted broken sites prove that the checks fail. ``make browser``
runs these after ``make build``; elsewhere they skip, saying why.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
HTML = BOOK / "_build" / "html"
SHOTS = BOOK / "_build" / "screenshots"
CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
PHONE, DESKTOP = 420, 1280
TOLERANCE = 2  # px of sub-pixel rounding
FOLDED_LINES = 3  # a claim's sentence on a phone: two lines folded (raptor.css), and slack
MIN_TEXT_PX = 8  # the smallest figure text a phone shows

browser = pytest.mark.browser


# --- the site ------------------------------------------------------------------------------------

def pages(site: Path) -> list[Path]:
    """Every HTML page of a built site (not the theme's static files or sources)."""
    return sorted(p for p in site.rglob("*.html")
                  if not {"_static", "_sources", "_images"} & set(p.relative_to(site).parts))


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(v for k, v in attrs if k in ("id", "name") and v)


@functools.lru_cache(maxsize=None)
def anchors(page: Path) -> frozenset[str]:
    """The ids (and ``name`` s) a page defines."""
    parser = _Anchors()
    parser.feed(page.read_text(errors="replace"))
    return frozenset(parser.ids)


def resolve(site: Path, base: str, href: str) -> str | None:
    """The problem with internal link ``href`` (absolute, under ``base``), or None."""
    parts = urlsplit(href)
    target = site / unquote(parts.path[len(urlsplit(base).path):])
    if target.is_dir():
        target /= "index.html"
    if not target.is_file():
        return f"broken link {href}: no file {target.relative_to(site)}"
    frag = unquote(parts.fragment)
    if frag and target.suffix == ".html" and frag not in anchors(target):
        return f"broken link {href}: no anchor #{frag} in {target.relative_to(site)}"
    return None


def book_is_fresh() -> bool:
    """The site was written after the last change to any source file of the book."""
    built = [p.stat().st_mtime for p in HTML.rglob("*.html")] if HTML.is_dir() else []
    sources = (p for p in BOOK.rglob("*") if p.is_file() and "_build" not in p.parts)
    return bool(built) and max(built) >= max(p.stat().st_mtime for p in sources)


# --- the browser ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def driver() -> Iterator:
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="selenium is not installed (pip install -e '.[dev]')")
    if not (CHROMIUM.exists() and DRIVER.exists()):
        pytest.skip("browser tests need Debian's chromium and chromium-driver "
                    "(apt-get install -y chromium chromium-driver; `make setup` does it as root)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={DESKTOP},900", "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(str(DRIVER)))
    d.set_script_timeout(120)  # a loaded CI machine: MathJax and images may take a while
    d.set_page_load_timeout(180)
    yield d
    d.quit()


@pytest.fixture()
def serve() -> Iterator:
    """``serve(folder)`` -> the base URL of a local HTTP server of ``folder``."""
    servers: list[http.server.ThreadingHTTPServer] = []

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    def start(folder: Path) -> str:
        handler = functools.partial(Quiet, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


LOAD_IMAGES_AND_MATHS = """
const done = arguments[arguments.length - 1];
const imgs = [...document.images];
imgs.forEach(i => { i.loading = 'eager'; });
const loaded = Promise.all(imgs.map(i => i.decode().catch(() => null)));
const typeset = (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => true) : Promise.resolve(false);
Promise.all([loaded, typeset]).then(([, mj]) => done(mj)).catch(e => done(String(e)));
"""

INSPECT = """
const out = {};
out.images = [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
  .map(i => i.getAttribute('src'));
out.links = [...document.querySelectorAll('a[href]')].map(a => a.href);
const maths = [...document.querySelectorAll('.math')];
out.maths = maths.length;
out.untypeset = maths.filter(m => !m.querySelector('mjx-container')).length;
out.mathjax = document.querySelectorAll('mjx-container').length;
const body = (document.querySelector('main') || document.body).cloneNode(true);
body.querySelectorAll('pre, code, script, style, mjx-container, .highlight').forEach(e => e.remove());
out.text = body.textContent;
out.claimLinks = [...document.querySelectorAll('.rc-claim a.rc-id')].map(a => [a.textContent, a.href]);
out.stray = [...document.querySelectorAll('.cell_output')]
  .filter(o => /\\b(Posix|Windows)Path\\(|^\\s*(_|None|\\[\\]|\\(\\))\\s*$|^\\s*<[\\w.]+( object)? at 0x[0-9a-f]+>\\s*$|^\\s*<Figure size [^>]*>\\s*$/
    .test(o.textContent))
  .map(o => o.textContent.trim().slice(0, 80));
// the page's scope (book/_ext/scope.py): wholly in the first screen at 1,280 x 900
out.scope = [...document.querySelectorAll('.rc-scope')].map(e => {
  const r = e.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; });
// a table with pandas' integer index (rows 0, 1, 2, ... as header cells), a truncated frame or a nan
out.tables = [];
for (const t of document.querySelectorAll('article table, main table')) {
  const heads = [...t.querySelectorAll('tbody tr')].map(r => r.querySelector('th'));
  if (heads.length && heads.every((h, i) => h && h.textContent.trim() === String(i)))
    out.tables.push('a pandas index 0–' + (heads.length - 1));
  const cells = [...t.querySelectorAll('td, th')].map(c => c.textContent.trim());
  if (cells.some(c => /^(nan|NaN|None|<NA>|NaT)$/.test(c))) out.tables.push('a nan or None cell');
  if (cells.some(c => c === '...' || c === '…')) out.tables.push('a truncated table (… rows)');
}
// a glued value (myst-nb's .pasted-text) set in bold: glued numbers read as the text around them
out.bold = [...document.querySelectorAll('.pasted-text')]
  .filter(e => !e.closest('h1, h2, h3, h4, th, .rc-badge') && e.getBoundingClientRect().height > 0
          && +getComputedStyle(e).fontWeight >= 600)
  .map(e => e.textContent.trim().slice(0, 60));
out.undata = [...document.querySelectorAll('table.rc-table:not(.rc-verdicts)')]
  .filter(t => { const next = (t.closest('.rc-scroll') || t).nextElementSibling;
                 return !(next && next.querySelector('a[href$=".json"], a[href$=".csv"]')); }).length;
// a figure: an image of the text, linked from its caption, or the result box's copy, from the box
const article = document.querySelector('article') || document.querySelector('main')
  || document.body;
const data = 'a[href$=".csv"], a[href$=".json"]';
out.unlinked = [...article.querySelectorAll('img')]
  .filter(i => { const copy = i.closest('.rc-result-figure');
                 if (copy) return !copy.querySelector(data);
                 const f = i.closest('figure');
                 return !(f && f.querySelector(
                   'figcaption a[href$=".csv"], figcaption a[href$=".json"]')); })
  .map(i => i.getAttribute('src'));
const badges = [...document.querySelectorAll('.rc-result .rc-badge')];
out.badges = badges.length;
out.badgesFirstScreen = badges.filter(b => { const r = b.getBoundingClientRect();
  return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }).length;
out.keyFigures = [...document.querySelectorAll('.rc-result-figure img')].map(i => {
  const r = i.getBoundingClientRect(); return [i.getAttribute('src'), r.top, r.bottom]; });
out.inner = window.innerHeight;
return out;
"""

LAYOUT = """
return JSON.stringify([...document.querySelectorAll('main, .bd-sidebar-primary, .bd-sidebar-secondary')]
  .map(e => e.getBoundingClientRect()));
"""


def settle(driver, polls: int = 50) -> None:
    """Wait (up to ``polls`` × 0.1 s) until the layout stops moving after a resize: the theme's
    sidebars slide away, and a check or screenshot taken meanwhile sees them half-way."""
    last = None
    for _ in range(polls):
        now = driver.execute_script(LAYOUT)
        if now == last:
            return
        last = now
        time.sleep(0.1)


PHONE_CHECK = """
const tol = arguments[0];
const el = document.scrollingElement;
const out = {scroll: el.scrollWidth, inner: window.innerWidth, wide: [], badges: [], figures: []};
const skip = 'table, pre, .highlight, .output, .cell_output, mjx-container, .MathJax, .sd-tab-set';
const text = document.querySelector('article') || document.querySelector('main') || document.body;
for (const p of text.querySelectorAll('p, li, h1, h2, h3')) {
  if (p.closest(skip) || p.offsetParent === null) continue;
  const r = p.getBoundingClientRect();
  if (r.width && r.right > window.innerWidth + tol) out.wide.push(p.textContent.slice(0, 60));
}
for (const i of text.querySelectorAll('img')) {
  const r = i.getBoundingClientRect();
  if (r.width && r.right > window.innerWidth + tol) out.figures.push(i.getAttribute('src'));
}
for (const b of document.querySelectorAll('.rc-badge')) {
  const r = b.getBoundingClientRect();
  if (r.right > window.innerWidth + tol) out.badges.push(b.textContent);
}
out.tall = [];  // a claim's sentences, each at most a few lines until tapped
for (const v of document.querySelectorAll('.rc-vals > *, .rc-result-ours')) {
  const lines = v.getBoundingClientRect().height / (parseFloat(getComputedStyle(v).lineHeight) || 20);
  if (lines > arguments[1]) out.tall.push([Math.round(lines), v.textContent.slice(0, 50)]);
}
return out;
"""

FIGURE_TEXT = """
const done = arguments[arguments.length - 1];
const page = document.querySelector('article') || document.querySelector('main') || document.body;
const imgs = [...page.querySelectorAll(arguments[0])]
  .filter(i => /[.]svg([?#]|$)/.test(i.src) && i.getBoundingClientRect().width > 0);
Promise.all(imgs.map(async i => {
  const text = await (await fetch(i.src)).text();
  const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
  const box = (svg.getAttribute('viewBox') || '').trim().split(/[\\s,]+/).map(Number);
  const units = box.length === 4 && box[2] ? box[2] : parseFloat(svg.getAttribute('width'));
  // matplotlib draws text as glyph paths scaled by size / 100, or as <text> with a font size
  const sizes = [...text.matchAll(/scale\\(([0-9.]+)[ ,]+-([0-9.]+)\\)/g)].map(m => 100 * m[1])
    .concat([...text.matchAll(/font(?:-size)?:\\s*([0-9.]+)px/g)].map(m => +m[1]));
  if (!sizes.length || !units) return null;
  return [i.getAttribute('src'), Math.min(...sizes) * i.getBoundingClientRect().width / units];
})).then(r => done(r.filter(Boolean))).catch(e => done(String(e)));
"""

REDIRECT = re.compile(r'http-equiv="Refresh" content="0; url=([^"]+)"', re.I)
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\begin\{")


def figure_text(driver, name: str, selector: str, width: int) -> list[str]:
    """The SVG figures matching ``selector`` whose smallest text is under ``MIN_TEXT_PX`` as
    rendered at the present ``width`` of the window."""
    texts = driver.execute_async_script(FIGURE_TEXT, selector)
    if isinstance(texts, str):
        return [f"{name}: figure text not measured: {texts}"]
    return [f"{name}: figure text {px:.1f} px at {width} px (under {MIN_TEXT_PX}): {src}"
            for src, px in texts if px < MIN_TEXT_PX]


def check_site(site: Path, base: str, driver, shots: Path | None = None,
               boxes: dict[str, int] | None = None, scoped: Iterable[str] = ()) -> list[str]:
    """Open every page of ``site`` (served at ``base``) and list what is wrong; ``boxes`` maps a
    page to the verdict badges its result box must show in its first screen at 1,280 px;
    ``scoped`` names the pages whose scope sentence must be wholly in that first screen."""
    boxes, scoped = boxes or {}, set(scoped)
    problems: list[str] = []
    if shots:
        shutil.rmtree(shots, ignore_errors=True)
        shots.mkdir(parents=True)
    driver.get_log("browser")  # drop anything left from earlier pages
    for page in pages(site):
        name = page.relative_to(site).as_posix()
        if m := REDIRECT.search(page.read_text(errors="replace")[:500]):  # index.html -> intro.html
            if p := resolve(site, base, base + (page.parent / m[1]).relative_to(site).as_posix()):
                problems.append(f"{name}: redirect: {p}")
            continue
        driver.set_window_size(DESKTOP, 900)
        driver.get(base + name)
        typeset = driver.execute_async_script(LOAD_IMAGES_AND_MATHS)
        seen = driver.execute_script(INSPECT)
        problems += [f"{name}: console {e['level']}: {e['message']}"
                     for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        problems += [f"{name}: image not loaded: {src}" for src in seen["images"]]
        if seen["maths"] and (typeset is not True or seen["untypeset"] or not seen["mathjax"]):
            problems.append(f"{name}: maths not rendered ({seen['untypeset']} of {seen['maths']} "
                            f"untypeset; MathJax: {typeset})")
        if m := RAW_TEX.search(seen["text"]):
            problems.append(f"{name}: raw TeX left in the text: "
                            f"{seen['text'][max(m.start() - 30, 0):m.end() + 30]!r}")
        for href in dict.fromkeys(seen["links"]):
            if href.startswith(base) and (p := resolve(site, base, href)):
                problems.append(f"{name}: {p}")
        for cid, href in seen["claimLinks"]:
            if "#" not in href or not href.startswith(base):
                problems.append(f"{name}: claim {cid} does not link to an anchor of the book: {href}")
        problems += [f"{name}: stray output: {t!r}" for t in seen["stray"]]
        if name in scoped and not any(seen["scope"]):
            problems.append(f"{name}: no scope sentence (what was tested, at what scale) wholly in "
                            f"the first screen at {DESKTOP} px")
        problems += [f"{name}: table with {t}" for t in seen["tables"]]
        problems += [f"{name}: a glued value in bold: {t!r}" for t in seen["bold"]]
        if seen["undata"]:
            problems.append(f"{name}: {seen['undata']} claims table(s) without a link to its data")
        problems += [f"{name}: a figure without a link to its data (CSV or JSON): {src}"
                     for src in seen["unlinked"]]
        if seen["badges"] != seen["badgesFirstScreen"] or seen["badges"] < boxes.get(name, 0):
            problems.append(f"{name}: {seen['badgesFirstScreen']} verdict badge(s) of the result "
                            f"box in the first screen at {DESKTOP} px, expected "
                            f"{max(seen['badges'], boxes.get(name, 0))}")
        if name in boxes and not seen["keyFigures"]:
            problems.append(f"{name}: no key figure in the result box")
        problems += [f"{name}: the result box's figure is not wholly in the first screen at "
                     f"{DESKTOP} px (from {top:.0f} to {bottom:.0f} px of {seen['inner']}): {src}"
                     for src, top, bottom in seen["keyFigures"]
                     if top < 0 or bottom > seen["inner"] + TOLERANCE]
        problems += figure_text(driver, name, ".rc-result-figure img", DESKTOP)
        if shots:
            driver.save_screenshot(str(shots / f"{name.replace('/', '_')[:-5]}-desktop.png"))
        driver.set_window_size(PHONE, 900)
        settle(driver)
        fit = driver.execute_script(PHONE_CHECK, TOLERANCE, FOLDED_LINES)
        if fit["scroll"] > fit["inner"] + TOLERANCE:
            problems.append(f"{name}: scrolls horizontally at {PHONE} px "
                            f"(scrollWidth {fit['scroll']} > innerWidth {fit['inner']})")
        problems += [f"{name}: text past the right edge at {PHONE} px: {t!r}" for t in fit["wide"]]
        problems += [f"{name}: verdict off-screen at {PHONE} px: {b!r}" for b in fit["badges"]]
        problems += [f"{name}: a claim's sentence {n} lines tall at {PHONE} px, not folded: {t!r}"
                     for n, t in fit["tall"]]
        problems += [f"{name}: figure wider than the screen at {PHONE} px: {src}"
                     for src in fit["figures"]]
        problems += figure_text(driver, name, "img", PHONE)
        if shots:
            driver.save_screenshot(str(shots / f"{name.replace('/', '_')[:-5]}-phone.png"))
    return problems


# --- the book ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site() -> Path:
    if not book_is_fresh():
        from raptor.book.runner import build_book
        build_book(BOOK)
    return HTML


def result_boxes() -> dict[str, int]:
    """Each chapter page that tests claims, and how many: its result box shows one badge each."""
    out = {}
    for f in (BOOK / "claims").glob("*.json"):
        if n := len(json.loads(f.read_text())):
            out[f"chapters/{f.stem.replace('-', '_')}.html"] = n
    return out


def scoped_pages(site: Path) -> list[str]:
    """The pages that must open with their scope: the intro, the claims page, every chapter."""
    return ["intro.html", "claims.html",
            *(p.relative_to(site).as_posix() for p in (site / "chapters").glob("*.html"))]


@browser
def test_every_page_of_the_book_renders_and_links(site: Path, driver, serve) -> None:
    base = serve(site)
    boxes = result_boxes()
    assert len(boxes) >= 7, boxes  # every chapter but the atlas and the analysis tests claims
    problems = check_site(site, base, driver, shots=SHOTS, boxes=boxes, scoped=scoped_pages(site))
    assert len(pages(site)) >= 10 and any(SHOTS.glob("claims-phone.png"))
    assert not problems, "\n".join(problems)


@browser
def test_every_claim_id_links_to_its_evidence(site: Path, driver, serve) -> None:
    base = serve(site)
    driver.set_window_size(DESKTOP, 900)
    driver.get(base + "claims.html")
    links = driver.execute_script(INSPECT)["claimLinks"]
    tested = {c["id"] for f in (BOOK / "claims").glob("*.json") for c in json.loads(f.read_text())}
    assert {cid for cid, _ in links} == tested and tested
    for cid, href in links:
        assert "#claims-" in href and resolve(site, base, href) is None, (cid, href)


# --- planted failures ----------------------------------------------------------------------------

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201ba1b5ad0"
                    "0000000049454e44ae426082")


#: a matplotlib-like figure 720 pt wide whose text is 9 pt (a glyph path scaled by 9 / 100)
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="720pt" height="72pt" viewBox="0 0 720 72">'
       '<g transform="translate(10 40) scale(0.09 -0.09)"><path d="M 0 0 L 300 300 L 600 0 z"/></g>'
       '</svg>')
FIGURE = ('<figure style="overflow-x:auto"><img src="fig.svg" style="max-width:none;width:720px">'
          '<figcaption>Fig. 1. <a href="fig.csv">Data (CSV)</a></figcaption></figure>')


def _tiny_site(folder: Path, body: str) -> Path:
    folder.mkdir()
    (folder / "dot.png").write_bytes(PNG)
    (folder / "fig.svg").write_text(SVG)
    (folder / "fig.csv").write_text("x,y\n0,1\n")
    (folder / "other.html").write_text('<html><head><link rel="icon" href="data:,"></head><body><main>'
                                       '<h1 id="here">Other</h1></main></body></html>')
    (folder / "index.html").write_text(
        '<html><head><meta name="viewport" content="width=device-width">'
        '<link rel="icon" href="data:,"></head><body><main>'
        '<p>Fine text.</p><figure><img src="dot.png"><figcaption><a href="fig.csv">data</a>'
        f'</figcaption></figure><a href="other.html#here">ok</a>{body}'
        '</main></body></html>')
    return folder


@browser
def test_a_clean_tiny_site_passes(tmp_path: Path, driver, serve) -> None:
    site = _tiny_site(tmp_path / "clean", "")
    assert check_site(site, serve(site), driver) == []
    fine = ('<div class="rc-result"><span class="rc-badge">✓ holds</span></div>'
            '<div class="rc-result-figure"><img src="dot.png"><a href="fig.csv">data</a></div>'
            '<div class="rc-scroll" style="overflow-x:auto"><table class="rc-table"><tr>'
            '<td style="min-width:900px">wide, in its own box</td></tr></table></div>'
            '<p class="rc-data"><a href="data.json">data</a></p>'
            '<figure><img src="dot.png" style="width:100%;max-width:380px"><figcaption>'
            '<a href="fig.csv">data</a></figcaption></figure>'
            '<p>Found <strong>C1 <span class="pasted-text" style="font-weight:400">0.42</span>'
            '</strong>.</p><table><tr><th>profile</th><td>cpu</td></tr></table>')
    site = _tiny_site(tmp_path / "fine", fine)
    (site / "data.json").write_text("[]")
    assert check_site(site, serve(site), driver, boxes={"index.html": 1}) == []


SCOPE = '<div class="rc-scope"><p>Tested at the <code>cpu</code> profile: small ViTs.</p></div>'


@browser
@pytest.mark.parametrize("body, expect", [
    (SCOPE, []),
    ("", ["index.html: no scope sentence (what was tested, at what scale) wholly in the first "
          "screen at 1280 px"]),
    ('<div style="height:1200px"></div>' + SCOPE,
     ["index.html: no scope sentence (what was tested, at what scale) wholly in the first "
      "screen at 1280 px"]),
])
def test_a_page_without_its_scope_in_the_first_screen_is_caught(tmp_path: Path, driver, serve,
                                                                 body: str,
                                                                 expect: list[str]) -> None:
    site = _tiny_site(tmp_path / "scope", body)
    assert check_site(site, serve(site), driver, scoped=["index.html"]) == expect


@browser
def test_a_missing_result_box_is_caught(tmp_path: Path, driver, serve) -> None:
    site = _tiny_site(tmp_path / "nobox", "")
    problems = check_site(site, serve(site), driver, boxes={"index.html": 2})
    assert problems == ["index.html: 0 verdict badge(s) of the result box in the first screen at "
                        "1280 px, expected 2", "index.html: no key figure in the result box"]


@browser
@pytest.mark.parametrize("plant, expect", [
    ('<a href="missing.html">x</a>', "broken link .*missing.html: no file"),
    ('<a href="other.html#nowhere">x</a>', "no anchor #nowhere in other.html"),
    ('<img src="missing.png">', "image not loaded: missing.png"),
    ('<p>$$x^2$$</p>', "raw TeX left in the text"),
    ('<p style="width:900px">too wide</p>', "scrolls horizontally at 420 px"),
    ('<script>console.error("planted")</script>', "console SEVERE: .*planted"),
    ('<div class="cell_output"><pre>PosixPath(\'figures/x.svg\')</pre></div>',
     "stray output: .*PosixPath"),
    ('<div class="cell_output"><pre>_</pre></div>', "stray output: '_'"),
    ('<div class="cell_output"><pre>&lt;Figure size 750x260 with 3 Axes&gt;</pre></div>',
     "stray output: '<Figure size"),
    ('<table><thead><tr><th></th><th>acc</th></tr></thead><tbody><tr><th>0</th><td>0.8</td></tr>'
     '<tr><th>1</th><td>0.9</td></tr></tbody></table>', "table with a pandas index 0–1"),
    ('<table><tr><td>val acc</td><td>nan</td></tr></table>', "table with a nan or None cell"),
    ('<table><tr><td>1</td></tr><tr><td>...</td></tr></table>', r"table with a truncated table"),
    ('<p>Found <strong><span class="pasted-text">0.42</span></strong>.</p>',
     "a glued value in bold: '0.42'"),
    ('<p>Found <span class="pasted-text" style="font-weight:700">0.42</span>.</p>',
     "a glued value in bold: '0.42'"),
    (FIGURE, "figure wider than the screen at 420 px: fig.svg"),
    ('<div class="rc-vals"><div>' + "a long sentence " * 60 + "</div></div>",
     "a claim's sentence [0-9]+ lines tall at 420 px, not folded"),  # though it scrolls in its box
    ('<div class="rc-result"><div class="rc-result-row"><span class="rc-result-ours" '
     'style="display:block;-webkit-line-clamp:none">' + "a long sentence " * 60 + "</span></div>"
     "</div>", "a claim's sentence [0-9]+ lines tall at 420 px, not folded"),
    ('<div class="rc-result-figure" style="overflow-x:auto"><img src="dot.png" '
     'style="width:600px;max-width:none"><a href="fig.csv">data</a></div>',
     "figure wider than the screen at 420 px: dot.png"),
    ('<table><tr><td style="min-width:900px">a wide table</td></tr></table>',
     "scrolls horizontally at 420 px"),
    ('<table class="rc-table"><tr><td>C1</td></tr></table>', "1 claims table.* without a link"),
    ('<div style="height:1200px"></div><div class="rc-result"><span class="rc-badge">✓ holds</span>'
     '</div>', "0 verdict badge.* in the first screen at 1280 px, expected 1"),
    (FIGURE.replace('<a href="fig.csv">Data (CSV)</a>', ""),
     "a figure without a link to its data .*: fig.svg"),
    ('<div class="cell_output"><img src="dot.png"></div>', "a figure without a link to its data"),
    ('<div class="rc-result-figure"><img src="dot.png"></div>',
     "a figure without a link to its data .*: dot.png"),
    (FIGURE.replace("max-width:none;width:720px", "max-width:100%"),
     r"figure text [0-9.]+ px at 420 px \(under 8\): fig.svg"),
    ('<div style="height:1200px"></div><div class="rc-result-figure"><img src="fig.svg">'
     '<a href="fig.csv">data</a></div>',
     "the result box's figure is not wholly in the first screen at 1280 px .*: fig.svg"),
    ('<div class="rc-result-figure"><img src="fig.svg" style="width:300px">'
     '<a href="fig.csv">data</a></div>', r"figure text 3.8 px at 1280 px \(under 8\): fig.svg"),
])
def test_planted_faults_are_caught(tmp_path: Path, driver, serve, plant: str, expect: str) -> None:
    site = _tiny_site(tmp_path / "broken", plant)
    problems = check_site(site, serve(site), driver)
    assert any(re.search(expect, p) for p in problems), problems


# --- without a browser ---------------------------------------------------------------------------

def test_the_book_refers_to_no_file_outside_the_repository() -> None:
    for f in BOOK.rglob("*"):
        if f.suffix in (".md", ".ipynb", ".yml", ".bib") and "_build" not in f.parts:
            text = f.read_text()
            assert "FACTS.md" not in text and "CLAIMS.md" not in text, f
            if f.suffix == ".ipynb":  # cell sources: papermill's metadata records the run's paths
                text = "".join("".join(c["source"]) for c in json.loads(text)["cells"])
            assert "/work/" not in text and "/home/" not in text, f


def test_mathjax_is_served_locally() -> None:
    cfg = yaml.safe_load((BOOK / "_config.yml").read_text())
    path = BOOK / "_static" / cfg["sphinx"]["config"]["mathjax_path"]  # relative to _static/
    path = BOOK / "_vendor" / path.resolve().relative_to(BOOK.resolve())  # copied from _vendor/
    assert path.is_file() and (path.parent / "output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff").is_file()
