"""Chapter *Your own ViT* (``python -m raptor analyze``): timm ViTs of three shapes, saved as
safetensors and analysed on a generated folder of images, give the package functions' numbers;
every bad input is a clear error before any work."""

from __future__ import annotations

import dataclasses
import importlib
import json
import time
import types
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image
from safetensors.torch import save_file

from raptor import analysis, dynamics
from raptor.book.chapters import analyze as chapter
from raptor.book.chapters.analyze import claims, compute, figures
from raptor.book.experiment import pretrained_walk, student_of
from raptor.book.pretrained import Pretrained
from raptor.book.spec import Machine, SpecError
from raptor.similarity import layer_similarity, phase_matrix
from raptor.storage.build_log import builds_reported
from raptor.structure import image_growth_nulls, image_phase_matrices, phase_excess
from raptor.trajectories import TokenGroups, collect_trajectories

# (timm name, image size): a cls token and no registers, registers and no cls token, patch 14
SHAPES = [("vit_tiny_patch16_224", 32), ("vit_wee_patch16_reg1_gap_256", 32),
          ("vit_small_patch14_reg4_dinov2", 28)]


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two class folders of six random RGB images each, of other sizes than the models'."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir()
        for i in range(6):
            pixels = rng.integers(0, 256, (40 + i, 36, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / c / f"{i}.png")
    return root


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, size in SHAPES:
        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False, img_size=size, num_classes=0)
        out[name] = tmp_path_factory.mktemp("weights") / f"{name}.safetensors"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out[name])
    return out


def spec_for(name: str, size: int, files: dict[str, Path], folder: Path, **changes
             ) -> chapter.Spec:
    values = dict(machine=Machine(device="cpu"), input_size=size, model=name,
                  weights=str(files[name]), images=str(folder), n_images=12, k_values=(2, 3),
                  n_boot=10, batch=5, fit_raptor=False)  # the command's default
    return dataclasses.replace(chapter.Spec(), **{**values, **changes})


def direct(name: str, size: int, files: dict[str, Path], folder: Path
           ) -> tuple[torch.nn.Module, torch.Tensor, TokenGroups]:
    """The model, its trajectories on every image of ``folder`` and its token groups, by the
    package functions (the oracle the chapter is held to)."""
    model = analysis.load_vit(name, files[name], size)
    images = analysis.image_data(str(folder), model)
    batch = next(iter(torch.utils.data.DataLoader(images, batch_size=len(images))))
    traj, _ = collect_trajectories(model, [batch], device="cpu", progress=False)
    return model, traj, TokenGroups.from_model(model)


@pytest.mark.parametrize("name, size", SHAPES)
def test_the_command_gives_the_package_functions_numbers(name: str, size: int, weights,
                                                         image_folder: Path) -> None:
    result = compute.compute(spec_for(name, size, weights, image_folder))
    model, traj, groups = direct(name, size, weights, image_folder)
    assert result.n_images == 12 and result.depth == len(model.blocks)
    np.testing.assert_allclose(result.S, phase_matrix(layer_similarity(traj, groups)), atol=1e-6)
    per_image, growth = image_phase_matrices(traj, groups), image_growth_nulls(traj, groups)
    for k in (2, 3):
        want = phase_excess(per_image, k, growth=growth, n_boot=10)
        assert result.excess[k].cut == want.cut
        assert result.excess[k].excess == pytest.approx(want.excess, abs=1e-5)
    json.dumps(compute.numbers(result), allow_nan=False)  # every number, valid JSON


