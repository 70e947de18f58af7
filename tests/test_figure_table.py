"""Each figure of the book is drawn from its table, and its CSV is that table: every stored CSV,
drawn again, gives back the stored SVG byte for byte (:mod:`raptor.book.figure_table`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from raptor.book import figure_table, plotting
from raptor.book.chapters import names, science
from raptor.book.figure_table import Figure, read_csv, to_csv
from raptor.book.runner import BOOK

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

FIGDIR = BOOK / "chapters" / "figures"
FIGURES = [figure for name in names() for figure in science(name).figures.FIGURES]


def svg(figure: Figure, text: str, folder: Path) -> bytes:
    """``figure`` drawn from the CSV ``text`` and saved as the book saves it."""
    plotting.save(figure.draw(read_csv(text)), figure.name, folder, paper=figure.paper)
    return (folder / f"{figure.name}.svg").read_bytes()


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f.name)
def test_each_stored_figure_is_what_its_stored_csv_draws(figure: Figure, tmp_path: Path) -> None:
    stored = FIGDIR / f"{figure.name}.csv"
    assert svg(figure, stored.read_text(), tmp_path) == stored.with_suffix(".svg").read_bytes(), \
        f"{figure.name}.svg is not what {figure.name}.csv draws"


def test_every_stored_figure_belongs_to_a_chapter() -> None:
    names_ = [figure.name for figure in FIGURES]
    assert len(set(names_)) == len(names_), "two figures share a name"
    stored = {p.stem for p in FIGDIR.iterdir() if p.suffix in (".csv", ".svg", ".pdf")}
    assert stored == set(names_)


def test_a_number_changed_in_the_csv_draws_another_figure(tmp_path: Path) -> None:
    """The comparison can fail: one value of a stored table moved by a hundredth."""
    figure = next(f for f in FIGURES if f.name == "stochastic_depth_sweep")
    table = read_csv((FIGDIR / f"{figure.name}.csv").read_text())
    table.loc[0, "R²"] -= 0.01
    assert svg(figure, to_csv(table), tmp_path) != (FIGDIR / f"{figure.name}.svg").read_bytes()


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
        csv = shown.with_suffix(".csv").read_text()
        assert svg(figure, csv, tmp_path / "again") == shown.read_bytes(), figure.name
