"""The computation of the atlas: every stored cell's ladder of nulls and C1's test, the paper's
DINOv2-B matrix's, the cells of stage 2, and C1 over the seeds of the cells measured on several."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd

from raptor import atlas, atlas_design, paper
from raptor.atlas import Cell, CellResult
from raptor.book.chapters.atlas.spec import Spec
from raptor.book.chapters.phase_structure.compute import power_reps
from raptor.book.claims import HOLDS, LEVEL, versus
from raptor.book.engine import over_seeds
from raptor.phase_test import EXCESS_MIN, PhaseTest, phase_test
from raptor.planning import Plan
from raptor.stats import Interval
from raptor.structure import PhaseExcess, phase_excesses
from raptor.teachers import parameter_count


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


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """Every stored cell's max-cut ladder (:class:`~raptor.structure.PhaseExcess`) at each k and its
    :class:`~raptor.phase_test.PhaseTest` (resamples seeded by the cell's seed), and the paper's
    DINOv2-B matrix's. The cells are the atlas sweep's results: no model is asked for here, so a
    ``plan`` stands in for nothing."""
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
    return parameter_count(cell.teacher())


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


def max_cut_verdict(result: Result, cell: Cell) -> str:
    """The max-cut's excess at ``spec.k`` over the warped decay against ``EXCESS_MIN``: the test
    the book's teachers were chosen by (issue 25), before C1's test chose the partition on the
    residual at every k."""
    e = result.excess[cell.name][result.spec.k]
    return versus(e.low, e.high, EXCESS_MIN.value)
