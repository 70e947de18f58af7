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
  legends sit outside the data, below it.

Notebooks call :func:`setup` once (SVG output; tables as :func:`table_html` shows them), glue each figure with ``myst_nb.glue`` and
:func:`save` it; ``save`` also writes the figure's numbers as CSV (:func:`figure_data`) and returns
the caption's last line, glued beside the figure: a link to that CSV and to the paper's figure on
arXiv (:func:`sources`).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.container import ErrorbarContainer

from raptor import paper as paper_text
from raptor.book.specs import spec_for
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


def cell(value: Any) -> str:
    """A table's value as a reader reads it: a missing one as "—", an integer with thousands
    separators, a float to 4 significant digits (a large one to the unit)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def table_html(frame: pd.DataFrame) -> str:
    """A plain table as the book shows it: every row (none elided), no pandas row numbers (a
    default integer index is left out; a named one is kept), values as :func:`cell` writes
    them, scrolling in its own box on a narrow screen. A subclass with its own HTML (a claims
    table) keeps it."""
    if type(frame) is not pd.DataFrame:
        return frame._repr_html_()
    shown = frame.map(cell)
    numbered = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    body = shown.to_html(index=not numbered, escape=True, border=0,
                         max_rows=None, max_cols=None)
    return f'<div class="rc-scroll">{body}</div>'


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


def save(fig: plt.Figure, name: str, figdir: str | Path = "figures", *,
         paper: str | Sequence[str] = ()) -> Markdown:
    """Write ``fig`` to ``figdir/name.svg`` and ``.pdf``, its plotted numbers to ``name.csv``
    (:func:`figure_data`), and close it. Returns the caption's sources line (:func:`sources`),
    which the notebook glues; ``paper`` names the paper's figures it reproduces
    (``"Fig. 4B–E"``)."""
    figdir = Path(figdir)
    line = sources(f"{figdir.as_posix()}/{name}.csv", paper)  # checks ``paper`` before any work
    figdir.mkdir(parents=True, exist_ok=True)
    path = figdir / f"{name}.svg"
    for target, undated in ((path, {"Date": None}), (path.with_suffix(".pdf"),
                                                     {"CreationDate": None})):
        fig.savefig(_partial(target), format=target.suffix[1:], bbox_inches="tight",
                    metadata=undated)
        _partial(target).replace(target)
    table = path.with_suffix(".csv")
    _partial(table).write_text(figure_csv(fig), encoding="utf-8")
    _partial(table).replace(table)
    plt.close(fig)
    return line


def _partial(target: Path) -> Path:
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


# --------------------------------------------------------------------------- the data of a figure

COLUMNS = ("panel", "x_label", "y_label", "series", "kind", "item", "x", "x_tick", "y", "y_tick",
           "y_low", "y_high", "value")


def figure_data(fig: plt.Figure) -> list[dict[str, Any]]:
    """Every number ``fig`` plots, read off its artists, one row a point (:data:`COLUMNS`).

    Each row names its panel (title), axis labels and series (legend label, else ``line 2``…);
    ``kind`` says what it is: a ``line`` or ``points`` vertex (``value``: a scatter's colour
    value), an ``error bar`` or ``interval`` (``y`` ± as ``y_low``/``y_high``), a shaded ``band``
    (``y_low``–``y_high`` at ``x``), a ``vertical line``/``horizontal line`` (a threshold), an
    ``image`` pixel (``value`` at column ``x``, row ``y``; series: its colour bar's label).
    Coordinates are the axes' data coordinates, shifted where the tick labels are (layer numbers
    on a matrix: tick ``i`` labelled ``i + 1``); ``x_tick`` and ``y_tick`` are the nearest tick's
    label on a categorical axis (a horizontal interval is two ``segment`` rows, its ends). Colour bars and text are not data and are left out.
    """
    rows: list[dict[str, Any]] = []
    data_axes = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is None]
    bars = [bar for ax in fig.axes if (bar := getattr(ax, "_colorbar", None)) is not None]
    scales = {(bar.mappable.cmap.name, bar.mappable.get_clim()):
              bar.ax.get_ylabel() or bar.ax.get_xlabel() for bar in bars}
    for i, ax in enumerate(data_axes):
        twins = ax.get_shared_x_axes().get_siblings(ax)
        panel = ax.get_title() or next((a.get_title() for a in twins if a.get_title()),
                                       f"panel {i + 1}")
        xlabel = next((a.get_xlabel() for a in twins if a.get_xlabel()), "")
        base = {key: " ".join(text.split())  # one line each: a label may break in two
                for key, text in (("panel", panel), ("x_label", xlabel),
                                  ("y_label", ax.get_ylabel()))}
        shift_x, ticks_x = _tick_map(ax.xaxis)
        shift_y, ticks_y = _tick_map(ax.yaxis)

        def add(series: str, kind: str, item: int, x: float | None = None, **values: float) -> None:
            row = {**base, "series": " ".join(series.split()), "kind": kind, "item": item}
            if x is not None:
                row["x"] = x + shift_x
                row["x_tick"] = _nearest(ticks_x, x)
            for key, v in values.items():
                row[key] = v + (shift_y if key.startswith("y") else 0)
            if "y" in values and ticks_y:
                row["y_tick"] = _nearest(ticks_y, values["y"])
            rows.append(row)

        done: set[int] = set()
        for c in ax.containers:
            if isinstance(c, ErrorbarContainer):
                line, caps, bars = c.lines
                done.update(id(a) for a in (line, *caps, *bars) if a is not None)
                xy = line.get_xydata() if line is not None else None
                segs = [s for b in bars for s in b.get_segments()]
                for j, seg in enumerate(segs):
                    x, y = (xy[j] if xy is not None else (seg[0][0], np.nan))
                    add(c.get_label(), "error bar", j, x, y=y, y_low=min(seg[:, 1]),
                        y_high=max(seg[:, 1]))
        for j, line in enumerate(ax.lines):
            if id(line) in done:
                continue
            name = _series(line, "line", j)
            xy = np.asarray(line.get_xydata(), dtype=float)
            if line.get_transform() is ax.get_xaxis_transform(which="grid"):
                add(name, "vertical line", 0, xy[0, 0])
            elif line.get_transform() is ax.get_yaxis_transform(which="grid"):
                add(name, "horizontal line", 0, y=xy[0, 1])
            elif _in_data_coordinates(line.get_transform(), ax):
                for k, (x, y) in enumerate(xy):
                    add(name, "line", k, x, y=y)
        for j, coll in enumerate(ax.collections):
            if id(coll) in done:
                continue
            if isinstance(coll, PathCollection):
                values = coll.get_array()
                for k, (x, y) in enumerate(np.asarray(coll.get_offsets(), dtype=float)):
                    extra = {} if values is None else {"value": float(values[k])}
                    add(_series(coll, "points", j), "points", k, x, y=y, **extra)
            elif isinstance(coll, LineCollection):
                for k, seg in enumerate(coll.get_segments()):
                    if len(seg) == 2 and seg[0][0] == seg[1][0]:
                        add(_series(coll, "intervals", j), "interval", k, seg[0][0],
                            y_low=min(seg[:, 1]), y_high=max(seg[:, 1]))
                    else:
                        for x, y in seg:
                            add(_series(coll, "segments", j), "segment", k, x, y=y)
            elif isinstance(coll, PolyCollection):
                for path in coll.get_paths():
                    verts = path.vertices[np.isfinite(path.vertices).all(axis=1)]
                    for k, x in enumerate(np.unique(verts[:, 0])):
                        ys = verts[verts[:, 0] == x, 1]
                        add(_series(coll, "band", j), "band", k, x, y_low=ys.min(),
                            y_high=ys.max())
        for j, image in enumerate(ax.images):
            array = np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan)
            left, right, bottom, top = image.get_extent()
            nrows, ncols = array.shape[:2]
            xs = left + (np.arange(ncols) + 0.5) * (right - left) / ncols
            ys = (top if image.origin == "upper" else bottom) + (np.arange(nrows) + 0.5) * (
                (bottom - top) if image.origin == "upper" else (top - bottom)) / nrows
            for r in range(nrows):
                for col in range(ncols):
                    add(scales.get((image.cmap.name, image.get_clim()))
                        or _series(image, "image", j), "image", r * ncols + col, xs[col], y=ys[r],
                        value=array[r, col])
    return rows


def figure_csv(fig: plt.Figure) -> str:
    """:func:`figure_data` as CSV text, each number written exactly (shortest round trip)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in figure_data(fig):
        writer.writerow({k: _exact(v) for k, v in row.items()})
    return out.getvalue()


