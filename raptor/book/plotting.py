"""The book's figure style, in one place: sizes, fonts, the similarity colour scale, layers.

Conventions every chapter follows (stated once in each caption through :data:`LAYERS`):

- **layers**: layer 0 is the embedding and layer ``l`` the output of block ``l`` (the paper's
  ``f_l``, §1 and Fig. 1), so a phase matrix covers layers ``1..L``; a caption says so with
  :data:`LAYERS` when its layer axis starts at 0, with :data:`BLOCK_LAYERS` when it starts at 1;
- **similarity**: one colormap, :data:`SIMILARITY_CMAP`, from :func:`similarity_range` (top 1,
  bottom the figure's lowest value rounded down to 0.1), with a labelled colour bar;
- **size**: figures at most :data:`WIDTH` wide (the result box's key figure :data:`BOX_WIDTH`),
  at most :data:`MAX_COLUMNS` panels a row (more wrap to new rows: :func:`grid`), so that no text
  is smaller than :data:`MIN_FONT` points on a desktop or :data:`MIN_PX` px on a 420-px phone;
  legends sit outside the data, below it;
- **text**: no two texts collide and none is under :data:`MIN_PX` on a phone: :func:`save`
  refuses such a figure (:func:`check`), so that executing the book catches it.

Notebooks call :func:`setup` once (SVG output; tables as :func:`table_html` shows them) and show
each figure with :func:`raptor.book.figure_table.show`, which draws it from its table's CSV and
saves it (:func:`save`), which returns the caption's last line, glued beside the figure: a link to
that CSV and to the paper's figure on arXiv (:func:`sources`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from types import ModuleType
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.colorbar import Colorbar
from matplotlib.text import Text

from raptor import paper as paper_text
from raptor.book.claims import scoped
from raptor.book.chapters import spec_for
from raptor.book.spec import diff

Partition = Sequence[tuple[int, int]]

MIN_FONT = 9.0  # points, at the size the book shows on a desktop
MIN_PX = 8.0  # CSS px: the smallest figure text a phone shows (tests/test_browser.py)
PX_PER_IN = 96  # CSS px per inch; a point is 1/72 in, so MIN_FONT is 12 px at natural size
PAD = 0.1  # inches: savefig's padding around the tight box, on each side
# A figure's SVG is its tight box (about the figure plus PAD a side), shown at its natural size or
# scaled down to the width of the text column (the result box's figure also to BOX_HEIGHT high on a
# desktop). Measured in Chromium at a 420-px viewport, the column is 372 px and the box's figure
# 321 px; MIN_FONT is shown at 12 px × column / (96 (w + 2 PAD)), ≥ MIN_PX when w ≤ 5.61 in in the
# column and w ≤ 4.82 in in the box: WIDTH and BOX_WIDTH leave 2 % for rounding. On a desktop the
# column (780 px) shows both at their natural size.
COLUMN = 780 / PX_PER_IN  # inches: the book's text column on a desktop
PHONE_COLUMN = 372 / PX_PER_IN  # inches: the text column at a 420-px viewport
BOX_COLUMN = 321 / PX_PER_IN  # inches: the result box's figure at a 420-px viewport
# The box's figure at most this high on a desktop (raptor.css): below a box of nine claims' rows it
# then ends inside the first screen of a 1,280 × 900 window (tests/test_browser.py).
BOX_HEIGHT = 260 / PX_PER_IN
WIDTH = 5.5  # inches: every figure at most this wide
BOX_WIDTH = 4.7  # inches: the key figure a chapter's result box shows
BOX_TALLEST = 3.8  # inches: MIN_FONT at ≥ MIN_PX in the box's BOX_HEIGHT needs ≤ 3.86 in
MAX_COLUMNS = 2  # panels a row: more squeeze a panel's ticks and titles below legibility
SIMILARITY_CMAP = "magma"
SIMILARITY_LABEL = "cosine similarity"
LAYERS = "Layer 0 is the embedding; layer $l$ is the output of block $l$."
BLOCK_LAYERS = ("Layer $l$ is the output of block $l$: the axes run over layers 1 to $L$ "
                "(the embedding, layer 0, is not shown).")
STYLE = {
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9,
    "ytick.labelsize": 9, "legend.fontsize": 9, "legend.title_fontsize": 9,
    "figure.titlesize": 11, "figure.dpi": 100, "savefig.dpi": 200, "svg.hashsalt": "raptor",
}


# Applied on import, so every chapter's figures share it with or without :func:`setup`.
mpl.rcParams.update(STYLE)


def setup() -> None:
    """In a notebook, show figures as SVG (sharp at any zoom), in :data:`STYLE`, and plain
    tables as :func:`table_html` formats them."""
    mpl.rcParams.update(STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if (shell := get_ipython()) is not None:
        set_matplotlib_formats("svg", metadata={"Date": None})  # no timestamp: stable diffs
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, table_html)


VERDICT_COLUMN = re.compile(r"verdict|C\d+")  # a table's columns of verdicts


def cell(value: Any, decimals: int | None = None) -> str:
    """A table's value as a reader reads it: a missing one as "—", an integer with thousands
    separators, a float to ``decimals`` places (default: 4 significant digits), a large one to
    the unit."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}" if decimals is None else f"{value:.{decimals}f}"
    return str(value)