@pytest.mark.parametrize("chapter_name", ["phase_structure", "finding_phases"])
def test_the_chapters_walk_any_pretrained_vit_as_this_one_does(chapter_name: str, weights,
                                                              image_folder: Path) -> None:
    name, size = SHAPES[1]
    spec = spec_for(name, size, weights, image_folder, input_size=None)
    pretrained = Pretrained(name, str(weights[name]), str(image_folder), input_size=None)
    module = importlib.import_module(f"raptor.book.chapters.{chapter_name}")
    assert module.Spec(pretrained=pretrained).pretrained == pretrained
    walked = pretrained_walk(pretrained, spec.n_images, cuts=(2,), excess=(2,), n_boot=10,
                             device="cpu")
    np.testing.assert_allclose(walked.S, compute.compute(spec).S, atol=1e-6)
    assert pretrained.label == name and Pretrained().label == "DINOv2-B"


def test_no_cls_token_is_read_through_the_mean_patch(weights, image_folder: Path) -> None:
    name = "vit_wee_patch16_reg1_gap_256"
    groups = TokenGroups.from_model(analysis.load_vit(name, weights[name], 32))
    assert groups.cls.stop == groups.cls.start
    assert groups.registers.stop - groups.registers.start == 1


def test_a_flat_folder_is_one_class_and_a_named_dataset_fits_the_model(tmp_path: Path) -> None:
    for i in range(3):
        Image.fromarray(np.zeros((20, 20, 3), np.uint8)).save(tmp_path / f"{i}.jpg")
    data = analysis.FolderImages(tmp_path, lambda im: torch.zeros(1))
    assert len(data) == 3 and set(data.labels) == {0}
    with torch.device("meta"):
        rgb = timm.create_model("vit_tiny_patch16_224", img_size=28, patch_size=7)
    image, _ = analysis.image_data("fashion-mnist", rgb)[0]
    assert image.shape == (3, 28, 28)


def bad(changes: dict, weights, folder: Path) -> str:
    """The error of the spec with ``changes``: at once, or, for the checks that need torch
    (the model against its weights), from ``compute`` before any work."""
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as err:
        compute.compute(spec_for("vit_tiny_patch16_224", 32, weights, folder, **changes))
    assert time.perf_counter() - t0 < 1.0, "the check must come before any work"
    return str(err.value)


@pytest.mark.timed
def test_bad_inputs_are_clear_errors_in_under_a_second(weights, image_folder: Path,
                                                      tmp_path: Path) -> None:
    assert "unknown timm model 'vit_nope'" in bad({"model": "vit_nope"}, weights, image_folder)
    assert "not a VisionTransformer" in bad({"model": "resnet18"}, weights, image_folder)
    assert "parameter 'weights' must be an existing local weights file" in bad(
        {"weights": str(tmp_path / "no.safetensors")}, weights, image_folder)
    other = str(weights["vit_small_patch14_reg4_dinov2"])
    assert "does not match the architecture" in bad({"weights": other}, weights, image_folder)
    assert "parameter 'images'" in bad({"images": str(tmp_path / "none")}, weights,
                                       image_folder)
    assert "k in [2, L − 1 = 11]" in bad({"k_values": (12,)}, weights, image_folder)
    assert "0 unless fit_raptor" in bad({"random_partitions": 2}, weights, image_folder)
    fixed = dataclasses.replace(chapter.SMOKE.distill, batch_size=8, val_limit=None,
                                patience=None)
    assert "at most 12 − 8 = 4 with fit_raptor" in bad(
        {"fit_raptor": True, "distill": fixed}, weights, image_folder)
    held = bad({"fit_raptor": True, "distill": dataclasses.replace(fixed, val_limit=2,
                                                                   patience=2)},
               weights, image_folder)
    assert "at most 12 − 10 = 2 with fit_raptor" in held
    assert "and 2 held out for its convergence criterion" in held
    empty = tmp_path / "empty"
    empty.mkdir()
    spec = spec_for("vit_tiny_patch16_224", 32, weights, empty)
    with pytest.raises(ValueError, match="holds no image files"):
        compute.compute(spec)