def _exact(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return "" if math.isnan(v) else repr(float(v))
    return v.item() if isinstance(v, np.generic) else v


def _in_data_coordinates(transform: mpl.transforms.Transform, ax: plt.Axes) -> bool:
    """Whether ``transform`` maps the axes' data coordinates, up to a shift on screen (a series
    offset sideways so that equal values stay visible): tried on the corners of the axes."""
    corners = np.array([[x, y] for x in ax.get_xlim() for y in ax.get_ylim()])
    gap = transform.transform(corners) - ax.transData.transform(corners)
    return bool(np.allclose(gap, gap[0]))


def _series(artist: Any, kind: str, j: int) -> str:
    """An artist's legend label; a label kept out of the legend by a leading ``_`` without it;
    matplotlib's own (``_child3``) replaced by ``kind`` and a number."""
    label = artist.get_label() or ""
    if not label or label.startswith(("_child", "_nolegend_", "_container")):
        return f"{kind} {j + 1}"
    return label.lstrip("_")


def _tick_map(axis: mpl.axis.Axis) -> tuple[float, dict[float, str]]:
    """``(shift, ticks)`` of an axis whose ticks are labelled by hand: a constant ``label −
    position`` when every label is a number offset by it (0 otherwise); the ticks of a
    categorical axis, position → label. An axis labelled by its own numbers has neither."""
    t = mpl.ticker
    if isinstance(axis.get_major_formatter(), (t.ScalarFormatter, t.LogFormatter, t.EngFormatter,
                                                t.PercentFormatter, t.FormatStrFormatter,
                                                t.StrMethodFormatter)):
        return 0.0, {}
    ticks = {float(loc): t.get_text() for loc, t in zip(axis.get_majorticklocs(),
                                                          axis.get_majorticklabels())
             if t.get_text()}
    try:
        shifts = {round(float(text.replace("−", "-")) - loc, 9) for loc, text in ticks.items()}
    except ValueError:
        return 0.0, ticks
    return (shifts.pop() if len(shifts) == 1 else 0.0), {}


def _nearest(ticks: dict[float, str], x: float) -> str:
    if not ticks:
        return ""
    loc = min(ticks, key=lambda t: abs(t - x))
    return ticks[loc] if abs(loc - x) < 0.5 else ""


def profile_of(chapter: ModuleType, spec: Any, profile: str) -> str:
    """``profile``, or which parameters ``spec`` sets away from it (``smoke with L changed``)."""
    changed = diff(spec, spec_for(chapter.NAME, profile))
    return f"{profile} with {', '.join(changed)} changed" if changed else profile


# --------------------------------------------------------------------------- similarity


def similarity_range(mats: Iterable[np.ndarray]) -> tuple[float, float]:
    """The colour scale of every similarity figure: ``(lowest value rounded down to 0.1, 1)``."""
    low = min(float(np.nanmin(S)) for S in mats)
    return max(-1.0, math.floor(low * 10) / 10), 1.0


def layer_ticks(ax: plt.Axes, n: int, first_layer: int) -> None:
    """Label the rows and columns of an ``n × n`` matrix by layer, starting at ``first_layer``."""
    ticks = np.arange(0, n, max(1, math.ceil(n / 8)))
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
        layer_ticks(ax, S.shape[0], first_layer)
        if partitions and title in partitions:
            draw_partition(ax, partitions[title])
        ax.set_title(title)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    fig.colorbar(image, ax=axes, label=SIMILARITY_LABEL, shrink=min(1.0, 0.9 / nrows + 0.3))
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


def training_curves(records: Mapping[str, Mapping], smooth: int = 10) -> plt.Figure:
    """Raptor's two training stages (App. A): each stage-1 block's loss with the teacher-forcing
    weight λ, then the stage-2 loss; under the convergence criterion each curve's plateau (○)
    and stop (×) on its held-out loss.

    ``records`` maps a label (e.g. ``"k=3"``) to the record of :func:`raptor.train.distill`.
    Losses are shown as running means over ``smooth`` steps, on a log scale.
    """
    fig, (axes,) = figure(1, 2, height=3.5)
    ax1, ax2 = axes
    lam_ax = ax1.twinx()
    palette = sns.color_palette("colorblind", len(records))
    for color, (label, rec) in zip(palette, records.items()):
        for ax, stage in ((ax1, "stage1"), (ax2, "stage2")):
            for i, curve in enumerate(stage_curves(rec, stage)):
                loss = np.asarray(curve["loss"], dtype=float)
                if not loss.size:
                    continue
                width = min(smooth, loss.size)
                ax.plot(np.arange(width, loss.size + 1), np.convolve(
                    loss, np.ones(width) / width, mode="valid"), color=color,
                    label=label if i == 0 else None)
                val = {v["step"]: v["loss"] for v in curve.get("val", [])}
                for step, marker in ((curve.get("plateau"), "o"), (curve.get("stopped"), "x")):
                    if step in val:
                        ax.plot(step, val[step], marker=marker, color=color, ms=6,
                                mfc="none" if marker == "o" else color)
        for curve in stage_curves(rec, "stage1")[:1]:
            lam_ax.plot(curve["lambda"], color=color, ls=":", lw=1)
    lam_ax.plot([], [], color="grey", ls=":", label="λ (right axis)")
    if any(c.get("plateau") for rec in records.values() for st in ("stage1", "stage2")
           for c in stage_curves(rec, st)):
        lam_ax.plot([], [], "o", color="grey", mfc="none", label="plateau (held-out)")
        lam_ax.plot([], [], "x", color="grey", label="stop")
    lam_ax.set_ylabel("teacher-forcing weight λ")
    lam_ax.set_ylim(-0.05, 1.05)
    ax1.set(title="stage 1: each block, TF → AR", xlabel="step", ylabel="loss", yscale="log")
    ax2.set(title="stage 2: end to end, AR", xlabel="step", ylabel="loss", yscale="log")
    legend_below(fig, [ax1, lam_ax], ncols=4)
    return fig


def stage_curves(record: Mapping[str, Any], stage: str) -> list[Mapping[str, Any]]:
    """The curves of a distillation record's ``stage``: stage 1's one per block, stage 2's one.
    Records stored before the blocks trained apart (the artifact tier's, until its refill) hold
    stage 1 as one joint curve."""
    curves = record[stage]
    return list(curves["blocks"]) if "blocks" in curves else [curves]
