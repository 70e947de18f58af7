"""The book's figure style, in one place: sizes, fonts, the similarity colour scale, layers.

Conventions every chapter follows (stated once in each caption through :data:`LAYERS`):

- **layers**: layer 0 is the embedding and layer ``l`` the output of block ``l`` (the paper's
  ``f_l``, §1 and Fig. 1), so a phase matrix covers layers ``1..L``; a caption says so with
  :data:`LAYERS` when its layer axis starts at 0, with :data:`BLOCK_LAYERS` when it starts at 1;
- **similarity**: one colormap, :data:`SIMILARITY_CMAP`, from :func:`similarity_range` (top 1,
  bottom the figure's lowest value rounded down to 0.1), with a labelled colour bar;
- **size**: figures at most :data:`WIDTH` wide, so the book shows them at their natural size
  and no text is smaller than :data:`MIN_FONT` points; legends sit outside the data.

Notebooks call :func:`setup` once (SVG output), glue each figure with ``myst_nb.glue`` and
:func:`save` it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from raptor.book.specs import spec_for
from raptor.book.spec import diff

Partition = Sequence[tuple[int, int]]

WIDTH = 7.5  # inches: the book's text column is ~780 px, i.e. 8.1 in at 96 px per inch
MIN_FONT = 9.0  # points, at the size the book shows
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
    """In a notebook, show figures as SVG (sharp at any zoom), in :data:`STYLE`."""
    mpl.rcParams.update(STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("svg", metadata={"Date": None})  # no timestamp: stable diffs


def figure(nrows: int = 1, ncols: int = 1, *, width: float = WIDTH, height: float | None = None,
           **kw: Any) -> tuple[plt.Figure, np.ndarray]:
    """A figure in the book's style, ``width`` inches wide, and its 2-D array of axes."""
    if width > WIDTH:
        raise ValueError(f"width must be ≤ {WIDTH} in (the book's column), got {width}")
    return plt.subplots(nrows, ncols, squeeze=False, figsize=(width, height or 2.6 * nrows + 0.4),
                        layout="constrained", **kw)


def save(fig: plt.Figure, name: str, figdir: str | Path = "figures") -> None:
    """Write ``fig`` to ``figdir/name.svg`` and ``.pdf`` and close it. It returns nothing, so a
    notebook cell ending with it shows no output above the figure."""
    figdir = Path(figdir)
    figdir.mkdir(parents=True, exist_ok=True)
    path = figdir / f"{name}.svg"
    for target, undated in ((path, {"Date": None}), (path.with_suffix(".pdf"),
                                                     {"CreationDate": None})):
        # one partial file per process: two runs of a chapter into one folder must not collide
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        fig.savefig(partial, format=target.suffix[1:], bbox_inches="tight", metadata=undated)
        partial.replace(target)
    plt.close(fig)


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
    for start, stop in partition:
        lo, hi = start + offset - 0.5, stop + offset - 0.5
        ax.plot([lo, hi, hi, lo, lo], [lo, lo, hi, hi, lo], **style)


def similarity_panels(panels: Mapping[str, np.ndarray | None], *, ncols: int,
                      partitions: Mapping[str, Partition] | None = None, first_layer: int = 1
                      ) -> plt.Figure:
    """Similarity matrices in a grid of ``ncols`` columns, one colour bar for all (Figs. 1–4).

    ``panels`` maps a title to a matrix whose row 0 is layer ``first_layer`` (``None`` leaves the
    panel empty); ``partitions[title]`` (indices into that matrix) is outlined in white.
    """
    ncols = max(1, min(ncols, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    side = min(2.4, (WIDTH - 1.1) / ncols)
    fig, axes = figure(nrows, ncols, width=ncols * side + 1.1, height=nrows * (side + 0.6))
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
        ax.axvline(start + 0.5, color="grey", ls="--", lw=0.8)


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
    """Raptor's two training stages (App. A): stage-1 loss with the teacher-forcing weight λ,
    then the stage-2 loss.

    ``records`` maps a label (e.g. ``"k=3"``) to the record of :func:`raptor.train.distill`.
    Losses are shown as running means over ``smooth`` steps, on a log scale.
    """
    fig, (axes,) = figure(1, 2, height=3.3)
    ax1, ax2 = axes
    lam_ax = ax1.twinx()
    palette = sns.color_palette("colorblind", len(records))
    for color, (label, rec) in zip(palette, records.items()):
        for ax, stage in ((ax1, "stage1"), (ax2, "stage2")):
            loss = np.asarray(rec[stage]["loss"], dtype=float)
            if loss.size:
                width = min(smooth, loss.size)
                ax.plot(np.convolve(loss, np.ones(width) / width, mode="valid"), color=color,
                        label=label)
        lam_ax.plot(rec["stage1"]["lambda"], color=color, ls=":", lw=1)
    lam_ax.plot([], [], color="grey", ls=":", label="λ (right axis)")
    lam_ax.set_ylabel("teacher-forcing weight λ")
    lam_ax.set_ylim(-0.05, 1.05)
    ax1.set(title="stage 1: per block, TF → AR", xlabel="step", ylabel="loss", yscale="log")
    ax2.set(title="stage 2: end to end, AR", xlabel="step", ylabel="loss", yscale="log")
    legend_below(fig, [ax1, lam_ax], ncols=4)
    return fig
