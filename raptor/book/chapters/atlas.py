"""Chapter *Where do phases appear?*: the atlas, C1's test over small ViTs trained to convergence
(§2, Fig. 1; a map of our own: neither the paper nor the authors' code has one).

The cells (:mod:`raptor.atlas`: depth, width, training-set size, stochastic-depth rate, patch size,
seed) are measured by ``python -m raptor atlas`` and stored in the repository; the chapter trains
nothing. It reads every stored cell, verified against the manifest, measures the max-cut's block
excess over the ladder of nulls (:func:`~raptor.structure.phase_excesses`, the figures), judges
each cell by C1's test (:func:`~raptor.phase_test.phase_test`: the partition chosen on the
cross-fitted residual at every k, corrected for the k's tried, with the cell's smallest detectable
step d*) and sets it beside the paper's DINOv2-B matrix.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
import torch

from raptor import atlas, atlas_design, paper
from raptor.atlas import Cell, CellResult
from raptor.book import plotting
from raptor.book.chapters.phase_structure import c1_summary, excess_row, power_reps
from raptor.book.claims import (FAILS, HOLDS, INCONCLUSIVE, LEVEL, Claim,
                                 across_seeds, claim, counted, versus)
from raptor.book.engine import over_seeds
from raptor.book.specs.atlas import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.phase_test import EXCESS_MIN, PhaseTest, phase_test
from raptor.stats import Interval
from raptor.structure import PhaseExcess, phase_excesses
from raptor.teachers import build_teacher


@dataclass
class Result:
    spec: Spec
    cells: list[CellResult]
    excess: dict[str, dict[int, PhaseExcess]]  # cell name -> k -> the max-cut's ladder
    missing: list[Cell]  # stage 1's cells not stored yet
    tests: dict[str, PhaseTest]  # cell name -> C1's test over the k's of ``spec.k_values``
    dinov2b_test: PhaseTest

    def verdict(self, cell: Cell) -> str:
        """C1's test on one cell: phases at some k of ``spec.k_values``
        (:meth:`~raptor.phase_test.PhaseTest.verdict`)."""
        return self.tests[cell.name].verdict()


def compute(spec: Spec) -> Result:
    """Every stored cell's max-cut ladder (:class:`~raptor.structure.PhaseExcess`) at each k and its
    :class:`~raptor.phase_test.PhaseTest` (resamples seeded by the cell's seed), and the paper's
    DINOv2-B matrix's."""
    cells = atlas.load(spec.folder)
    excess = {r.cell.name: phase_excesses(r.phase, spec.k_values, growth=r.growth,
                                          n_boot=spec.n_boot, seed=r.cell.seed) for r in cells}
    tests = {r.cell.name: phase_test(r.phase, ks=spec.k_values, n_boot=spec.n_boot,
                                     power_reps=power_reps(spec.n_boot), seed=r.cell.seed)
             for r in cells}
    S = paper.dinov2b_block_similarity()
    return Result(spec, cells, excess, atlas.missing(atlas_design.stage1(), spec.folder), tests,
                  phase_test(S, ks=spec.k_values))


def stage2(result: Result) -> list[Cell]:
    """Stage 2's cells (:func:`raptor.atlas_design.stage2`) chosen by the max-cut's excess at
    ``spec.k`` (:func:`max_cut_verdict`, the test the stored design was chosen by) on
    stage 1's stored cells."""
    design = set(atlas_design.stage1())
    measured = [r.cell for r in result.cells if r.cell in design]
    return atlas_design.stage2({c: result.excess[c.name][result.spec.k].excess for c in measured},
                               [c for c in measured if max_cut_verdict(result, c) == HOLDS])


def parameters_of(cell: Cell) -> int:
    """The teacher's number of parameters."""
    with torch.device("meta"):
        return sum(p.numel() for p in build_teacher(cell.teacher()).parameters())


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


def seeds_table(result: Result) -> pd.DataFrame:
    """The cells measured on several seeds (stage 2): a row per seed (C1's excess, its interval
    corrected for the k's tried, C1's verdict), then the cell's over its seeds, each trained model
    one unit (:func:`~raptor.book.engine.over_seeds`: the mean excess on its t interval between
    seeds, against C1's threshold). Beside each verdict but "holds", the smallest effect it
    detects with 80% probability: a seed's block step d*, the cell's mean excess over its
    seeds (:meth:`~raptor.book.engine.Estimate.detectable`)."""
    by_cell: dict[Cell, list[Cell]] = {}
    for r in result.cells:
        by_cell.setdefault(dataclasses.replace(r.cell, seed=0), []).append(r.cell)
    rows: dict[tuple[str, str], tuple[str, str, str]] = {}
    for base, cells in by_cell.items():
        if len(cells) < 2:
            continue
        name = base.name.removesuffix("-s0")
        for c in sorted(cells, key=lambda c: c.seed):
            x, verdict = result.tests[c.name], result.verdict(c)
            rows[name, f"seed {c.seed}"] = (
                f"{Interval(x.excess, *x.interval(), LEVEL):+.3f}", verdict,
                "—" if verdict == HOLDS else f"a block step of {x.d_star:.2f}")
        est = over_seeds([result.tests[c.name].excess for c in cells])
        iv = est.interval()
        verdict = versus(iv.low, iv.high, EXCESS_MIN.value)
        rows[name, f"over the {len(cells)} seeds"] = (
            f"{iv:+.3f}", verdict, "—" if verdict == HOLDS else
            f"a mean excess of {EXCESS_MIN.value + est.detectable(EXCESS_MIN.value):+.3f}")
    return pd.DataFrame(list(rows.values()),
                        columns=["C1: excess", "C1", "detected with 80% probability"],
                        index=pd.MultiIndex.from_tuples(list(rows), names=["cell", "seed"]))


FACTORS = {"L": ("depth L", atlas_design.DEPTHS), "D": ("width D", atlas_design.WIDTHS),
           "train images": ("training images", atlas_design.TRAIN_SIZES), "p": ("stochastic depth p",
                                                                        atlas_design.RATES),
           "patch": ("patch size", atlas_design.PATCHES)}


def _size_colours(result: Result) -> dict[int, Any]:
    sizes = sorted({atlas_design.Cell(8, 64, n).images for n in atlas_design.TRAIN_SIZES}
                   | {r.cell.images for r in result.cells})
    return dict(zip(sizes, plt.get_cmap("viridis")(np.linspace(0.1, 0.85, len(sizes)))))


def _plain_log(ax: plt.Axes) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(mticker.NullFormatter())


def factor_figure(result: Result) -> plt.Figure:
    """C1's test of every cell — its excess at the best k, on the partition chosen on the residual
    over the warped decay (cross-fitted), with its interval corrected for the k's tried —
    against each factor (the design's levels; cells of one level side by side) and against
    parameters per training image, coloured by the training-set size; the paper's DINOv2-B
    matrix (the same test) and C1's threshold as lines."""
    t = table(result)
    colours = _size_colours(result)
    panels = [(column, label, levels) for column, (label, levels) in FACTORS.items()]
    fig, axes = plotting.grid(len(panels) + 1, row_height=2.4, extra=0.8, sharey=True)
    for ax, (column, label, levels) in zip(axes, panels):
        if column == "train images":
            levels = tuple(atlas_design.Cell(8, 64, n).images for n in levels)
        levels = sorted(set(levels) | set(t[column]))
        for (name, row), r in zip(t.iterrows(), result.cells):
            same = t[t[column] == row[column]].index.tolist()
            at = levels.index(row[column]) + (0.6 * (same.index(name) / (len(same) - 1) - 0.5)
                                              if len(same) > 1 else 0.0)
            _interval(ax, at, result.tests[r.cell.name], colours[row["train images"]],
                      r.cell.name)
        ax.set_xticks(range(len(levels)), [f"{v:g}" for v in levels])
        ax.set_xlim(-0.5, len(levels) - 0.5)
        ax.set_xlabel(label)
    ax = axes[-1]
    for (_, row), r in zip(t.iterrows(), result.cells):
        _interval(ax, row["params / image"], result.tests[r.cell.name],
                  colours[row["train images"]], r.cell.name)
    _plain_log(ax)
    ax.set_xlabel("params per training image")
    for ax in axes:
        ax.axhline(0, color="0.6", lw=0.8, label="_zero")
        ax.axhline(EXCESS_MIN.value, color="0.2", lw=0.8, ls="--", label="_C1 threshold")
        ax.axhline(result.dinov2b_test.excess, color="tab:red", lw=1, ls=":",
                   label="_DINOv2-B (paper's matrix)")
    for ax in axes:
        ax.set_ylabel("C1's excess, best k")
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=f"{n:,} images")
               for n, c in colours.items()]
    handles += [plt.Line2D([], [], color="0.2", ls="--", label="C1 threshold"),
                plt.Line2D([], [], color="tab:red", ls=":", label="DINOv2-B (paper's matrix)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    return fig


def _interval(ax: plt.Axes, at: float, t: PhaseTest, colour: Any, name: str) -> None:
    ax.vlines(at, *t.interval(), color=colour, lw=1, label=f"_{name}: 95% interval")
    ax.plot(at, t.excess, "o", ms=3.5, color=colour, label=f"_{name}: excess")


def convergence_figure(result: Result) -> plt.Figure:
    """Each cell's validation loss along training (epochs), its lowest marked: the weights kept
    where the criterion stopped training."""
    fig, axes = plotting.figure(1, 1, height=3.2)
    ax = axes[0, 0]
    colours = _size_colours(result)
    for r in result.cells:
        curve = r.summary["val_curve"]
        epochs = [v["step"] * atlas_design.BATCH / r.cell.images for v in curve]
        colour = colours[r.cell.images]
        ax.plot(epochs, [v["loss"] for v in curve], color=colour, lw=0.8, alpha=0.8,
                label=f"_{r.cell.name}")
        ax.plot(r.summary["best_epoch"], r.summary["val_loss"], "o", ms=3, color=colour,
                label=f"_{r.cell.name}: lowest")
    _plain_log(ax)
    ax.set_xlabel("epochs")
    ax.set_ylabel("validation loss")
    ax.legend(handles=[plt.Line2D([], [], color=c, label=f"{n:,} images")
                       for n, c in colours.items()], frameon=False)
    return fig


def max_cut_verdict(result: Result, cell: Cell) -> str:
    """The max-cut's excess at ``spec.k`` over the warped decay against ``EXCESS_MIN``: the test
    the book's teachers were chosen by (issue 25), before C1's test chose the partition on the
    residual at every k."""
    e = result.excess[cell.name][result.spec.k]
    return versus(e.low, e.high, EXCESS_MIN.value)


def family(result: Result, seeds: int = 3) -> tuple[Cell | None, str]:
    """The family the book's ``cpu`` teachers are taken from (seed 0's cell) and why: of the cells
    measured on ≥ ``seeds`` seeds, the cheapest to train (mean core-minutes) of those over whose
    seeds the max-cut's excess at ``spec.k`` holds (:func:`max_cut_verdict`, combined by
    :func:`~raptor.book.claims.across_seeds`); none holding, the one of the largest mean excess.
    The rule keeps the statistic the teachers were chosen by, so that re-judging the atlas with
    C1's test does not move them."""
    k, by_cell = result.spec.k, {}
    for r in result.cells:
        by_cell.setdefault(dataclasses.replace(r.cell, seed=0), []).append(r)
    cells = {c: rs for c, rs in by_cell.items() if len(rs) >= seeds}
    if not cells:
        return None, f"none yet: no cell is measured on {seeds} seeds"
    mean = {c: float(np.mean([result.excess[r.cell.name][k].excess for r in rs]))
            for c, rs in cells.items()}
    cost = {c: float(np.mean([r.summary["train_seconds"] * r.summary["machine"]["threads"]
                              for r in rs])) / 60 for c, rs in cells.items()}
    passing = [c for c, rs in cells.items() if across_seeds(
        {r.cell.seed: claim("C1", paper="", ours="", holds=max_cut_verdict(result, r.cell))
         for r in rs}).verdict == HOLDS]
    if passing:
        chosen = min(passing, key=cost.__getitem__)
        why = (f"the cheapest of the {len(passing)} cells over whose seeds the max-cut's excess "
               f"at k = {k} holds, {mean[chosen]:+.3f} over {len(cells[chosen])} seeds")
    else:
        chosen = max(mean, key=mean.__getitem__)
        why = (f"the one of the largest mean max-cut excess at k = {k}, {mean[chosen]:+.3f} over "
               f"{len(cells[chosen])} seeds: over the seeds of none of the {len(cells)} cells "
               f"measured on {seeds} or more does that excess hold")
    return chosen, (f"the cell {chosen.name.removesuffix('-s0')} ({why}; "
                    f"{cost[chosen]:.1f} core-minutes a teacher)")


def findings(result: Result) -> dict[str, str]:
    """What the atlas finds at ``spec.k``, as text for the chapter's prose."""
    k = result.spec.k
    verdicts = [result.verdict(r.cell) for r in result.cells]
    best = max(result.cells, key=lambda r: result.tests[r.cell.name].excess)
    t = result.tests[best.cell.name]
    d_stars = [result.tests[r.cell.name].d_star for r in result.cells]
    hours = sum(r.summary["train_seconds"] * r.summary["machine"]["threads"]
                for r in result.cells) / 3600
    waiting = [c for c in result.missing if c.train_size is None]
    design = len(atlas_design.stage1())
    first = design - len(result.missing)
    more = len(result.cells) - first
    converged = sum(r.summary["converged"] for r in result.cells)
    at_k = [result.excess[r.cell.name][k] for r in result.cells]
    every = [e.excess for by_k in result.excess.values() for e in by_k.values()]
    passing = [r.cell.name for r, v in zip(result.cells, verdicts) if v == HOLDS]
    table = seeds_table(result)
    over = [v for (_, seed), v in table["C1"].items() if seed.startswith("over")]
    return {
        "summary": (f"C1's test passes on {len(passing)} cells ({', '.join(passing)})" if passing
                    else "no cell measured so far has block structure beyond a smooth decay"),
        "span": f"{min(e.excess for e in at_k):+.3f} … {max(e.excess for e in at_k):+.3f}",
        "span-high": f"{max(e.high for e in at_k):+.3f}",
        "span-all": f"{min(every):+.3f} … {max(every):+.3f}",
        "stationary-max": f"{max(e.ladder['stationary'].excess for e in at_k):+.3f}",
        "k": str(k), "cells": str(len(result.cells)),
        "measured": (f"{counted(len(result.cells), 'teacher')} "
                     f"{'is' if len(result.cells) == 1 else 'are'} measured: {first} of the "
                     f"{design} cells of the design's first stage"
                     + (f" and {more} more seeds of the cells its second stage revisits"
                        if more else "")
                     + (", every one trained until the convergence criterion fired"
                        if converged == len(result.cells) else
                        f"; {converged} of them met the convergence criterion within their "
                        "budget")),
        "holds": str(verdicts.count(HOLDS)), "fails": str(verdicts.count(FAILS)),
        "inconclusive": str(verdicts.count(INCONCLUSIVE)),
        "best": f"{best.cell.name}, {Interval(t.excess, *t.interval(), LEVEL):+.3f} at k = "
                f"{t.best().k}",
        "d-star": f"{min(d_stars):.2f} … {max(d_stars):.2f}",
        "dinov2b-chosen": f"{result.dinov2b_test.excess:+.3f} at k = "
                          f"{result.dinov2b_test.best().k}",
        "core-hours": f"{hours:.1f}", "missing": str(len(result.missing)),
        "unmeasured": ("Every cell of the first stage is measured" if not result.missing else
                       f"The first stage's other {counted(len(result.missing), 'cell')}"
                       + ("" if not waiting else
                          ", trained on the whole training set," if len(waiting) == len(
                              result.missing) else
                          f" ({len(waiting)} of them on the whole training set)")
                       + f" {'is' if len(result.missing) == 1 else 'are'} not measured yet: "
                       "the widest need a GPU or hours of a CPU"),
        "seeds": (f"{len(over)} {'cell is' if len(over) == 1 else 'cells are'} measured on "
                  f"several seeds; over their seeds C1's test "
                  f"holds for {over.count(HOLDS)}, does not hold for {over.count(FAILS)} and is "
                  f"inconclusive for {over.count(INCONCLUSIVE)}" if over
                  else "No cell is measured on several seeds yet"),
        "family": family(result)[1],
    }


def claims(result: Result) -> list[Claim]:
    """The atlas tests no claim of its own: it maps where C1's test passes; C1 itself is judged
    in the chapter *Emergent phase structure*."""
    return []