def test_smoke_result(smoke_result) -> None:
    r = smoke_result("analyze")
    assert r.depth == r.spec.teacher.depth and set(r.excess) == set(r.spec.k_values) == set(r.cuts)
    for fig in (figures.SIMILARITY(r), figures.FLOW(r), figures.FIT(r)):
        assert fig.axes
    assert set(claims.findings(r)) >= {"cuts", "excess", "dinov2b", "raptor"}
    assert figures.flow_table(r).shape == (3, 7)
    assert [[f.kind for f in fits] for fits in r.fits.values()] == [["max-cut", "random"]] * 2


def test_the_companions_raptor_is_the_cached_student_the_chapters_share(smoke_result,
                                                                        smoke_cache: Path,
                                                                        monkeypatch) -> None:
    r = smoke_result("analyze")
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    with builds_reported() as built:
        for k, cut in r.cuts.items():
            student, _ = student_of(r.spec, r.spec.teacher.p, cut)
            fitted = r.fits[k][0].partition
            assert [tuple(b) for b in student.partition] == [tuple(b) for b in fitted]
        assert built() == []  # each max-cut's Raptor was the shared, cached student


def test_the_page_names_the_model_and_keeps_its_titles_apart(smoke_result) -> None:
    r = smoke_result("analyze")
    assert claims.findings(r)["model"] == compute.model_name(r.spec)
    assert compute.model_name(r.spec).startswith(
        f"the book's own teacher (a ViT of {r.spec.teacher.depth} blocks of width "
        f"{r.spec.teacher.embed_dim}")
    assert "companion" not in claims.findings(r)["model"]
    named = types.SimpleNamespace(model="vit_tiny_patch16_224")  # any model but the companion
    assert compute.model_name(named) == "vit_tiny_patch16_224"
    for fig, n in ((figures.SIMILARITY(r), len(r.cuts) + 1),  # and DINOv2-B's matrix
                   (figures.FIT(r), len(r.fits))):
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert len(panels) == n
        assert len({round(ax.get_position().x0, 3) for ax in panels}) <= 2  # two panels a row
        fig.canvas.draw()
        boxes = [ax.title.get_window_extent() for ax in panels]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        legends = [ax.get_legend().get_window_extent() for ax in panels if ax.get_legend()]
        assert all(ax.get_window_extent().contains(*box.p0) and
                   ax.get_window_extent().contains(*box.p1) for ax, box in zip(
                       [ax for ax in panels if ax.get_legend()], legends))


def test_the_flow_is_the_dynamics_functions_on_the_same_images(weights,
                                                               image_folder: Path) -> None:
    name, size = SHAPES[2]
    result = compute.compute(spec_for(name, size, weights, image_folder))
    model, traj, groups = direct(name, size, weights, image_folder)
    for metric, want in (("convergence", dynamics.directional_convergence(traj, groups)),
                         ("speed", dynamics.angular_speed(traj, groups)),
                         ("norms", dynamics.feature_norms(traj, groups))):
        for g, m in want.items():
            np.testing.assert_allclose(getattr(result.dynamics, metric)[g].mean, m.mean,
                                       rtol=1e-5, atol=1e-6)
    assert all(len(r.stable) == len(model.blocks) for r in result.dynamics.ranks.values())


def test_bf16_gives_the_float32_phases_to_bf16_precision(weights, image_folder: Path) -> None:
    name, size = SHAPES[0]
    exact = compute.compute(spec_for(name, size, weights, image_folder))
    half = compute.compute(spec_for(name, size, weights, image_folder, bf16=True))
    np.testing.assert_allclose(half.S, exact.S, atol=0.02)
    assert not np.array_equal(half.S, exact.S)  # it did run in bfloat16


