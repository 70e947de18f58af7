"""A figure's numbers, read off its matplotlib artists: one row a plotted point, written beside
every figure of the book as its CSV (:func:`raptor.book.plotting.save`)."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.colorbar import Colorbar
from matplotlib.container import ErrorbarContainer

COLUMNS = ("panel", "x_label", "y_label", "series", "kind", "item", "x", "x_tick", "y", "y_tick",
           "y_low", "y_high", "value")


def colour_bars(fig: plt.Figure) -> list[Colorbar]:
    """The colour bars of ``fig``, found through the images and collections they describe (each
    mappable's ``colorbar``)."""
    bars: dict[int, Colorbar] = {}
    for ax in fig.axes:
        for mappable in (*ax.images, *ax.collections):
            if (bar := getattr(mappable, "colorbar", None)) is not None:
                bars[id(bar)] = bar
    return list(bars.values())


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
    bars = colour_bars(fig)
    data_axes = [ax for ax in fig.axes if all(ax is not bar.ax for bar in bars)]
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


