"""Figures of the companion: matplotlib/seaborn, shown in the chapter and saved as files too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

Partition = Sequence[tuple[int, int]]


def save(fig: plt.Figure, name: str, figdir: str | Path = "figures") -> Path:
    """Save ``fig`` as ``figdir/name.png`` (and ``.pdf``) and return the PNG path."""
    figdir = Path(figdir)
    figdir.mkdir(parents=True, exist_ok=True)
    path = figdir / f"{name}.png"
    fig.savefig(path, dpi=130, bbox_inches="tight")
    fig.savefig(path.with_suffix(".pdf"), bbox_inches="tight")
    return path


def draw_partition(ax: plt.Axes, partition: Partition, offset: int = 0, **kw) -> None:
    """Outline a partition's diagonal blocks on a matrix drawn with ``imshow``."""
    style = {"color": "white", "lw": 1.6, **kw}
    for start, stop in partition:
        lo, hi = start + offset - 0.5, stop + offset - 0.5
        ax.plot([lo, hi, hi, lo, lo], [lo, lo, hi, hi, lo], **style)


def similarity_grid(mats: Mapping[str, Mapping[str, np.ndarray]], groups: Sequence[str], *,
                    partitions: Mapping[str, Partition] | None = None, first_layer: int = 0,
                    vmin: float | None = None, vmax: float = 1.0) -> plt.Figure:
    """One row per model, one column per token group, with max-cut blocks outlined (Fig. 1–3).

    ``mats[model][group]`` is an ``(L+1, L+1)`` similarity matrix; layers before
    ``first_layer`` are left out of the picture (partitions index the remaining ones).
    """
    rows, cols = len(mats), len(groups)
    fig, axes = plt.subplots(rows, cols, figsize=(2.9 * cols, 2.6 * rows), squeeze=False)
    for r, (model, by_group) in enumerate(mats.items()):
        for c, group in enumerate(groups):
            ax = axes[r, c]
            S = by_group.get(group)
            if S is None:
                ax.set_axis_off()
                continue
            S = S[first_layer:, first_layer:]
            im = ax.imshow(S, cmap="magma", vmin=vmin, vmax=vmax, origin="upper")
            ticks = np.arange(0, S.shape[0], max(1, S.shape[0] // 6))
            ax.set_xticks(ticks, ticks + first_layer)
            ax.set_yticks(ticks, ticks + first_layer)
            if partitions and model in partitions:
                draw_partition(ax, partitions[model])
            ax.set_title(f"{model}\n{group}", fontsize=9)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def layer_curves(curves: Mapping[str, np.ndarray], *, xlabel: str = "layer", ylabel: str = "",
                 title: str = "", boundaries: Sequence[int] = (), bands: Mapping[str, np.ndarray]
                 | None = None, ax: plt.Axes | None = None, logy: bool = False) -> plt.Axes:
    """Curves over depth, with optional ±spread bands and phase boundaries as vertical lines."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 3.2))
    palette = sns.color_palette("colorblind", len(curves))
    for color, (name, y) in zip(palette, curves.items()):
        x = np.arange(len(y))
        ax.plot(x, y, marker="o", ms=3, label=name, color=color)
        if bands and name in bands:
            ax.fill_between(x, y - bands[name], y + bands[name], color=color, alpha=0.2)
    for b in boundaries:
        ax.axvline(b, color="grey", ls="--", lw=0.8)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if logy:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    return ax


def training_curves(records: Mapping[str, Mapping], smooth: int = 10) -> plt.Figure:
    """Raptor's two stages (Fig. 5): stage-1 loss with the TF weight λ, then stage-2 loss.

    ``records`` maps a label (e.g. ``"k=3"``) to the record of :func:`raptor.train.distill`.
    Losses are shown as running means over ``smooth`` steps, on a log scale.
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    lam_ax = ax1.twinx()
    palette = sns.color_palette("colorblind", len(records))
    for color, (label, rec) in zip(palette, records.items()):
        for ax, stage in ((ax1, "stage1"), (ax2, "stage2")):
            loss = np.asarray(rec[stage]["loss"], dtype=float)
            if loss.size:
                kernel = np.ones(min(smooth, loss.size)) / min(smooth, loss.size)
                ax.plot(np.convolve(loss, kernel, mode="valid"), color=color, label=label)
        lam_ax.plot(rec["stage1"]["lambda"], color=color, ls=":", lw=1)
    lam_ax.set_ylabel("λ (teacher-forcing weight, dotted)")
    lam_ax.set_ylim(-0.05, 1.05)
    ax1.set(title="stage 1: per-block TF → AR", xlabel="step", ylabel="loss", yscale="log")
    ax2.set(title="stage 2: end to end, AR", xlabel="step", ylabel="loss", yscale="log")
    ax1.legend(fontsize=8)
    fig.tight_layout()
    return fig
