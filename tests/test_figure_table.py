"""Each figure of the book is drawn from its table, and its CSV is that table: every stored CSV,
drawn again, gives back the figure its notebook shows (:mod:`raptor.book.figure_table`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from raptor.book import figure_table, plotting
from raptor.book.chapters import chapter, names, science
from raptor.book.figure_table import Figure, read_csv, to_csv
from raptor.book.runner import BOOK

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

MIME = "application/papermill.record/"  # a glued output's data

FIGDIR = BOOK / "chapters" / "figures"
FIGURES = [figure for name in names() for figure in science(name).figures.FIGURES]
CELL = re.compile(r'fig, sources = figure_table\.show\(figures\.(\w+), result\)\nglue\("([\w-]+)"')
SVG_ID = re.compile(r'id="([^"]+)"')


def canonical(svg: str) -> str:
    """``svg`` with its element ids renamed in order of appearance: matplotlib derives some (clip
    paths) from objects' memory addresses, which differ from one process to the next."""
    ids: dict[str, str] = {}
    for found in SVG_ID.finditer(svg):
        ids.setdefault(found[1], f"id{len(ids)}")
    if not ids:
        return svg
    names_ = "|".join(map(re.escape, sorted(ids, key=len, reverse=True)))
    return re.sub(rf'(?<=[#"])({names_})(?=[")])', lambda m: ids[m[1]], svg)


def glued() -> dict[str, str]:
    """Each figure of the stored book as its notebook shows it (the glued SVG), by file name."""
    shown = {}
    for name in names():
        module = science(name).figures
        for cell in json.loads((BOOK / chapter(name).NOTEBOOK).read_text())["cells"]:
            if found := CELL.match("".join(cell["source"])):
                svg = next(o["data"][f"{MIME}image/svg+xml"] for o in cell["outputs"]
                           if o.get("metadata", {}).get("scrapbook", {}).get("name") == found[2])
                shown[getattr(module, found[1]).name] = svg
    return shown


@pytest.fixture(scope="module")
def notebook_svg() -> Iterator[Callable[[plt.Figure], str]]:
    """A figure as a notebook shows it: the book's SVG formatter (:func:`plotting.setup`)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("IPython.get_ipython", lambda: shell)
        plotting.setup()
        yield lambda fig: shell.display_formatter.format(fig)[0]["image/svg+xml"]
    InteractiveShell.clear_instance()


def redrawn(figure: Figure, text: str, folder: Path, notebook_svg: Callable) -> str:
    """``figure`` drawn from the CSV ``text``, saved and shown as :func:`figure_table.show` and
    the notebook's glue do."""
    fig = figure.draw(read_csv(text))
    plotting.save(fig, figure.name, folder, paper=figure.paper)
    return canonical(notebook_svg(fig))


@pytest.mark.slow
def test_each_stored_figure_is_what_its_stored_csv_draws(tmp_path: Path, notebook_svg) -> None:
    """Every figure the stored notebooks show, drawn again from its stored CSV: the same SVG."""
    shown = glued()
    assert sorted(shown) == sorted(f.name for f in FIGURES), "every figure shown once"
    differ = [f.name for f in FIGURES
              if redrawn(f, (FIGDIR / f"{f.name}.csv").read_text(), tmp_path, notebook_svg)
              != canonical(shown[f.name])]
    assert not differ, f"not what their stored CSV draws: {differ}"


def test_every_stored_csv_belongs_to_a_figure() -> None:
    names_ = [figure.name for figure in FIGURES]
    assert len(set(names_)) == len(names_), "two figures share a name"
    assert {p.stem for p in FIGDIR.glob("*.csv")} == set(names_)


