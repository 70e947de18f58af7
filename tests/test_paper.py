"""The paper's numbers (raptor.paper): internal invariants, and the book page that shows them."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from raptor import paper

PAGE = Path(__file__).resolve().parents[1] / "book" / "paper.md"
OURS_HEADING = "## Where the paper is silent"
# A number not glued to a letter or a dot: 312,500 / 0.20 / 1e-4 / 7 (not IN-1k, v2, ℓ2).
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?(?:e-?\d+)?)(?![\w.])")


def numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in NUMBER.findall(text)]


def flatten(value: object) -> list[float]:
    """The numbers of a paper value in reading order (dicts as key, value pairs; None and
    strings skipped)."""
    if value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if dataclasses.is_dataclass(value):
        return flatten(dataclasses.astuple(value))
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in flatten(k) + flatten(v)]
    return [x for v in value for x in flatten(v)]  # type: ignore[union-attr]


def resolve(name: str) -> object:
    """``RECIPE.lr`` or ``DINOV2_B_PARTITIONS[2]`` → the value in raptor.paper."""
    m = re.fullmatch(r"([A-Z][A-Z0-9_]*)((?:\.\w+|\[[^\]]+\])*)", name)
    assert m, f"not a raptor.paper name: {name!r}"
    value = getattr(paper, m.group(1))
    for attr, key in re.findall(r"\.(\w+)|\[([^\]]+)\]", m.group(2)):
        value = getattr(value, attr) if attr else value[ast.literal_eval(key)]
    return value


def tables(markdown: str) -> list[list[list[str]]]:
    """Each pipe table as rows of stripped cells (header first, the ``|---|`` line dropped)."""
    out: list[list[list[str]]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                out.append([])
            if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
                out[-1].append([c.strip() for c in line.strip().strip("|").split("|")])
        previous = line
    return out


def paper_part() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert OURS_HEADING in text
    return text.split(OURS_HEADING)[0]


# ------------------------------------------------------------------------ the module's invariants

def test_table1_rows_and_ranges() -> None:
    raptors = [f"Raptor k={k}" for k in paper.K_VALUES]
    assert list(paper.TABLE1) == [*raptors, "DINOv2 ViT-S", "DINOv2 ViT-B"]
    for row, cols in paper.TABLE1.items():
        assert list(cols) == ["IN-1k", "ADE20k", "NYUv2"]
        (acc, acc_sd), (miou, miou_sd), (rmse, rmse_sd) = cols.values()
        assert 0 < acc <= 100 and 0 < miou <= 100 and 0 < rmse < paper.NYUV2_DEPTH_RANGE[1]
        sds = (acc_sd, miou_sd, rmse_sd)
        # Raptor rows are mean ± σ over seeds; DINOv2 rows are single published models.
        assert all(s is not None and s > 0 for s in sds) if row in raptors else sds == (None,) * 3


def test_table1_orderings_the_text_states() -> None:
    acc = {k: paper.TABLE1[f"Raptor k={k}"]["IN-1k"][0] for k in paper.K_VALUES}
    vit_b, vit_s = (paper.TABLE1[f"DINOv2 ViT-{s}"]["IN-1k"][0] for s in "BS")
    assert acc[2] < acc[3] <= acc[4] < vit_b  # rises from k=2 to 3, saturates at 4 (§3)
    assert acc[4] - acc[3] < acc[3] - acc[2]
    assert acc[3] > vit_s  # "above ViT-S" (§3)
    assert paper.TABLE1["Raptor k=3"]["IN-1k"][1] == 0.1  # "σ = 0.1" (§3)


def test_quoted_shares_follow_from_table1() -> None:
    vit_b = paper.TABLE1["DINOv2 ViT-B"]["IN-1k"][0]
    for k, share in paper.SHARE_OF_DINOV2_B.items():
        assert round(paper.TABLE1[f"Raptor k={k}"]["IN-1k"][0] / vit_b, 2) == share


def test_table2_ladder() -> None:
    rungs = list(paper.TABLE2.values())
    assert len(rungs) == 6 and all(0 < r <= 100 for r in rungs)
    assert rungs == sorted(rungs)  # each part of the recipe adds (Table 2)
    assert rungs[1] - rungs[0] > paper.AR_GAIN_MIN  # "more than 68%" (§3)
    assert rungs[-1] == paper.TABLE1["Raptor k=3"]["IN-1k"][0]  # the fine-tuned probe is Table 1's


def test_partitions_cover_dinov2_b() -> None:
    assert set(paper.DINOV2_B_PARTITIONS) == set(paper.K_VALUES) == set(paper.HIERARCHICAL_EPS)
    for k, part in paper.DINOV2_B_PARTITIONS.items():
        assert len(part) == k and part[0][0] == 0 and part[-1][1] == paper.DINOV2_B_DEPTH
        assert all(a < b == c for (a, b), (c, _) in zip(part, part[1:]))
        assert all(b - a >= paper.HIERARCHICAL_MIN_SIZE for a, b in part)
    eps = [paper.HIERARCHICAL_EPS[k] for k in paper.K_VALUES]
    assert eps == sorted(eps, reverse=True)  # a lower threshold splits more


def test_recipe_and_probes_are_consistent() -> None:
    r = paper.RECIPE
    assert 0 < r.min_lr < r.lr and r.warmup_steps < r.stage1_steps == r.stage2_steps
    assert 0 < r.anneal_frac <= 1
    for w in (r.stage1_weights, r.stage2_weights):
        assert sum(w) == pytest.approx(1.0) and all(x > 0 for x in w)
    assert r.stage1_weights[0] < r.stage2_weights[0]  # stage 2 up-weights cls further
    assert paper.IMG_SIZE < paper.RESIZE and paper.IMG_SIZE % 14 == 0 == paper.ADE20K_SIZE % 14
    (r0, r1), (c0, c1) = paper.EIGEN_CROP
    assert 0 <= r0 < r1 <= paper.NYUV2_SIZE[0] and 0 <= c0 < c1 <= paper.NYUV2_SIZE[1]
    assert 0 < paper.NYUV2_DEPTH_RANGE[0] < paper.NYUV2_DEPTH_RANGE[1]


def test_figure_values() -> None:
    assert paper.SD_RATES == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert paper.SD_RISE_UP_TO in paper.SD_RATES
    assert paper.FINAL_UPDATE_RANK < paper.DMD_RANK < paper.DINOV2_B_WIDTH
    assert 0 < paper.CIFAR100_TEACHER_ACC <= 100


def test_code_defaults_come_from_the_paper() -> None:
    from raptor.model import DEPTH_HIDDEN
    from raptor.probes import ADE20K_PROBE, IMAGENET_PROBE, NYUV2_PROBE
    from raptor.train import DistillConfig

    cfg = DistillConfig(repeats=(1,))
    for f in dataclasses.fields(paper.Recipe):
        if f.name not in ("stage1_steps", "stage2_steps", "batch_size", "warmup_steps"):
            assert getattr(cfg, f.name) == getattr(paper.RECIPE, f.name), f.name
    assert DEPTH_HIDDEN == paper.DEPTH_HIDDEN
    for probe, recipe in ((IMAGENET_PROBE, paper.IMAGENET_PROBE), (ADE20K_PROBE, paper.ADE20K_PROBE),
                          (NYUV2_PROBE, paper.NYUV2_PROBE)):
        assert {k: getattr(probe, k) for k in dataclasses.asdict(recipe)} == dataclasses.asdict(recipe)


# ----------------------------------------------------------------- the book page shows the module

def test_helpers() -> None:
    assert numbers("lr 1e-4, 15 epochs, 312,500 steps, IN-1k, ℓ2, 0.001–10, (0.45, 0.10)") == [
        1e-4, 15, 312500, 0.001, 10, 0.45, 0.1]
    assert flatten({2: (0.5, None)}) == [2, 0.5]
    assert resolve("RECIPE.lr") == paper.RECIPE.lr
    assert resolve('TABLE1["Raptor k=2"]["IN-1k"]') == (81.2, 0.2)
    md = "x\n| a | b |\n|---|---|\n| 1 | 2 |\n\n| c |\n|:-:|\n"
    assert tables(md) == [[["a", "b"], ["1", "2"]], [["c"]]]


def test_every_number_in_the_pages_paper_tables_is_raptor_paper() -> None:
    found = tables(paper_part())
    assert len(found) >= 8
    named = 0
    for table in found:
        header, rows = table[0], table[1:]
        if header[0] in ("Table 1", "Table 2"):
            source = paper.TABLE1 if header[0] == "Table 1" else paper.TABLE2
            assert [r[0] for r in rows] == list(source), header[0]
            for row in rows:
                assert numbers(" ".join(row[1:])) == flatten(source[row[0]]), row
            continue
        assert header[1] == "value" and header[2] == "`raptor.paper`", header
        for row in rows:
            name = row[2].strip("`")
            value = resolve(name)
            expected = flatten(value)
            if name.startswith("DINOV2_B_PARTITIONS"):  # shown as 1-based blocks: 1–7 · 8–12
                expected = [x for a, b in value for x in (a + 1, b)]  # type: ignore[union-attr]
            assert numbers(row[1]) == expected, row
            named += 1
    assert named >= 40


def test_page_is_in_the_table_of_contents() -> None:
    toc = yaml.safe_load((PAGE.parent / "_toc.yml").read_text(encoding="utf-8"))
    first = (toc["parts"][0] if "parts" in toc else toc)["chapters"][0]
    assert toc["root"] == "intro" and first == {"file": "paper"}  # right after the intro