def _significant(value: float) -> int:
    """The decimal places that give ``value`` 4 significant digits (none from 1,000 up)."""
    if abs(value) >= 1000 or value == 0:
        return 0
    return max(0, 3 - math.floor(math.log10(abs(value))))


def decimals(column: Iterable[Any]) -> int | None:
    """One number of decimal places for a column's floats (None: it has none): as many as any
    value needs for 4 significant digits (trailing zeros dropped: a value stored rounded keeps
    its places), but no more than its largest value's 4 significant digits."""
    floats = [float(v) for v in column if isinstance(v, (float, np.floating))
              and math.isfinite(v)]
    if not floats:
        return None
    needed = max(len(f"{abs(v):.{_significant(v)}f}".rstrip("0").partition(".")[2])
                 for v in floats)
    return min(needed, _significant(max(floats, key=abs)))


def table_html(frame: pd.DataFrame) -> str:
    """A plain table as the book shows it: one header row (a named index's names head its
    columns; a default integer index is left out), every row (none elided), each column's
    values as :func:`cell` writes them to one number of decimals (:func:`decimals`), scrolling
    in its own box on a narrow screen; a verdict (in a column "verdict" or named for a claim,
    "C1") in the words the book gives verdicts (:func:`~raptor.book.claims.scoped`). A subclass
    with its own HTML (a claims table) keeps it."""
    if type(frame) is not pd.DataFrame:
        return frame._repr_html_()
    numbered = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    labels = 0 if numbered else frame.index.nlevels
    shown = frame.reset_index(drop=numbered)
    names = [*(n or "" for n in ([] if numbered else frame.index.names)),
             *(" ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in frame.columns)]
    places = [decimals(shown.iloc[:, j]) for j in range(shown.shape[1])]
    verdicts = [VERDICT_COLUMN.fullmatch(name) is not None for name in names]
    head = "".join(f"<th>{escape(name)}</th>" for name in names)
    rows = "".join("<tr>" + "".join(
        f"<{tag}>{escape(scoped(v) if verdict and isinstance(v, str) else cell(v, d))}</{tag}>"
        for j, (v, d, verdict) in enumerate(zip(row, places, verdicts))
        for tag in ["th" if j < labels else "td"])
        + "</tr>" for row in shown.itertuples(index=False))
    return (f'<div class="rc-scroll"><table class="dataframe"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>")


def figure(nrows: int = 1, ncols: int = 1, *, width: float = WIDTH, height: float | None = None,
           **kw: Any) -> tuple[plt.Figure, np.ndarray]:
    """A figure in the book's style, ``width`` inches wide, and its 2-D array of axes."""
    if width > WIDTH:
        raise ValueError(f"width must be ≤ {WIDTH} in (the book's column), got {width}")
    if ncols > MAX_COLUMNS:
        raise ValueError(f"at most {MAX_COLUMNS} panels a row, got {ncols}")
    return plt.subplots(nrows, ncols, squeeze=False, figsize=(width, height or 2.6 * nrows + 0.4),
                        layout="constrained", **kw)


def grid(n: int, *, width: float = WIDTH, row_height: float = 2.6, extra: float = 0.6,
         **kw: Any) -> tuple[plt.Figure, list[plt.Axes]]:
    """A figure of ``n`` panels, :data:`MAX_COLUMNS` a row (the last row's spare cell left out),
    ``row_height`` inches a row plus ``extra`` (a legend below), and its panels in order."""
    ncols = min(n, MAX_COLUMNS)
    nrows = math.ceil(n / ncols)
    fig, axes = figure(nrows, ncols, width=width, height=nrows * row_height + extra, **kw)
    for ax in axes.flat[n:]:
        fig.delaxes(ax)
    return fig, list(axes.flat[:n])


def colour_bars(fig: plt.Figure) -> list[Colorbar]:
    """The colour bars of ``fig``, found through the images and collections they describe (each
    mappable's ``colorbar``)."""
    bars: dict[int, Colorbar] = {}
    for ax in fig.axes:
        for mappable in (*ax.images, *ax.collections):
            if (bar := getattr(mappable, "colorbar", None)) is not None:
                bars[id(bar)] = bar
    return list(bars.values())


class FigureError(ValueError):
    """A figure the book must not show: text that collides or is too small to read."""


OVERLAP = 1.5  # points (2 CSS px at natural size): text boxes may touch, not overlap more


def texts(fig: plt.Figure) -> list[tuple[str, Text]]:
    """Every text ``fig`` draws, with where it is (``"panel 'title': y tick '0.5'"``): titles,
    axis labels, the tick labels inside each axis's view, offset texts, legends and annotations;
    none of a hidden axes or axis."""
    found: list[tuple[str, Text]] = []
    bar_axes = [bar.ax for bar in colour_bars(fig)]
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        title = ax.get_title().split("\n")[0]
        where = (f"panel {title[:40]!r}" if title else
                 "colour bar" if any(ax is b for b in bar_axes) else f"axes {i + 1}")
        found += [(f"{where}: title", ax.title), *((f"{where}: text", t) for t in ax.texts)]
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")) if ax.axison else ():
            if not axis.get_visible():
                continue
            found += [(f"{where}: {name} label", axis.label), (f"{where}: {name} offset",
                                                               axis.get_offset_text())]
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * max(1.0, abs(hi - lo))
            found += [(f"{where}: {name} tick", label)
                      for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks())
                      if lo - slack <= tick.get_loc() <= hi + slack
                      for label in (tick.label1, tick.label2)]
        if (legend := ax.get_legend()) is not None and legend.get_visible():
            found += [(f"{where}: legend", t) for t in (legend.get_title(), *legend.get_texts())]
    for legend in fig.legends:
        found += [("figure legend", t) for t in (legend.get_title(), *legend.get_texts())
                  if legend.get_visible()]
    found += [("figure text", t) for t in fig.texts]
    return [(f"{where} {t.get_text()!r}", t) for where, t in found
            if t.get_visible() and t.get_text().strip()]


def _drawn(fig: plt.Figure) -> RendererAgg:
    """Draw ``fig`` on an Agg canvas (its layout done) and return the renderer."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def overlaps(fig: plt.Figure) -> list[str]:
    """Each pair of ``fig``'s texts (:func:`texts`) whose boxes overlap by more than
    :data:`OVERLAP` points each way, on one axes or across axes; empty when none do."""
    renderer = _drawn(fig)
    scale = 72 / fig.dpi
    boxes = [(where, t.get_window_extent(renderer)) for where, t in texts(fig)]
    found = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            dx = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            dy = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if min(dx, dy) * scale > OVERLAP:
                found.append(f"{a} overlaps {b}")
    return found


def illegible(fig: plt.Figure) -> list[str]:
    """Each of ``fig``'s texts smaller than :data:`MIN_PX` CSS px when a 420-px phone shows the
    figure (its tight box plus :data:`PAD` a side) in the :data:`PHONE_COLUMN`; empty when none.
    Stricter than 6 px at 400 px wide, and met by every chapter's figure: 9 pt on one
    :data:`WIDTH` wide is 8.2 px there. The result box shows its key figure narrower still
    (:data:`BOX_WIDTH` keeps that legible: tests/test_plotting.py checks it, knowing which
    figure the box shows)."""
    renderer = _drawn(fig)
    tight = fig.get_tightbbox(renderer)  # inches
    scale = min(1.0, PHONE_COLUMN / (tight.width + 2 * PAD)) * PX_PER_IN / 72
    return [f"{where}: {t.get_fontsize() * scale:.1f} px on a phone"
            for where, t in texts(fig) if t.get_fontsize() * scale < MIN_PX - 1e-6]


def check(fig: plt.Figure, name: str) -> None:
    """Raise :class:`FigureError` naming figure ``name`` and its texts that collide
    (:func:`overlaps`) or are too small on a phone (:func:`illegible`)."""
    found = overlaps(fig) + illegible(fig)
    if found:
        more = f"\n  … and {len(found) - 20} more" if len(found) > 20 else ""
        raise FigureError(f"figure {name!r} is unreadable ({len(found)} problems):\n  "
                          + "\n  ".join(found[:20]) + more)


def save(fig: plt.Figure, name: str, figdir: str | Path = "figures", *,
         paper: str | Sequence[str] = ()) -> Markdown:
    """Write ``fig`` to ``figdir/name.svg`` and ``.pdf`` and close it. Returns the caption's
    sources line (:func:`sources`: the figure's numbers are ``name.csv`` beside it, which
    :func:`raptor.book.figure_table.show` writes), which the notebook glues; ``paper`` names the
    paper's figures it reproduces (``"Fig. 4B–E"``). A figure with colliding or illegible text
    (:func:`check`) is refused with :class:`FigureError` before anything is written."""
    figdir = Path(figdir)
    line = sources(f"{figdir.as_posix()}/{name}.csv", paper)  # checks ``paper`` before any work
    check(fig, name)
    figdir.mkdir(parents=True, exist_ok=True)
    path = figdir / f"{name}.svg"
    for target, undated in ((path, {"Date": None}), (path.with_suffix(".pdf"),
                                                     {"CreationDate": None})):
        fig.savefig(partial(target), format=target.suffix[1:], bbox_inches="tight",
                    metadata=undated)
        partial(target).replace(target)
    plt.close(fig)
    return line


def partial(target: Path) -> Path:
    """One partial file per process: two runs of a chapter into one folder must not collide."""
    return target.with_name(f".{target.name}.{os.getpid()}.partial")


def sources(csv_path: str, paper: str | Sequence[str] = ()) -> Markdown:
    """A figure caption's last line (MyST, pasted with ``{glue:md}`key:myst```): a download link
    to the figure's numbers and, for each figure or table of ``paper`` (``"Fig. 4B–E"``,
    ``"Table 1"``), a link to the section of the paper's HTML on arXiv that shows it
    (:data:`raptor.paper.FIGURE_SECTION`; the floats' own anchors are not known)."""
    links = []
    for name in [paper] if isinstance(paper, str) else paper:
        found = re.fullmatch(r"(Fig|Table)s?\.? ?(\d+)[A-E]?(?:[–-]\d*[A-E]?)?", name)
        sections = paper_text.FIGURE_SECTION if found and found[1] == "Fig" \
            else paper_text.TABLE_SECTION
        if not found or int(found[2]) not in sections:
            raise ValueError(f"paper must name the paper's figures or tables ('Fig. 1'…"
                             f"'Fig. 15', 'Fig. 4B–E', 'Table 1', 'Table 2'), got {name!r}")
        section = sections[int(found[2])]
        links.append(f"[{name}]({paper_text.ARXIV_HTML}#S{section}) (arXiv, §{section})")
    download = f"{{download}}`Data (CSV) <{csv_path}>`"
    # "The paper's Fig. 4B (…) and Fig. 14 (…)": the paper named once
    return Markdown(" · ".join([download] + (["The paper's " + " and ".join(links)] if links
                                             else [])))


def profile_of(chapter: ModuleType, spec: Any, profile: str) -> str:
    """``profile``, or which parameters ``spec`` sets away from it (``smoke with L changed``)."""
    changed = diff(spec, spec_for(chapter.NAME, profile))
    return f"{profile} with {', '.join(changed)} changed" if changed else profile


# --------------------------------------------------------------------------- similarity


def similarity_range(mats: Iterable[np.ndarray]) -> tuple[float, float]:
    """The colour scale of every similarity figure: ``(lowest value rounded down to 0.1, 1)``."""
    low = min(float(np.nanmin(S)) for S in mats)
    return max(-1.0, math.floor(low * 10) / 10), 1.0


TICK_SPACING = 0.25  # inches between a matrix's layer ticks at least: "11" is 0.14 in at 9 pt


def layer_ticks(ax: plt.Axes, n: int, first_layer: int, side: float = 2.4) -> None:
    """Label the rows and columns of an ``n × n`` matrix by layer, starting at ``first_layer``:
    at most 8 ticks, and on a panel ``side`` inches square at least :data:`TICK_SPACING` apart
    (a thumbnail's labels otherwise run together)."""
    ticks = np.arange(0, n, max(1, math.ceil(n / 8), math.ceil(n * TICK_SPACING / side)))
    ax.set_xticks(ticks, ticks + first_layer)
    ax.set_yticks(ticks, ticks + first_layer)
    ax.set(xlabel="layer", ylabel="layer")


def draw_partition(ax: plt.Axes, partition: Partition, offset: int = 0, **kw: Any) -> None:
    """Outline a partition's diagonal blocks on a matrix drawn with ``imshow``."""
    style = {"color": "white", "lw": 1.6, **kw}
    for i, (start, stop) in enumerate(partition):
        lo, hi = start + offset - 0.5, stop + offset - 0.5
        ax.plot([lo, hi, hi, lo, lo], [lo, lo, hi, hi, lo], label=f"_phase {i + 1} outline",
                **style)


def similarity_table(panels: Mapping[str, np.ndarray | None], partitions: Mapping[str, Partition]
                     | None = None, first_layer: int = 1) -> pd.DataFrame:
    """Similarity matrices as one tidy table, the data of :func:`similarity_panels`: one row an
    entry (``panel``, ``layer``, ``vs layer``, ``similarity``; row 0 of a matrix is layer
    ``first_layer``) with ``phase``, the number of the phase of ``partitions[panel]`` that
    ``layer`` lies in (missing without a partition); a panel left empty (``None``) is one row
    without a layer."""
    rows: list[dict[str, Any]] = []
    for title, S in panels.items():
        if S is None:
            rows.append({"panel": title})
            continue
        phase = np.full(len(S), np.nan)
        for i, (start, stop) in enumerate((partitions or {}).get(title, ())):
            phase[start:stop] = i + 1
        rows += [{"panel": title, "layer": first_layer + i, "vs layer": first_layer + j,
                  "similarity": float(S[i, j]), "phase": phase[i]}
                 for i in range(len(S)) for j in range(len(S))]
    return pd.DataFrame(rows, columns=["panel", "layer", "vs layer", "similarity", "phase"])


def similarity_matrices(table: pd.DataFrame) -> tuple[dict[str, np.ndarray | None],
                                                       dict[str, Partition], int]:
    """``(panels, partitions, first_layer)`` back from :func:`similarity_table`'s table."""
    panels: dict[str, np.ndarray | None] = {}
    partitions: dict[str, Partition] = {}
    first = int(table["layer"].min()) if table["layer"].notna().any() else 1
    for title, rows in table.groupby("panel", sort=False):
        if rows["layer"].isna().all():
            panels[title] = None
            continue
        n = int(np.sqrt(len(rows)))
        panels[title] = rows["similarity"].to_numpy(float).reshape(n, n)
        phase = rows["phase"].to_numpy(float)[::n]
        if not np.isnan(phase).all():
            bounds = [0, *(int(b) + 1 for b in np.flatnonzero(np.diff(phase))), n]
            partitions[title] = list(zip(bounds[:-1], bounds[1:]))
    return panels, partitions, first


def similarity_panels(panels: Mapping[str, np.ndarray | None], *, ncols: int,
                      partitions: Mapping[str, Partition] | None = None, first_layer: int = 1,
                      width: float = WIDTH, max_height: float | None = None) -> plt.Figure:
    """Similarity matrices in a grid of ``ncols`` columns (at most :data:`MAX_COLUMNS`), one
    colour bar for all (Figs. 1–4), at most ``width`` wide and ``max_height`` high.

    ``panels`` maps a title to a matrix whose row 0 is layer ``first_layer`` (``None`` leaves the
    panel empty); ``partitions[title]`` (indices into that matrix) is outlined in white.
    """
    ncols = max(1, min(ncols, MAX_COLUMNS, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    lines = 0.15 * max(title.count("\n") for title in panels)  # a title's extra lines
    side = min(2.4, (width - 1.1) / ncols, (max_height or math.inf) / nrows - 0.4 - lines)
    # a cell at least 1.9 in wide: a title of two 20-character lines clear of its neighbour's
    fig, axes = figure(nrows, ncols, width=min(width, ncols * max(side, 1.9) + 1.1),
                       height=nrows * (side + 0.4 + lines))
    vmin, vmax = similarity_range(S for S in panels.values() if S is not None)
    image = None
    for ax, (title, S) in zip(axes.flat, panels.items()):
        if S is None:
            ax.set_axis_off()
            continue
        image = ax.imshow(S, cmap=SIMILARITY_CMAP, vmin=vmin, vmax=vmax)
        layer_ticks(ax, S.shape[0], first_layer, side)
        if partitions and title in partitions:
            draw_partition(ax, partitions[title])
        ax.set_title(title)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    # pad: clear of the right column's titles, which a thumbnail's are wider than (a partition)
    fig.colorbar(image, ax=axes, label=SIMILARITY_LABEL, shrink=min(1.0, 0.9 / nrows + 0.3),
                 pad=0.12)
    return fig


# --------------------------------------------------------------------------- curves


def legend_below(fig: plt.Figure, axes: Sequence[plt.Axes] | np.ndarray, ncols: int = 3) -> None:
    """One legend for ``axes`` (labels deduplicated), below the figure, clear of the data."""
    handles: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center",
               ncols=min(ncols, len(handles)), frameon=False)


def phase_lines(ax: plt.Axes, partition: Partition) -> None:
    """Dashed lines between phases on a layer axis (a phase matrix's index ``i`` is layer
    ``i + 1``, so a phase starting at index ``s`` begins after layer ``s``)."""
    for start, _ in partition[1:]:
        ax.axvline(start + 0.5, color="grey", ls="--", lw=0.8, label="_phase boundary")


def curves_table(curves: Mapping[str, Sequence[float]], value: str,
                 first_layer: int = 0) -> pd.DataFrame:
    """Curves over depth as one tidy table, the data of :func:`layer_curves`: one row a point
    (``series``, ``layer``, ``value``), point ``i`` of a curve at layer ``first_layer + i``."""
    return pd.DataFrame([{"series": name, "layer": first_layer + i, value: float(y)}
                         for name, curve in curves.items() for i, y in enumerate(curve)],
                        columns=["series", "layer", value])


def curves_of(table: pd.DataFrame, value: str) -> dict[str, np.ndarray]:
    """The curves of :func:`curves_table`'s ``table``, by series in the table's order."""
    return {name: rows[value].to_numpy(float)
            for name, rows in table.groupby("series", sort=False)}


def layer_curves(curves: Mapping[str, np.ndarray], *, ylabel: str, title: str = "",
                 ax: plt.Axes, first_layer: int = 0, logy: bool = False) -> plt.Axes:
    """Curves over depth (point ``i`` of a curve is layer ``first_layer + i``) on ``ax``.

    Names of the form ``"<series> <group>"`` share a colour per series and a line style per
    group (solid, dashed, dotted, ...); the caller places the legend (:func:`legend_below`).
    """
    series = list(dict.fromkeys(name.rsplit(" ", 1)[0] for name in curves))
    groups = list(dict.fromkeys(name.rsplit(" ", 1)[-1] for name in curves))
    palette = dict(zip(series, sns.color_palette("colorblind", len(series))))
    styles = dict(zip(groups, ("-", "--", ":", "-.")))
    for name, y in curves.items():
        head, group = name.rsplit(" ", 1) if " " in name else (name, name)
        ax.plot(first_layer + np.arange(len(y)), y, marker="o", ms=3, label=name,
                color=palette[head], ls=styles.get(group, "-"))
    ax.set(xlabel="layer", ylabel=ylabel, title=title)
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    if logy:
        ax.set_yscale("log")
    return ax

