"""The atlas's prose findings (it tests no claim of its own) and the family the book's teachers
are taken from."""

from __future__ import annotations

import dataclasses

import numpy as np

from raptor import atlas_design
from raptor.atlas import Cell
from raptor.book.chapters.atlas.compute import Result, max_cut_verdict, seeds_table
from raptor.book.claims import (FAILS, HOLDS, INCONCLUSIVE, LEVEL, Claim, across_seeds, claim,
                                counted)
from raptor.stats import Interval


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
