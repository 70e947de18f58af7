"""Chapter *Where do phases appear?* (the atlas): stored cells read back, C1's test on each,
checked on the synthetic controls stored as cells; the table, figures and findings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as st

from raptor import atlas, atlas_design, controls
from raptor.atlas import Cell
from raptor.book.chapters import atlas as chapter
from raptor.book.chapters.atlas import claims, compute, figures
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE
from raptor.phase_test import EXCESS_MIN
from raptor.book.spec import SpecError


def summary(cell: Cell) -> dict:
    curve = [{"step": 50, "loss": 0.9, "acc": 0.7}, {"step": 100, "loss": 0.8, "acc": 0.75}]
    return {"converged": True, "best_step": 100,
            "best_epoch": 100 * atlas_design.BATCH / cell.images, "val_loss": 0.8,
            "val_acc": 0.75, "val_curve": curve, "train_seconds": 60.0, "machine": {"threads": 1}}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Cell, bool]]:
    """Every synthetic control of :mod:`raptor.controls` stored as a 12-block cell (200 images
    in 100 groups): does the chapter, through storage, judge each as its built-in answer?"""
    folder = tmp_path_factory.mktemp("atlas")
    answers = {}
    for seed, (name, (phased, case)) in enumerate(controls.CONTROLS.items()):
        cell = Cell(12, 64, 1000, seed=seed)
        per_image, growth = case(200, seed)
        growth = per_image if growth is None else growth  # a matrix control has no stream
        atlas.save(atlas.CellResult(cell, atlas.group_means(per_image, 100),
                                    atlas.group_means(growth, 100), summary(cell)), folder)
        answers[cell] = phased
    return folder, answers


@pytest.fixture(scope="module")
def result(stored) -> compute.Result:
    return compute.compute(dataclasses.replace(chapter.Spec(), results=str(stored[0]),
                                               k_values=(3,), n_boot=20))


def test_the_controls_stored_as_cells_get_their_built_in_verdicts(stored, result) -> None:
    _, answers = stored
    assert {c: result.verdict(c) for c in answers} == \
        {c: HOLDS if phased else FAILS for c, phased in answers.items()}


def test_table_figures_and_findings(stored, result) -> None:
    t = figures.table(result)
    assert len(t) == len(controls.CONTROLS) and set(t["C1"]) == {HOLDS, FAILS}
    assert all(d != "—" for d in t["d*"])
    assert (t["params / image"] > 0).all() and (t["train core-min"] == 1.0).all()
    for fig in (figures.FACTOR(result), figures.CONVERGENCE(result)):
        assert fig.axes
    factors = figures.FACTOR.table(result)
    assert factors["cell"].tolist() == t.index.tolist()
    assert (factors["95% interval low"] <= factors["C1's excess, best k"]).all()
    assert (factors["C1's excess, best k"] <= factors["95% interval high"]).all()
    curves = figures.CONVERGENCE.table(result)
    assert curves.groupby("cell", sort=False)["lowest"].sum().tolist() == [1] * len(t)
    f = claims.findings(result)
    positive = sum(phased for phased, _ in controls.CONTROLS.values())
    assert (f["holds"], f["fails"], f["cells"]) == (str(positive),
                                                      str(len(controls.CONTROLS) - positive),
                                                      str(len(controls.CONTROLS)))
    design = set(atlas_design.stage1())
    missing = len(design - set(stored[1]))
    assert f["missing"] == str(missing) and claims.claims(result) == []
    n = len(controls.CONTROLS)
    assert f["measured"].startswith(f"{n} teachers are measured: {len(design) - missing} of the "
                                    f"{len(design)} cells of the design's first stage")
    assert f["unmeasured"].startswith(f"The first stage's other {missing} cells")
    assert " 1 are" not in f["measured"] + f["unmeasured"]
    assert np.isfinite(result.dinov2b_test.excess)


def detected(excess: np.ndarray) -> float:
    """The true mean excess that the t interval over these seeds puts above C1's threshold with
    80% probability (oracle: scipy's noncentral t on a fine grid of noncentralities)."""
    n = len(excess)
    crit = st.t.ppf(0.975, n - 1)
    grid = np.arange(0.0, 30.0, 1e-4)
    delta = grid[np.argmax(st.nct.sf(crit, n - 1, grid) >= 0.8)]
    return EXCESS_MIN.value + delta * excess.std(ddof=1) / np.sqrt(n)


def test_seeds_of_one_cell_are_combined_on_a_t_interval_over_seeds(stored, result) -> None:
    """The controls are stored as seeds of one cell: one row, each seed's verdict, and over the
    seeds the mean excess on the t interval of their spread (scipy's t, the oracle), each trained
    model one unit, against C1's threshold."""
    _, answers = stored
    table = compute.seeds_table(result)
    n = len(answers)
    seeds = sorted(answers, key=lambda c: c.seed)
    assert list(table.index) == [("L12-D64-n1000-p0-P7", s) for s in
                                 [f"seed {c.seed}" for c in seeds] + [f"over the {n} seeds"]]
    assert list(table["C1"][:-1]) == [HOLDS if answers[c] else FAILS for c in seeds]
    x = result.tests[seeds[0].name]
    low, high = x.interval()
    assert table.iloc[0]["C1: excess"] == f"{x.excess:+.3f} [{low:+.3f}, {high:+.3f}]"
    excess = np.array([result.tests[c.name].excess for c in seeds])
    lo, hi = st.t.interval(0.95, n - 1, excess.mean(), st.sem(excess))
    assert table.iloc[-1]["C1: excess"] == f"{excess.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"
    assert table["C1"].iloc[-1] == (HOLDS if lo > EXCESS_MIN.value else
                                    FAILS if hi < EXCESS_MIN.value else INCONCLUSIVE)
    for (_, row), c in zip(table.iloc[:-1].iterrows(), seeds):  # each miss says what it can see
        assert row.iloc[2] == ("—" if row["C1"] == HOLDS else
                               f"a block step of {result.tests[c.name].d_star:.2f}")
    if table["C1"].iloc[-1] != HOLDS:
        assert table.iloc[-1, 2] == f"a mean excess of {detected(excess):+.3f}"
    planted = dataclasses.replace(result, tests={  # every seed far above the threshold
        name: dataclasses.replace(x, per_k={k: dataclasses.replace(e, excess=0.2 + 0.01 * i,
                                                                   boots=e.boots * 0 + 0.2)
                                            for k, e in x.per_k.items()})
        for i, (name, x) in enumerate(result.tests.items())})
    held = compute.seeds_table(planted)
    assert set(held["C1"]) == {HOLDS} and set(held.iloc[:, 2]) == {"—"}
    assert claims.findings(result)["seeds"].startswith("1 cell is measured on several seeds; ")
    one = dataclasses.replace(result, cells=result.cells[:1])
    assert compute.seeds_table(one).empty  # a single seed is no row
    assert claims.findings(one)["seeds"] == "No cell is measured on several seeds yet"
    assert claims.family(one) == (None, "none yet: no cell is measured on 3 seeds")
    chosen, why = claims.family(result)  # one cell, on seven seeds
    assert chosen == seeds[0] and why.startswith("the cell L12-D64-n1000-p0-P7 (")
    by_max_cut = claims.across_seeds({c.seed: claims.claim(
        "C1", paper="", ours="", holds=compute.max_cut_verdict(result, c)) for c in seeds})
    assert ("the cheapest" in why) == (by_max_cut.verdict == HOLDS)


def test_the_books_teachers_are_the_family_the_stored_atlas_chooses(smoke_result) -> None:
    """The ``cpu`` profile's teachers (:data:`raptor.book.profiles.FAMILY`) are the cell the
    repository's atlas chooses by the rule of :func:`claims.family` (at ``smoke``: the stored
    cells, the chosen k alone)."""
    from raptor.book.profiles import FAMILY

    result = smoke_result("atlas")
    assert result.spec.results == chapter.Spec().results and \
        result.spec.k_values == (chapter.Spec().k,)
    assert claims.family(result)[0] == FAMILY


def test_a_folder_without_results_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="parameter 'results' must be a folder holding"):
        dataclasses.replace(chapter.Spec(), results=str(tmp_path))
    with pytest.raises(SpecError, match="parameter 'k' must be one of k_values"):
        dataclasses.replace(chapter.Spec(), k_values=(2,))


def test_smoke_result(smoke_result) -> None:
    r = smoke_result("atlas")
    assert r.cells and len(r.excess) == len(r.cells)
    assert len(figures.table(r)) == len(r.cells)
