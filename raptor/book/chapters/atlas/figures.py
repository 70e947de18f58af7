"""The figures and tables of the atlas, each figure drawn from its table
(:mod:`raptor.book.figure_table`), made from its
:class:`~raptor.book.chapters.atlas.compute.Result`."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd

from raptor import atlas_design
from raptor.book import plotting
from raptor.book.chapters.atlas.compute import Result, parameters_of
from raptor.book.chapters.phase_structure.figures import c1_summary, excess_row
from raptor.book.figure_table import Figure
from raptor.phase_test import EXCESS_MIN


def table(result: Result) -> pd.DataFrame:
    """One row per cell: its factors, capacity per training image, training (criterion met,
    epochs, accuracy, core-minutes) and C1's statistics at ``spec.k``."""
    rows = []
    for r in result.cells:
        c, s = r.cell, r.summary
        rows.append({
            "cell": c.name, "L": c.depth, "D": c.width, "train images": c.images, "p": c.p,
            "patch": c.patch, "seed": c.seed,
            "params / image": round(parameters_of(c) / c.images, 1),
            "converged": s["converged"], "best epoch": s["best_epoch"], "val acc": s["val_acc"],
            "train core-min": round(s["train_seconds"] * s["machine"]["threads"] / 60, 1),
            **excess_row(result.excess[c.name][result.spec.k]),
            **c1_summary(result.tests[c.name])})
    return pd.DataFrame(rows).set_index("cell")


FACTORS = {"L": ("depth L", atlas_design.DEPTHS), "D": ("width D", atlas_design.WIDTHS),
           "train images": ("training images", atlas_design.TRAIN_SIZES),
           "p": ("stochastic depth p", atlas_design.RATES),
           "patch": ("patch size", atlas_design.PATCHES)}


def _size_colours(images: pd.Series) -> dict[int, Any]:
    """A colour per training-set size: the design's and those of ``images``."""
    sizes = sorted({atlas_design.Cell(8, 64, n).images for n in atlas_design.TRAIN_SIZES}
                   | set(images))
    return dict(zip(sizes, plt.get_cmap("viridis")(np.linspace(0.1, 0.85, len(sizes)))))


def _plain_log(ax: plt.Axes) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(mticker.NullFormatter())


def factors_table(result: Result) -> pd.DataFrame:
    """One row per cell: its factors, parameters per training image and C1's test (its excess
    at the best k and the interval corrected for the k's tried), beside the paper's DINOv2-B
    matrix's excess."""
    rows = []
    for r in result.cells:
        c, t = r.cell, result.tests[r.cell.name]
        low, high = t.interval()
        rows.append({
            "cell": c.name, "L": c.depth, "D": c.width, "train images": c.images, "p": c.p,
            "patch": c.patch, "params / image": round(parameters_of(c) / c.images, 1),
            "C1's excess, best k": t.excess, "95% interval low": low, "95% interval high": high,
            "DINOv2-B excess": result.dinov2b_test.excess})
    return pd.DataFrame(rows)


def draw_factors(table: pd.DataFrame) -> plt.Figure:
    """C1's test of every cell — its excess at the best k, on the partition chosen on the residual
    over the warped decay (cross-fitted), with its interval corrected for the k's tried —
    against each factor (the design's levels; cells of one level side by side) and against
    parameters per training image, coloured by the training-set size; the paper's DINOv2-B
    matrix (the same test) and C1's threshold as lines."""
    colours = _size_colours(table["train images"])
    panels = [(column, label, levels) for column, (label, levels) in FACTORS.items()]
    fig, axes = plotting.grid(len(panels) + 1, row_height=2.4, extra=0.8, sharey=True)
    for ax, (column, label, levels) in zip(axes, panels):
        if column == "train images":
            levels = tuple(atlas_design.Cell(8, 64, n).images for n in levels)
        levels = sorted(set(levels) | set(table[column]))
        for i, row in table.iterrows():
            same = table.index[table[column] == row[column]].tolist()
            at = levels.index(row[column]) + (0.6 * (same.index(i) / (len(same) - 1) - 0.5)
                                              if len(same) > 1 else 0.0)
            _interval(ax, at, row, colours[row["train images"]])
        ax.set_xticks(range(len(levels)), [f"{v:g}" for v in levels])
        ax.set_xlim(-0.5, len(levels) - 0.5)
        ax.set_xlabel(label)
    ax = axes[-1]
    for _, row in table.iterrows():
        _interval(ax, row["params / image"], row, colours[row["train images"]])
    _plain_log(ax)
    ax.set_xlabel("params per training image")
    for ax in axes:
        ax.axhline(0, color="0.6", lw=0.8, label="_zero")
        ax.axhline(EXCESS_MIN.value, color="0.2", lw=0.8, ls="--", label="_C1 threshold")
        ax.axhline(table["DINOv2-B excess"].iloc[0], color="tab:red", lw=1, ls=":",
                   label="_DINOv2-B (paper's matrix)")
    for ax in axes:
        ax.set_ylabel("C1's excess, best k")
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=f"{n:,} images")
               for n, c in colours.items()]
    handles += [plt.Line2D([], [], color="0.2", ls="--", label="C1 threshold"),
                plt.Line2D([], [], color="tab:red", ls=":", label="DINOv2-B (paper's matrix)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    return fig


def _interval(ax: plt.Axes, at: float, row: pd.Series, colour: Any) -> None:
    name = row["cell"]
    ax.vlines(at, row["95% interval low"], row["95% interval high"], color=colour, lw=1,
              label=f"_{name}: 95% interval")
    ax.plot(at, row["C1's excess, best k"], "o", ms=3.5, color=colour, label=f"_{name}: excess")


def convergence_table(result: Result) -> pd.DataFrame:
    """One row per point of a cell's validation curve (epochs, loss), then its lowest, the
    weights kept (``lowest``)."""
    rows = []
    for r in result.cells:
        c, s = r.cell, r.summary
        rows += [{"cell": c.name, "train images": c.images,
                  "epoch": v["step"] * atlas_design.BATCH / c.images,
                  "validation loss": v["loss"], "lowest": False} for v in s["val_curve"]]
        rows.append({"cell": c.name, "train images": c.images, "epoch": s["best_epoch"],
                     "validation loss": s["val_loss"], "lowest": True})
    return pd.DataFrame(rows)


def draw_convergence(table: pd.DataFrame) -> plt.Figure:
    """Each cell's validation loss along training (epochs), its lowest marked: the weights kept
    where the criterion stopped training."""
    fig, axes = plotting.figure(1, 1, height=3.2)
    ax = axes[0, 0]
    colours = _size_colours(table["train images"])
    for name, rows in table.groupby("cell", sort=False):
        colour = colours[rows["train images"].iloc[0]]
        curve, lowest = rows[~rows["lowest"]], rows[rows["lowest"]]
        ax.plot(curve["epoch"].tolist(), curve["validation loss"].tolist(), color=colour,
                lw=0.8, alpha=0.8, label=f"_{name}")
        ax.plot(lowest["epoch"].iloc[0], lowest["validation loss"].iloc[0], "o", ms=3,
                color=colour, label=f"_{name}: lowest")
    _plain_log(ax)
    ax.set_xlabel("epochs")
    ax.set_ylabel("validation loss")
    ax.legend(handles=[plt.Line2D([], [], color=c, label=f"{n:,} images")
                       for n, c in colours.items()], frameon=False)
    return fig


FACTOR = Figure("atlas_factors", factors_table, draw_factors)
CONVERGENCE = Figure("atlas_convergence", convergence_table, draw_convergence)
FIGURES = (FACTOR, CONVERGENCE)
