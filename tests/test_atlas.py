"""Tests for raptor.atlas: the design, the cells' recipes, group means, storage, a measured cell."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from raptor import atlas, atlas_design
from raptor.atlas import Cell
from raptor.structure import image_phase_matrices, phase_excess
from raptor.teachers import get_teacher
from raptor.trajectories import TokenGroups, collect_trajectories


def test_stage1_is_the_stated_design_cheapest_first() -> None:
    cells = atlas_design.stage1()
    assert len(cells) == len(set(cells)) == 48
    core = {Cell(L, D, n) for L, D, n in itertools.product(atlas_design.DEPTHS, atlas_design.WIDTHS,
                                                          atlas_design.TRAIN_SIZES)}
    assert core <= set(cells)
    assert {c.p for c in cells} == set(atlas_design.RATES) and {c.patch for c in cells} == {4, 7}
    assert all(c.depth == 12 and c.width == 64 and c.patch == 7 for c in cells if c.p)
    assert all(c.width == 64 and not c.p for c in cells if c.patch == 4)
    costs = [c.step_cost() * atlas_design.budget_epochs(c.images) * c.images for c in cells]
    assert costs == sorted(costs) and {c.seed for c in cells} == {0}


def test_stage2_takes_two_more_seeds_of_the_passing_cells_and_their_neighbours() -> None:
    design = atlas_design.stage1()
    centre = Cell(12, 64, 5000, 0.2)
    assert {c.name for c in atlas_design.neighbours(centre, design)} == {
        "L12-D64-n5000-p0.1-P7-s0", "L12-D64-n5000-p0.3-P7-s0", "L12-D64-n1000-p0.2-P7-s0",
        "L12-D64-nfull-p0.2-P7-s0"}  # no cell at L = 8, 16 or D = 128 with p = 0.2
    corner = Cell(8, 64, 1000)
    assert {c.name for c in atlas_design.neighbours(corner, design)} == {
        "L12-D64-n1000-p0-P7-s0", "L8-D128-n1000-p0-P7-s0", "L8-D64-n5000-p0-P7-s0",
        "L8-D64-n1000-p0-P4-s0"}
    excess = {c: 0.0 for c in design} | {centre: 0.01}
    chosen = atlas_design.stage2(excess, [])  # none passes: the largest excess and its neighbours
    assert len(chosen) == 10 and set(chosen) == {
        dataclasses.replace(c, seed=s) for c in [centre, *atlas_design.neighbours(centre, design)]
        for s in (1, 2)}
    both = atlas_design.stage2(excess, [corner, centre])  # passing cells win over the largest excess
    assert {dataclasses.replace(c, seed=0) for c in both} == {
        corner, centre, *atlas_design.neighbours(corner, design), *atlas_design.neighbours(centre, design)}
    assert [c.step_cost() * atlas_design.budget_epochs(c.images) * c.images for c in both[::2]] == \
        sorted(c.step_cost() * atlas_design.budget_epochs(c.images) * c.images for c in both[::2])


def test_budget_and_recipe() -> None:
    assert [atlas_design.budget_epochs(n) for n in (1000, 5000, 60_000)] == [400, 100, 30]
    small, full = Cell(12, 64, 1000).training(), Cell(12, 64, None).training()
    assert (small.steps, small.eval_every, small.train_limit) == (400 * 7, 50, 1000)
    assert (full.steps, full.eval_every, full.train_limit) == (30 * 468, 468, None)
    assert small.patience == full.patience == atlas_design.PATIENCE
    teacher = Cell(16, 192, 5000, p=0.3, patch=4).teacher()
    assert (teacher.depth, teacher.embed_dim, teacher.num_heads, teacher.patch_size, teacher.p,
            teacher.reg_tokens) == (16, 192, 12, 4, 0.3, atlas_design.REGISTERS)
    assert Cell(8, 64, None, p=0.1).name == "L8-D64-nfull-p0.1-P7-s0"
    assert all(Cell.from_name(c.name) == c for c in atlas_design.stage1())
    with pytest.raises(ValueError, match="L12-D64-n1000-p0-P7-s0"):
        Cell.from_name("L12-D64")


@pytest.mark.parametrize("changes, match", [({"width": 72}, "multiple of 16"),
                                            ({"train_size": 100}, "train_size"),
                                            ({"patch": 5}, "divisible"),
                                            ({"p": 1.0}, "stochastic-depth")])
def test_a_bad_cell_is_refused_naming_the_field(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Cell(**{"depth": 8, "width": 64, "train_size": 1000, **changes})


def test_group_means_keep_the_mean_and_the_half_means() -> None:
    x = np.random.default_rng(0).normal(size=(40, 3, 3))
    g = atlas.group_means(x, 10)
    np.testing.assert_allclose(g[1], x[4:8].mean(0))
    np.testing.assert_allclose(g.mean(0), x.mean(0))
    with pytest.raises(ValueError, match="equal groups"):
        atlas.group_means(x, 7)


def result(cell: Cell, seed: int = 0) -> atlas.CellResult:
    rng = np.random.default_rng(seed)
    return atlas.CellResult(cell, rng.uniform(size=(10, 4, 4)), rng.uniform(size=(10, 4, 4)),
                            {"converged": True, "val_curve": [{"step": 50, "acc": 0.5}]})


def test_save_then_load_round_trips_within_half_precision(tmp_path: Path) -> None:
    a, b = result(Cell(8, 64, 1000)), result(Cell(8, 64, 5000), 1)
    atlas.save(a, tmp_path)
    atlas.save(b, tmp_path)
    assert atlas.missing([a.cell, b.cell, Cell(8, 128, 1000)], tmp_path) == [Cell(8, 128, 1000)]
    loaded = atlas.load(tmp_path)
    assert [r.cell for r in loaded] == [a.cell, b.cell]
    for got, want in zip(loaded, (a, b)):
        np.testing.assert_allclose(got.phase, want.phase, atol=5e-4)
        np.testing.assert_allclose(got.growth, want.growth, atol=5e-4)
        assert got.summary == want.summary
    assert len((tmp_path / atlas_design.MANIFEST).read_text().splitlines()) == 2
    assert [r.cell for r in atlas.load(tmp_path, [b.cell])] == [b.cell]


def test_an_altered_missing_or_foreign_result_is_refused(tmp_path: Path) -> None:
    r = result(Cell(8, 64, 1000))
    path = atlas.save(r, tmp_path)
    with pytest.raises(FileNotFoundError, match="python -m raptor atlas"):
        atlas.load(tmp_path, [Cell(12, 64, 1000)])
    data = bytearray(path.read_bytes())
    data[-10] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        atlas.load(tmp_path)
    atlas.save(r, tmp_path)
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
    meta["format"] = atlas.FORMAT + 1
    np.savez_compressed(path, phase=r.phase, growth=r.growth, meta=np.array(json.dumps(meta)))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / atlas_design.MANIFEST).write_text(f"{digest}  {path.name}\n")
    with pytest.raises(ValueError, match="format"):
        atlas.load(tmp_path)


def test_a_measured_cell_holds_what_c1_reads(short_atlas: Path) -> None:
    """Real Fashion-MNIST: the stored group means are those of the teacher's own per-image
    matrices, recomputed here from the cached teacher; the summary tells the criterion's state."""
    cell = Cell(3, 16, 256, patch=7)
    paths = [atlas.save(atlas.measure(cell, device="cpu"), short_atlas)]
    assert atlas.missing([cell], short_atlas) == []  # stored: not measured again
    (got,) = atlas.load(short_atlas)
    assert got.cell == cell and paths == [short_atlas / f"{cell.name}.npz"]
    model, record = get_teacher(cell.teacher(), cell.training(), seed=0, progress=False,
                                device="cpu")
    images, labels = atlas.eval_images(atlas_design.DATASET, 40)
    traj, _ = collect_trajectories(model, [(images, labels)], device="cpu", progress=False)
    want = image_phase_matrices(traj, TokenGroups.from_model(model)).reshape(10, 4, 3, 3).mean(1)
    np.testing.assert_allclose(got.phase, want, atol=1e-3)
    s = got.summary
    assert (s["stopped"], s["budget_steps"], s["converged"]) == (2, 2, False)
    assert s["best_step"] == 2 and s["epochs"] == 1.0 and s["machine"]["torch"] == torch.__version__
    assert 0 <= s["eval_acc"] <= 1 and record["best"]["loss"] == s["val_loss"]
    assert np.isfinite(phase_excess(got.phase, 2, growth=got.growth, n_boot=10).excess)
