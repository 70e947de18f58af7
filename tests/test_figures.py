"""Every chapter's figures pass :func:`raptor.book.plotting.check` (no colliding text, none too
small on a phone) on the chapter's smoke result, and the stored notebooks show no warnings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from raptor.book import plotting
from raptor.book.chapters import names, science
from raptor.book.runner import BOOK

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

NOTEBOOKS = sorted((BOOK / "chapters").glob("*.ipynb")) + [BOOK / "claims.ipynb"]
WARNING_TEXT = ("Warning", "findfont")


@pytest.mark.parametrize("name", [name for name in names() if name != "claims"])
def test_every_chapter_figure_passes_the_check(name: str, smoke_result) -> None:
    result = smoke_result(name)
    failed = []
    for figure in science(name).figures.FIGURES:
        fig = figure(result)
        try:
            plotting.check(fig, f"{name}: {figure.name}")
        except plotting.FigureError as err:
            failed.append(str(err))
        plt.close(fig)
    assert not failed, "\n".join(failed)


def test_the_excess_figure_stays_readable_at_the_paper_profiles_count(smoke_result) -> None:
    """Fig. 1.2 with the paper profile's models (each rate's seeds, the untrained seeds and
    DINOv2-B; smoke's first test standing in for each) beside every control: one row a group,
    so no more rows than at smoke however many models."""
    from raptor.book.chapters.phase_structure import PAPER, figures

    r = smoke_result("phase-structure")
    shown = next(iter(r.tests.values()))
    names = [f"p={p}, seed {s}" for p in PAPER.p_values for s in PAPER.teacher_seeds]
    names += [f"untrained, seed {s}" for s in PAPER.teacher_seeds] + ["DINOv2-B"]
    many = dataclasses.replace(r, tests=dict.fromkeys(names, shown))
    fig = figures.EXCESS(many)
    assert len(fig.axes[0].get_yticks()) == len(PAPER.p_values) + 2 + 2
    plotting.check(fig, "phase_structure_excess at the paper profile's count")
    plt.close(fig)


def test_the_box_thumbnails_at_the_cpu_profile_pass_the_check() -> None:
    """Chapter 3's key figure at ``cpu``: two teachers by k = 2, 3, 4 of 12 layers, in the
    result box's size (the thumbnails whose layer ticks ran together, "13579 11", and whose
    widest title, k = 4's cut, ran into the colour bar)."""
    from types import SimpleNamespace

    from raptor.book.chapters.finding_phases import figures

    S = np.corrcoef(np.random.default_rng(0).normal(size=(12, 40)))
    cuts = {2: ((0, 5), (5, 12)), 3: ((0, 4), (4, 8), (8, 12)),
            4: ((0, 3), (3, 6), (6, 9), (9, 12))}
    result = SimpleNamespace(spec=SimpleNamespace(teacher_seeds=(0,), k_values=tuple(cuts)),
                             teachers=[SimpleNamespace(label="", p=p, seed=0, S=S, cuts=cuts)
                                       for p in (0.0, 0.2)])
    fig = figures.MAXCUT(result)
    assert fig.axes[5].get_title() == "p=0.2, k=4\n1–3 | 4–6 | 7–9 | 10–12"
    plotting.check(fig, "finding_phases_maxcut at cpu")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "6", "11"]
    plt.close(fig)


def warnings_in(path: Path) -> list[str]:
    """Each output of a stored notebook that is a warning: a stderr stream, or any text that
    says "Warning" or "findfont" (matplotlib's missing font), named by notebook and cell."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] + [v for k, v in out.get("data", {}).items()
                                               if k.startswith("text/")]
            text = "".join("".join(t) if isinstance(t, list) else t for t in texts)
            if out.get("name") == "stderr" or any(w in text for w in WARNING_TEXT):
                found.append(f"{path.name} cell {i} "
                             f"(id {cell.get('id', '?')}): {text.strip()[:200]!r}")
    return found


def test_a_planted_warning_is_found_and_a_clean_notebook_passes(tmp_path: Path) -> None:
    def notebook(*outputs: dict) -> Path:
        path = tmp_path / "chapter.ipynb"
        cells = [{"cell_type": "code", "id": "c0", "outputs": list(outputs)}]
        path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
        return path

    clean = notebook({"output_type": "stream", "name": "stdout", "text": ["trained 3 models\n"]})
    assert warnings_in(clean) == []
    for bad in ({"output_type": "stream", "name": "stderr", "text": ["100%|████|\n"]},
                {"output_type": "stream", "name": "stdout",
                 "text": ["UserWarning: converting a masked element\n"]},
                {"output_type": "display_data",
                 "data": {"text/plain": ["findfont: Font family 'Arial' not found."]}}):
        found = warnings_in(notebook(bad))
        assert len(found) == 1 and "cell 0 (id c0)" in found[0], found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_stored_notebook_output_is_a_warning(path: Path) -> None:
    found = warnings_in(path)
    assert not found, "\n".join(found)