def test_a_raptor_is_fitted_on_each_max_cut_and_on_random_partitions(weights, tmp_path: Path
                                                                     ) -> None:
    rng = np.random.default_rng(1)
    for i in range(40):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            tmp_path / f"{i}.png")
    name, size = SHAPES[0]
    spec = spec_for(name, size, weights, tmp_path, fit_raptor=True, random_partitions=2,
                    distill=dataclasses.replace(chapter.SMOKE.distill, stage1_steps=2,
                                                stage2_steps=1, batch_size=8, val_limit=None,
                                                patience=None, anneal_steps=None))
    result = compute.compute(spec)
    for k, fits in result.fits.items():
        assert [f.kind for f in fits] == ["max-cut", "random", "random"]
        assert fits[0].partition == result.cuts[k]
        assert len({f.partition for f in fits}) == 3 and all(len(f.partition) == k for f in fits)
        for f in fits:  # a Raptor shares the model's embedding: layer 0 matches exactly
            assert f.cosine["cls"][0] == pytest.approx(1.0, abs=1e-6)
            assert len(f.cosine["cls"]) == len(result.S) + 1 and f.steps == 3
            assert f.agreement is None  # the model has no head
    assert figures.fit_table(result).shape[0] == 6 and figures.FIT(result).axes
    json.dumps(compute.numbers(result), allow_nan=False)


def test_a_raptor_of_any_model_can_be_distilled_under_the_convergence_criterion(
        weights, tmp_path: Path) -> None:
    """Held-out images for the criterion come from those neither analysed nor trained on; the
    table gives the steps each Raptor trained (plateau at 6, stop at 8, in each stage)."""
    rng = np.random.default_rng(2)
    for i in range(40):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            tmp_path / f"{i}.png")
    name, size = SHAPES[0]
    criterion = dataclasses.replace(chapter.SMOKE.distill, stage1_steps=20, stage2_steps=20,
                                    batch_size=8, lr=1e-9, min_lr=0.0, train_limit=16,
                                    val_limit=4, eval_every=2, patience=2)
    spec = spec_for(name, size, weights, tmp_path, fit_raptor=True, random_partitions=1,
                    k_values=(2,), distill=criterion)
    result = compute.compute(spec)
    assert [f.steps for f in result.fits[2]] == [16, 16]


@pytest.mark.slow
def test_the_command_writes_the_executed_chapter_and_every_number(weights, image_folder: Path,
                                                                  tmp_path: Path) -> None:
    from raptor.__main__ import main

    name = "vit_tiny_patch16_224"
    assert main(["analyze", "--model", name, "--weights", str(weights[name]), "--images",
                 str(image_folder), "--img-size", "32", "--k", "2", "3", "--n-images", "12",
                 "--n-boot", "10", "--batch-size", "5", "--device", "cpu",
                 "--out", str(tmp_path)]) == 0
    numbers = json.loads((tmp_path / "chapters" / "analysis.json").read_text())
    direct = compute.compute(spec_for(name, 32, weights, image_folder))
    assert numbers["excess"]["3"]["excess"] == pytest.approx(direct.excess[3].excess, abs=1e-9)
    assert numbers["c1_test"]["per_k"].keys() == {"2", "3"}
    assert (tmp_path / "chapters" / "analyze.ipynb").is_file()
    assert (tmp_path / "chapters" / "figures" / "analyze_similarity.svg").is_file()
    page = (tmp_path / "_build" / "html" / "chapters" / "analyze.html").read_text()
    assert "analyze_flow" in page or "svg" in page
    assert main(["analyze", "--model", name, "--weights", str(weights[name]), "--images",
                 str(image_folder), "--fit-raptor", "1", "--out", str(tmp_path)]) == 2


def test_a_torch_state_dict_is_checked_by_its_shapes_alone(weights, image_folder: Path,
                                                           tmp_path: Path) -> None:
    name = "vit_tiny_patch16_224"
    state = timm.create_model(name, pretrained=False, img_size=32, num_classes=5).state_dict()
    torch.save({"model": state}, tmp_path / "good.pth")
    spec = spec_for(name, 32, {name: tmp_path / "good.pth"}, image_folder)
    assert compute.model_of(spec).num_classes == 5  # the head the file holds
    del state["blocks.3.mlp.fc1.weight"]
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(SpecError, match=r"1 missing keys \['blocks.3.mlp.fc1.weight'\]"):
        spec_for(name, 32, {name: tmp_path / "bad.pth"}, image_folder).require_model()
