"""The book's figures: one style (``raptor.book.plotting``), readable at the book's width, and
every notebook figure glued, numbered and captioned.

:func:`problems` is the readability check: labelled axes and colour bars, no text under
``MIN_FONT`` points at the size a desktop shows or ``MIN_PX`` px at the size a 420-px phone
shows (the result box's figure: as the box shows it), legends clear of the data. Each of its
checks is planted in a bad figure below; then every chapter's figure must pass it on the
chapter's smoke result, and the notebooks' figure cells are run as they are written.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import re
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import pandas as pd
import pytest

from raptor.book import figure_table, plotting
from raptor.book.chapters import chapter, names, science
from raptor.book.runner import BOOK

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.text import Text

CHAPTERS = [name for name in names() if name != "claims"]
FIGURE_CELL = re.compile(r'^fig, sources = figure_table\.show\(figures\.([A-Z_]+), result\)\n'
                         r'glue\("(fig-[a-z0-9-]+)", fig, display=False\)\n'
                         r'glue\("\2-sources", sources, display=False\)$')
LAYER_AXES = ("layer", "injection layer")
BOX_FIGURE = re.compile(r":::\{div\} rc-result-figure\n```\{glue\} (fig-[a-z0-9-]+)\n")


# --------------------------------------------------------------------------- the check


def first_layer(fig: plt.Figure) -> int | None:
    """The first layer a figure's layer axes show (None: it has none): a matrix's first tick
    label, else the smallest x of the curves drawn over a layer axis."""
    firsts = []
    for ax in fig.axes:
        if ax.get_xlabel() not in LAYER_AXES:
            continue
        if ax.images:
            firsts.append(int(ax.get_xticklabels()[0].get_text()))
        else:
            xs = [np.min(line.get_xdata()) for line in ax.lines if len(line.get_xdata()) > 2]
            firsts.append(int(min(xs)))
    return min(firsts) if firsts else None


def _colorbars(fig: plt.Figure) -> dict[plt.Axes, object]:
    """Each colour bar's axes -> the colour bar. A mappable without its own colour bar is
    covered by one with the same colormap and limits (a shared scale)."""
    bars = {}
    for ax in fig.axes:
        for m in _mappables(ax):
            if m.colorbar is not None:
                bars[m.colorbar.ax] = m.colorbar
    return bars


def _mappables(ax: plt.Axes) -> list[ScalarMappable]:
    """Artists whose colour encodes data: images, and scatters coloured by a value."""
    return [*ax.images, *(c for c in ax.collections
                          if isinstance(c, ScalarMappable) and c.get_array() is not None)]


def _data_points(ax: plt.Axes) -> np.ndarray:
    """Display coordinates of the axes' plotted points (line vertices, scatter offsets)."""
    points = [line.get_transform().transform(line.get_xydata()) for line in ax.lines
              if line.get_visible() and len(line.get_xydata())]
    points += [c.get_offset_transform().transform(c.get_offsets()) for c in ax.collections
               if len(c.get_offsets())]
    return np.concatenate(points) if points else np.empty((0, 2))