def test_a_number_changed_in_the_csv_draws_another_figure(tmp_path: Path, notebook_svg) -> None:
    """The comparison can fail: one value of a stored table moved by a hundredth."""
    figure = next(f for f in FIGURES if f.name == "stochastic_depth_sweep")
    table = read_csv((FIGDIR / f"{figure.name}.csv").read_text())
    table.loc[0, "R²"] -= 0.01
    assert redrawn(figure, to_csv(table), tmp_path, notebook_svg) != canonical(
        glued()[figure.name])


def test_canonical_ids_rename_every_reference_and_nothing_else() -> None:
    a = '<clipPath id="p1a2b"/><g clip-path="url(#p1a2b)"><use xlink:href="#m9"/></g><path id="m9"/>'
    b = '<clipPath id="pffee"/><g clip-path="url(#pffee)"><use xlink:href="#m0"/></g><path id="m0"/>'
    assert canonical(a) == canonical(b) != canonical(a.replace('href="#m9"', 'href="#p1a2b"'))


def test_a_table_comes_back_from_its_csv_exactly() -> None:
    """An oracle: numbers no decimal rounding keeps, a missing value, text with the CSV's
    separators, integers and booleans, each back as it was."""
    table = pd.DataFrame({"x": [1 / 3, 2 / 7, np.nan, 1e-300], "panel": ["a, b", "c\nd", "", "e"],
                          "layer": [0, 1, 2, 12], "converged": [True, False, True, True]})
    back = read_csv(to_csv(table))
    assert back["x"].to_numpy().tobytes() == table["x"].to_numpy().tobytes()
    assert back["panel"].fillna("").tolist() == table["panel"].tolist()
    assert back["layer"].tolist() == table["layer"].tolist() and back["layer"].dtype == np.int64
    assert back["converged"].tolist() == table["converged"].tolist()


def test_show_writes_the_csv_the_figure_was_drawn_from(tmp_path: Path) -> None:
    drawn: list[pd.DataFrame] = []

    def draw(table: pd.DataFrame) -> plt.Figure:
        drawn.append(table)
        fig, ((ax,),) = plotting.figure(width=4, height=3)
        ax.plot(table["layer"], table["R²"], label="R²")
        ax.set(xlabel="layer", ylabel="R²", title="a panel")
        return fig

    figure = Figure("curve", lambda r: pd.DataFrame({"layer": [0, 1, 2], "R²": r}), draw,
                    "Fig. 4B")
    fig, line = figure_table.show(figure, [1 / 3, 0.5, 2 / 3], tmp_path)
    assert not plt.fignum_exists(fig.number) and line.data.startswith(
        f"{{download}}`Data (CSV) <{tmp_path.as_posix()}/curve.csv>`")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.csv", "curve.pdf", "curve.svg"]
    pd.testing.assert_frame_equal(drawn[0], read_csv((tmp_path / "curve.csv").read_text()))
    assert drawn[0]["R²"].tolist() == [1 / 3, 0.5, 2 / 3]


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in names() if science(name).figures.FIGURES])
def test_each_figure_of_the_smoke_result_is_what_its_csv_draws(name: str, smoke_result,
                                                               tmp_path: Path) -> None:
    """As the stored book, at ``smoke``: each table comes back from its CSV with every value,
    and the figure a notebook shows is the figure its CSV draws, byte for byte."""
    result = smoke_result(name)
    for figure in science(name).figures.FIGURES:
        table = figure.table(result)
        back = read_csv(to_csv(table))
        assert list(back.columns) == [str(c) for c in table.columns], figure.name
        pd.testing.assert_frame_equal(back, table.reset_index(drop=True), check_dtype=False,
                                      obj=figure.name)
        figure_table.show(figure, result, tmp_path / "shown")
        shown = tmp_path / "shown" / f"{figure.name}.svg"
        again = figure.draw(read_csv(shown.with_suffix(".csv").read_text()))
        plotting.save(again, figure.name, tmp_path / "again", paper=figure.paper)
        assert canonical((tmp_path / "again" / shown.name).read_text()) == canonical(
            shown.read_text()), figure.name
