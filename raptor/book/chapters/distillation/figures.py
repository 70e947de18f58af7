"""The figures of chapter *Raptor*, drawn from its
:class:`~raptor.book.chapters.distillation.compute.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from raptor.book import plotting
from raptor.book.chapters.distillation.claims import MIN_COSINE
from raptor.book.chapters.distillation.compute import GROUPS, Result


def training_figure(result: Result) -> plt.Figure:
    """Two-stage distillation (App. A) of the first seed's Raptors: stage-1 loss with the
    teacher-forcing weight λ, then stage 2."""
    return plotting.training_curves({f"k={k}": rec for k, rec in result.runs[0].records.items()})


def layerwise_figure(result: Result) -> plt.Figure:
    """R² (as in Fig. 4B) and cosine similarity (Fig. 14) to the teacher through depth: the mean
    over seeds, shaded from the lowest seed to the highest."""
    fig, axes = plotting.figure(1, 2, width=plotting.BOX_WIDTH, height=3.4)
    for ax, metric, name in zip(axes[0], ("r2", "cosine"), ("(A) R²", "(B) cosine similarity")):
        per_seed = {f"k={k} {g}": np.array([run.evals[k][metric][g] for run in result.runs])
                    for k in result.spec.k_values for g in GROUPS}
        plotting.layer_curves({n: c.mean(axis=0) for n, c in per_seed.items()},
                              ylabel=f"{name[4:]} to the teacher", ax=ax,
                              title=f"{name}\nthrough depth")
        for line, (n, c) in zip(ax.lines, per_seed.items()):
            ax.fill_between(np.arange(c.shape[1]), c.min(axis=0), c.max(axis=0),
                            color=line.get_color(), alpha=0.15, lw=0, label=f"_{n} seed range")
    axes[0][1].axhline(MIN_COSINE.value, color="0.4", ls=":", lw=1,
                       label=f"C15 threshold {MIN_COSINE.value:g} [ours]")
    plotting.legend_below(fig, axes, ncols=2)
    return fig

FIGURES = ()  # converting: each figure a Figure drawn from its table