def problems(fig: plt.Figure, box: bool = False) -> list[str]:
    """What makes ``fig`` hard to read in the book (``box``: as the result box shows it); empty
    when nothing does."""
    found = []
    if fig.get_figwidth() > plotting.WIDTH + 1e-9:
        found.append(f"{fig.get_figwidth():.1f} in wide, over plotting.WIDTH")
    if not hasattr(fig.canvas, "get_renderer"):  # a closed (saved) figure keeps a bare canvas
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    tight = fig.get_tightbbox(renderer)  # inches; the SVG adds plotting.PAD a side
    width, height = tight.width + 2 * plotting.PAD, tight.height + 2 * plotting.PAD
    desktop = min(1.0, plotting.COLUMN / width)
    views = {"at a 420-px phone":
             min(1.0, (plotting.BOX_COLUMN if box else plotting.PHONE_COLUMN) / width)}
    if box:
        views["in the box at 1,280 px"] = min(1.0, plotting.BOX_HEIGHT / height)
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.figure is fig:
            shown = text.get_fontsize() * desktop
            if shown < plotting.MIN_FONT - 1e-6:
                found.append(f"font {shown:.1f} pt shown: {text.get_text()[:30]!r}")
            for view, scale in views.items():
                px = text.get_fontsize() * scale * plotting.PX_PER_IN / 72
                if px < plotting.MIN_PX - 1e-6:
                    found.append(f"font {px:.1f} px {view}: {text.get_text()[:30]!r}")
    bars = _colorbars(fig)
    scales = {(bar.mappable.cmap.name, bar.mappable.get_clim()) for bar in bars.values()}
    for bar_ax in bars:
        if not (bar_ax.get_ylabel() or bar_ax.get_xlabel()):
            found.append("a colour bar without a label")
    for ax in fig.axes:
        if ax in bars or not ax.get_visible() or not ax.axison:
            continue
        where = ax.get_title() or f"axes {fig.axes.index(ax)}"
        twins = ax.get_shared_x_axes().get_siblings(ax)
        if not any(a.get_xlabel() for a in twins):
            found.append(f"{where}: no x label")
        if not ax.get_ylabel():
            found.append(f"{where}: no y label")
        found += [f"{where}: a colour scale without a colour bar" for m in _mappables(ax)
                  if (m.cmap.name, m.get_clim()) not in scales]
        legend = ax.get_legend()
        if legend is not None:
            box = legend.get_window_extent(renderer)
            points = np.concatenate([_data_points(a) for a in twins])
            inside = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1)
                      & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1))
            if inside.any():
                found.append(f"{where}: the legend covers data")
    data_boxes = [ax.get_window_extent(renderer) for ax in fig.axes if ax not in bars]
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        if any(box.overlaps(b) for b in data_boxes):
            found.append("the figure legend overlaps an axes")
    return found


def _fine(width: float = 5.0) -> tuple[plt.Figure, plt.Axes]:
    fig, ((ax,),) = plotting.figure(width=width, height=3.0)
    ax.plot([0, 1, 2], [1, 0, 1], label="a")
    ax.set(xlabel="layer", ylabel="value")
    return fig, ax


