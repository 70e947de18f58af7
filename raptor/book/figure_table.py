"""A figure of the book and its table: every number a figure shows is one tidy table, written
beside the figure as its CSV, and the figure is drawn from that CSV read back, from nothing else.

Each chapter's ``figures`` module declares its figures as :class:`Figure` values in ``FIGURES``;
a notebook shows one with :func:`show`. Because the drawing reads the CSV, the CSV is the figure's
data by construction; ``tests/test_figure_table.py`` draws every stored CSV again and compares
the result with the stored SVG.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from raptor.book import plotting


@dataclass(frozen=True)
class Figure:
    """One figure: ``table`` makes a chapter's result into the tidy table of every number the
    figure shows (one row an observation, one column a quantity named in words); ``draw`` draws
    the figure from that table alone. ``name`` is its files' name (``<name>.svg``, ``.pdf`` and
    ``.csv``); ``paper`` names the paper's figures it reproduces (``"Fig. 4B–E"``)."""

    name: str
    table: Callable[[Any], pd.DataFrame]
    draw: Callable[[pd.DataFrame], plt.Figure]
    paper: str | Sequence[str] = ()

    def __call__(self, result: Any) -> plt.Figure:
        """The figure of ``result``, drawn from its table as the CSV gives it back."""
        return self.draw(read_csv(to_csv(self.table(result))))


def to_csv(table: pd.DataFrame) -> str:
    """``table`` as CSV text, without its index (a column of the table is a column of the CSV),
    every number written exactly (the shortest text that reads back as the same float)."""
    return table.to_csv(index=False, lineterminator="\n")


def read_csv(text: str) -> pd.DataFrame:
    """The table :func:`to_csv` wrote (an empty field reads as missing)."""
    return pd.read_csv(io.StringIO(text))


def show(figure: Figure, result: Any, figdir: str | Path = "figures") -> tuple[plt.Figure,
                                                                               Markdown]:
    """Write ``figure``'s table of ``result`` to ``figdir/<name>.csv``, draw the figure from that
    CSV, and save it beside (:func:`raptor.book.plotting.save`, which refuses an unreadable
    figure). Returns the figure, closed, and its caption's sources line, for the notebook to
    glue."""
    text = to_csv(figure.table(result))
    fig = figure.draw(read_csv(text))
    line = plotting.save(fig, figure.name, figdir, paper=figure.paper)
    path = Path(figdir) / f"{figure.name}.csv"
    partial = plotting.partial(path)
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return fig, line