def test_a_well_made_figure_has_no_problems() -> None:
    fig, ax = _fine()
    plotting.legend_below(fig, [ax])
    assert problems(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("plant, expected", [
    (lambda fig, ax: ax.set_ylabel(""), "no y label"),
    (lambda fig, ax: ax.set_xlabel(""), "no x label"),
    (lambda fig, ax: ax.set_title("tiny", fontsize=6), "font 6.0 pt shown: 'tiny'"),
    (lambda fig, ax: ax.imshow(np.eye(3)), "a colour scale without a colour bar"),
    (lambda fig, ax: fig.colorbar(ax.imshow(np.eye(3)), ax=ax), "a colour bar without a label"),
    (lambda fig, ax: (ax.plot(np.linspace(0, 2, 300), np.full(300, 0.5)),
                      ax.legend(loc="center")), "the legend covers data"),
    (lambda fig, ax: fig.legend(loc="center"), "the figure legend overlaps an axes"),
], ids=["ylabel", "xlabel", "font", "colourbar", "colourbar-label", "legend", "figure-legend"])
def test_each_planted_problem_is_found(plant, expected: str) -> None:
    fig, ax = _fine()
    plant(fig, ax)
    assert any(expected in p for p in problems(fig)), problems(fig)
    plt.close(fig)


def test_text_too_small_on_a_phone_is_found() -> None:
    """9-pt text on a figure 7.5 in wide (the book's old width) is 9 pt on a desktop but 6.1 px
    in a 420-px phone's 372-px column (the browser test's limit is 8 px); at 5.3 in, 8.5 px there,
    but 7.4 px in the result box's 321 px."""
    fig, ((ax,),) = plt.subplots(figsize=(7.5, 3), squeeze=False, layout="constrained")
    ax.set(xlabel="layer", ylabel="value")
    assert "font 6.1 px at a 420-px phone: '0.0'" in problems(fig)
    fig.set_figwidth(5.3)
    assert problems(fig) == []
    assert "font 7.4 px at a 420-px phone: '0.0'" in problems(fig, box=True)
    plt.close(fig)


def test_a_box_figure_too_high_for_the_box_is_found() -> None:
    """The box shows its figure at most 260 px high on a desktop: 9 pt on one 5 in high, 6.4 px."""
    fig, ((ax,),) = plotting.figure(width=4, height=5)
    ax.set(xlabel="layer", ylabel="value")
    assert problems(fig) == []
    assert "font 6.4 px in the box at 1,280 px: '0.0'" in problems(fig, box=True)
    plt.close(fig)


def test_a_figure_too_wide_for_the_column_is_found() -> None:
    """The old stochastic-depth sweep: 17 in squeezed into 780 px shrinks 10-pt text to ~5 pt."""
    fig, ax = plt.subplots(figsize=(17, 3.5))
    ax.set(xlabel="p", ylabel="accuracy")
    found = problems(fig)
    assert any("over plotting.WIDTH" in p for p in found)
    assert any(p.startswith("font ") and float(p.split()[1]) < 6 for p in found), found
    plt.close(fig)


def test_twin_axes_share_the_x_label() -> None:
    fig, ax = _fine()
    ax.twinx().set_ylabel("loss")
    assert problems(fig) == []
    plt.close(fig)


def _labelled(n: int) -> tuple[plt.Figure, plt.Axes]:
    """A figure 3 in high with ``n`` labelled rows: 12 fit at 9 pt, 40 run together."""
    fig, ((ax,),) = plotting.figure(width=4, height=3.0)
    ax.scatter(np.zeros(n), np.arange(n), label="models")
    ax.set_yticks(range(n), [f"model {i}" for i in range(n)])
    ax.set(xlabel="excess", ylabel="model", title="one row a model")
    plotting.legend_below(fig, [ax])
    return fig, ax


def test_overlapping_tick_labels_fail_the_check_and_spaced_ones_pass(tmp_path: Path) -> None:
    crowded, _ = _labelled(40)
    found = plotting.overlaps(crowded)
    assert "panel 'one row a model': y tick 'model 0' overlaps panel 'one row a model': " \
           "y tick 'model 1'" in found
    with pytest.raises(plotting.FigureError, match=r"figure 'crowded' is unreadable(.|\n)*"
                                                   r"y tick 'model 1' overlaps"):
        plotting.save(crowded, "crowded", tmp_path)
    assert not list(tmp_path.iterdir())  # refused before anything is written
    plt.close(crowded)
    spaced, _ = _labelled(12)
    assert plotting.overlaps(spaced) == []
    plotting.save(spaced, "spaced", tmp_path)
    assert (tmp_path / "spaced.svg").is_file()


def test_text_colliding_across_axes_fails_the_check() -> None:
    """Two panels stacked with no space between: the upper one's lowest y tick label runs into
    the lower one's highest."""
    fig, axes = plt.subplots(2, 1, figsize=(4, 3))
    fig.subplots_adjust(hspace=0)
    for ax in axes:
        ax.set(xlabel="layer", ylabel="value")
    axes[1].set_title("lower")
    assert plotting.overlaps(fig) == ["axes 1: y tick '0.00' overlaps panel 'lower': y tick '1.00'"]
    plt.close(fig)


def test_hidden_and_out_of_view_labels_are_not_checked() -> None:
    fig, ((ax,),) = plotting.figure(width=4, height=3.0)
    ax.set_yticks(range(40), [f"model {i}" for i in range(40)])
    ax.set_ylim(-0.5, 5.5)  # six rows in view
    assert plotting.overlaps(fig) == []
    ax.set_ylim(-0.5, 39.5)
    ax.set_axis_off()
    assert plotting.overlaps(fig) == []
    plt.close(fig)


def test_text_too_small_on_a_phone_fails_the_check() -> None:
    """9 pt on a figure 7.5 in wide is 6.1 px in a 420-px phone's 372-px column."""
    fig, ((ax,),) = plt.subplots(figsize=(7.5, 3), squeeze=False, layout="constrained")
    ax.set(xlabel="layer", ylabel="value")
    assert "axes 1: x tick '0.0': 6.1 px on a phone" in plotting.illegible(fig)
    with pytest.raises(plotting.FigureError, match="6.1 px on a phone"):
        plotting.check(fig, "wide")
    fig.set_figwidth(5.3)
    assert plotting.illegible(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("side", [0.7, 1.2, 2.4])
def test_a_thumbnails_layer_ticks_stay_apart(side: float) -> None:
    """Twelve layers on a panel 0.7 in square: 1, 6, 11, not "13579 11"."""
    fig, ((ax,),) = plotting.figure(width=side + 1, height=side + 0.6)
    ax.imshow(np.eye(12))
    plotting.layer_ticks(ax, 12, 1, side)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "1" and len(labels) <= 8
    assert plotting.overlaps(fig) == []
    if side == 0.7:
        assert labels == ["1", "6", "11"]
    plt.close(fig)


# --------------------------------------------------------------------------- the style


def test_similarity_range_rounds_down_to_a_tenth_and_tops_at_one() -> None:
    assert plotting.similarity_range([np.array([[0.93, 1.0]]), np.array([[0.48]])]) == (0.4, 1.0)
    assert plotting.similarity_range([np.array([[0.7]])]) == (0.7, 1.0)
    assert plotting.similarity_range([np.array([[-3.0]])]) == (-1.0, 1.0)


def test_similarity_panels_share_one_scale_one_colour_bar_and_number_layers() -> None:
    a, b = np.full((4, 4), 0.9), np.full((4, 4), 0.55)
    fig = plotting.similarity_panels({"a": a, "b": b, "none": None}, ncols=2,
                                     partitions={"a": [(0, 2), (2, 4)]})
    images = [im for ax in fig.axes for im in ax.images]
    assert len(images) == 2
    assert {im.get_clim() for im in images} == {(0.5, 1.0)}
    assert {im.cmap.name for im in images} == {plotting.SIMILARITY_CMAP}
    bars = _colorbars(fig)
    assert len(bars) == 1 and next(iter(bars)).get_ylabel() == plotting.SIMILARITY_LABEL
    first = fig.axes[0]
    assert [t.get_text() for t in first.get_xticklabels()] == ["1", "2", "3", "4"]
    assert first.get_xlabel() == first.get_ylabel() == "layer"
    # the partition's block (layers 1–2) outlined from -0.5 to 1.5 in matrix coordinates
    outline = first.lines[0].get_xydata()
    assert outline[:, 0].min() == -0.5 and outline[:, 0].max() == 1.5
    assert not fig.axes[2].axison  # the missing panel
    assert problems(fig) == []
    plt.close(fig)


def test_phase_lines_fall_between_the_phases_layers() -> None:
    """Phase ``(3, 5)`` of a phase matrix starts at layer 4: the line sits at layer 3.5."""
    fig, ((ax,),) = plotting.figure(width=4)
    plotting.phase_lines(ax, [(0, 3), (3, 5), (5, 8)])
    assert [line.get_xdata()[0] for line in ax.lines] == [3.5, 5.5]
    plt.close(fig)


def test_layer_curves_number_layers_and_style_by_group() -> None:
    fig, ((ax,),) = plotting.figure(width=4)
    plotting.layer_curves({"k=2 cls": np.zeros(3), "k=2 patches": np.ones(3),
                           "k=3 cls": np.ones(3)}, ylabel="R²", ax=ax, first_layer=1)
    a, b, c = ax.lines
    assert list(a.get_xdata()) == [1, 2, 3]
    assert a.get_color() == b.get_color() != c.get_color()
    assert a.get_linestyle() == c.get_linestyle() != b.get_linestyle()
    plt.close(fig)


def test_figure_refuses_a_width_over_the_column() -> None:
    with pytest.raises(ValueError, match=r"width must be ≤ 5.5 in .* got 9"):
        plotting.figure(width=9)


def test_figure_refuses_more_than_two_panels_a_row_and_grid_wraps_them() -> None:
    with pytest.raises(ValueError, match="at most 2 panels a row, got 3"):
        plotting.figure(1, 3)
    fig, axes = plotting.grid(3)
    assert len(axes) == len(fig.axes) == 3
    assert [ax.get_subplotspec().get_geometry()[:2] for ax in axes] == [(2, 2)] * 3
    plt.close(fig)


def test_save_writes_svg_and_pdf_closes_and_returns_the_sources_line(tmp_path: Path) -> None:
    fig, _ = _fine()
    line = plotting.save(fig, "x", tmp_path, paper="Fig. 4B–E")
    path = tmp_path / "x.svg"
    assert path.read_text().lstrip().startswith("<?xml") and "<svg" in path.read_text()
    assert path.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
    assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.pdf", "x.svg"]
    assert line.data == (f"{{download}}`Data (CSV) <{tmp_path.as_posix()}/x.csv>` · The "
                         "paper's [Fig. 4B–E](https://arxiv.org/html/2512.19941#S2) (arXiv, §2)")


@pytest.mark.parametrize("paper, section", [("Fig. 1", 2), ("Figs. 8–12", 4), ("Fig. 14", 3),
                                            ("Table 1", 3)])
def test_sources_link_the_section_that_shows_the_papers_figure(paper: str, section: int) -> None:
    assert plotting.sources("f.csv", paper).data.endswith(
        f"The paper's [{paper}](https://arxiv.org/html/2512.19941#S{section}) (arXiv, §{section})")
    assert plotting.sources("f.csv").data == "{download}`Data (CSV) <f.csv>`"
    two = plotting.sources("f.csv", ("Fig. 4B", "Fig. 14")).data
    assert two.count("arxiv.org") == 2 and two.count("The paper's") == 1
    assert " (arXiv, §2) and [Fig. 14](" in two


@pytest.mark.parametrize("paper", ["Fig. 16", "Table 3", "figure 1", "Fig. 1 and more"])
def test_sources_refuse_a_figure_the_paper_does_not_have(paper: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"paper must name .* got {re.escape(repr(paper))}"):
        plotting.sources("f.csv", paper)
    fig, _ = _fine()
    with pytest.raises(ValueError, match="paper must name"):
        plotting.save(fig, "x", tmp_path / "figures", paper=paper)
    assert not (tmp_path / "figures").exists()  # refused before any file is written
    plt.close(fig)


def _save_many(folder: str) -> int:
    for _ in range(15):
        plotting.save(_fine()[0], "x", folder)
    return os.getpid()


def test_two_processes_saving_one_figure_do_not_collide(tmp_path: Path) -> None:
    """Two executions of one chapter into one folder (e.g. a sweep beside a run)."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        pids = pool.map(_save_many, [str(tmp_path)] * 2)
    assert len(set(pids)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.pdf", "x.svg"]


def test_profile_of_names_the_profile_or_what_changed() -> None:
    mod = chapter("phase-structure")
    assert plotting.profile_of(mod, mod.SMOKE, "smoke") == "smoke"
    assert plotting.profile_of(mod, mod.Spec(), "cpu") == "cpu"
    assert plotting.profile_of(mod, mod.PAPER, "paper") == "paper"
    assert plotting.profile_of(mod, dataclasses.replace(mod.Spec(), n_images=70), "cpu") \
        == "cpu with n_images changed"
    assert plotting.profile_of(mod, dataclasses.replace(mod.SMOKE, n_images=70), "smoke") \
        == "smoke with n_images changed"


def test_setup_outside_a_notebook_keeps_the_style() -> None:
    plotting.setup()
    assert matplotlib.rcParams["savefig.dpi"] == 200
    assert matplotlib.rcParams["font.size"] >= plotting.MIN_FONT


def test_setup_in_a_notebook_shows_figures_as_undated_svg(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        monkeypatch.setattr("IPython.get_ipython", lambda: shell)
        plotting.setup()
        fig, _ = _fine()
        data, _ = shell.display_formatter.format(fig)
        assert "image/svg+xml" in data and "image/png" not in data
        assert "<dc:date>" not in data["image/svg+xml"]  # the same figure, the same bytes
        plt.close(fig)
    finally:
        InteractiveShell.clear_instance()


# --------------------------------------------------------------------------- the chapters


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_chapter_figure_is_readable(name: str, smoke_result) -> None:
    mod, result = science(name).figures, smoke_result(name)
    for figure in mod.FIGURES:
        fig = figure(result)
        assert problems(fig) == [], figure.name
        plt.close(fig)


def notebook(name: str) -> nbformat.NotebookNode:
    return nbformat.read(BOOK / chapter(name).NOTEBOOK, as_version=4)


def figure_cells(nb: nbformat.NotebookNode) -> list[tuple[int, re.Match]]:
    """``(index, match)`` of every code cell that draws a chapter figure; fails on one that
    draws it in any other way than the book's (:func:`~raptor.book.figure_table.show`, glue)."""
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and ("show(" in cell.source
                                         or re.search(r"figures\.[A-Z]", cell.source)):
            match = FIGURE_CELL.match(cell.source.strip())
            assert match, f"cell {i} draws a figure without gluing it:\n{cell.source}"
            cells.append((i, match))
    return cells


def caption(nb: nbformat.NotebookNode, key: str) -> str:
    """The caption of the ``{glue:figure}`` labelled ``key``; fails when there is none."""
    head = f"({key})=\n:::{{glue:figure}} {key}\n"
    found = [c.source for c in nb.cells if c.cell_type == "markdown" and head in c.source]
    assert len(found) == 1, f"{key}: {len(found)} labelled glue:figure directives"
    text = found[0].split(head, 1)[1]
    assert ":::" in text, f"{key}: the figure directive is not closed"
    return text.split(":::", 1)[0].strip()


@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_figures_are_glued_numbered_and_captioned(name: str) -> None:
    nb, mod = notebook(name), science(name).figures
    cells = figure_cells(nb)
    shown = [getattr(mod, m[1]) for _, m in cells]
    assert sorted(f.name for f in shown) == sorted(f.name for f in mod.FIGURES), \
        "every figure shown once"
    keys = [m[2] for _, m in cells]
    assert len(set(keys)) == len(keys) and all(k.startswith(f"fig-{name}-") for k in keys)
    setup = [c.source for c in nb.cells if "spec = notebook_spec(chapter, globals())" in c.source]
    assert len(setup) == 1 and "plotting.setup()" in setup[0]
    assert f'glue("{name}-profile", plotting.profile_of(chapter, spec, profile), display=False)' \
        in setup[0]
    for i, match in cells:
        assert "hide-input" in nb.cells[i].metadata.get("tags", [])
        text = caption(nb, match[2])
        assert text.endswith(f"{{glue:md}}`{match[2]}-sources:myst`"), \
            f"{match[2]}: the caption's last line is its sources (data, the paper's figure)"
        assert "paper" in text and f"{{glue:text}}`{name}-profile`" in text, text
        assert len(text) > 80, f"{match[2]}: a caption should say what the figure shows"
    assert not any("plt.show()" in c.source for c in nb.cells)


@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_code_is_folded_and_has_no_test_markers(name: str) -> None:
    nb = notebook(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any("NBVAL" in c.source for c in nb.cells)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "hide-input" in params[0].metadata.tags
    claims = [c for c in code if "report(" in c.source and "claims.claims(result" in c.source]
    assert len(claims) == 1
    assert {"nbval-check-output", "hide-input"} <= set(claims[0].metadata.tags)


@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_figure_cells_run_on_the_smoke_result(name: str, smoke_result, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each figure cell, as written, on the smoke result: it glues a readable figure (the result
    box's as the box shows it), saves it as SVG, and its caption states the layer convention
    when the figure has a layer axis."""
    nb, mod = notebook(name), science(name).figures
    glued: dict[str, object] = {}

    def glue(key: str, value: object, display: bool = True) -> None:
        assert display is False
        glued[key] = value

    monkeypatch.chdir(tmp_path)
    boxed = {m[1] for c in nb.cells if c.cell_type == "markdown"
             for m in BOX_FIGURE.finditer(c.source)}
    assert boxed or not any("rc-result-figure" in c.source for c in nb.cells), "box figure unread"
    for i, match in figure_cells(nb):
        exec(nb.cells[i].source, {"figures": mod, "result": smoke_result(name),  # noqa: S102
                                  "figure_table": figure_table, "glue": glue})  # as written
        fig, file = glued[match[2]], getattr(mod, match[1]).name
        assert isinstance(fig, plt.Figure) and problems(fig, box=match[2] in boxed) == []
        assert (tmp_path / "figures" / f"{file}.svg").exists()
        data = (tmp_path / "figures" / f"{file}.csv").read_text()
        assert len(data.splitlines()) > 1, f"{file}.csv holds no numbers"
        assert glued[f"{match[2]}-sources"].data.startswith(
            f"{{download}}`Data (CSV) <figures/{file}.csv>`")
        first = first_layer(fig)
        said = caption(nb, match[2])
        assert (plotting.LAYERS in said) == (first == 0), (match[2], first)
        assert (plotting.BLOCK_LAYERS in said) == (first == 1), (match[2], first)


# --------------------------------------------------------------------------- tables

def test_a_plain_table_has_no_row_numbers_no_nan_and_readable_numbers() -> None:
    frame = pd.DataFrame({"teacher": ["p=0.0", "untrained"], "val acc": [0.79812, float("nan")],
                          "params": [599808, 23522304], "flops": [1234.5678, None]})
    html = plotting.table_html(frame)
    assert html.startswith('<div class="rc-scroll">')
    cells = re.findall(r"<t[dh]>(.*?)</t[dh]>", html)
    assert "nan" not in html.lower() and "None" not in html
    assert cells == ["teacher", "val acc", "params", "flops",
                     "p=0.0", "0.7981", "599,808", "1,235", "untrained", "—", "23,522,304", "—"]
    named = plotting.table_html(frame.set_index("teacher"))  # a named index is the rows' labels
    assert "<th>p=0.0</th>" in named and "<th>0</th>" not in named


def test_a_table_has_one_header_row_and_one_format_a_column() -> None:
    """A named index heads its own column (no second header row of index names); a column's
    floats share one number of decimals: its largest value's 4 significant digits, fewer where
    every value was stored rounded."""
    frame = pd.DataFrame({"val acc": [0.8215, 0.82], "minutes": [1.5, 12.0],
                          "excess": [0.05, 0.0123], "cut": ["1–3 | 4–12", "—"]},
                         index=pd.Index(["p=0.0, seed 0", "untrained"], name="teacher"))
    html = plotting.table_html(frame)
    head = re.search(r"<thead>(.*)</thead>", html)[1]
    assert head.count("<tr>") == 1
    assert re.findall(r"<th>(.*?)</th>", head) == ["teacher", "val acc", "minutes", "excess",
                                                   "cut"]
    rows = [re.findall(r"<t[dh]>(.*?)</t[dh]>", row)
            for row in re.findall(r"<tr>(.*?)</tr>", html.split("<tbody>")[1])]
    assert rows == [["p=0.0, seed 0", "0.8215", "1.5", "0.0500", "1–3 | 4–12"],
                    ["untrained", "0.8200", "12.0", "0.0123", "—"]]
    columns = pd.DataFrame({"a": [1.0]}, index=pd.Index(["x"], name="phases")).rename_axis(
        columns="decay")  # a pivot's column name
    assert plotting.table_html(columns).count("<tr>") == 2


def test_a_table_writes_its_verdicts_in_the_books_words() -> None:
    """A column of verdicts ("verdict", or named for a claim) reads as the badges do; a number or
    a dash there, and a verdict word in any other column, stay as they are."""
    frame = pd.DataFrame({"C1": ["holds", "does not hold", "— (no images)", float("nan")],
                          "note": ["holds"] * 4})
    rows = [re.findall(r"<td>(.*?)</td>", row)
            for row in re.findall(r"<tr>(.*?)</tr>", plotting.table_html(frame))[1:]]
    assert rows == [["holds at this scale", "holds"], ["not reproduced at this scale", "holds"],
                    ["— (no images)", "holds"], ["—", "holds"]]


def test_an_empty_claims_table_shows_nothing() -> None:
    from raptor.book.claims import claim, table

    assert table([])._repr_html_() == ""
    assert "<table" in table([claim("C5", paper="up", ours="o", holds=True)])._repr_html_()


def test_a_long_table_shows_every_row() -> None:
    html = plotting.table_html(pd.DataFrame({"x": range(100)}))
    assert "…" not in html and "..." not in html and html.count("<tr") == 101


def test_a_table_with_its_own_html_keeps_it() -> None:
    class Own(pd.DataFrame):
        def _repr_html_(self) -> str:
            return "<p>own</p>"

    assert plotting.table_html(Own({"x": [1]})) == "<p>own</p>"


def test_setup_in_a_notebook_formats_plain_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        monkeypatch.setattr("IPython.get_ipython", lambda: shell)
        plotting.setup()
        data, _ = shell.display_formatter.format(pd.DataFrame({"a": [float("nan")]}))
        assert "—" in data["text/html"] and "<th>0</th>" not in data["text/html"]
    finally:
        InteractiveShell.clear_instance()

