"""The figures and tables of chapter *Finding the phases*, made from its
:class:`~raptor.book.chapters.finding_phases.compute.Result`; each figure is drawn from its table
(:mod:`raptor.book.figure_table`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.transforms import ScaledTranslation

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.chapters.finding_phases.compute import Result
from raptor.book.figure_table import Figure


def maxcut_table(result: Result) -> pd.DataFrame:
    """The first seed's teachers' and a pretrained model's similarity matrices, layers 1..L, once
    a k: one row an entry of a panel (:func:`plotting.similarity_table`, one panel a teacher and
    k, titled by both and the max-cut), the phase of that k's max-cut its layer lies in."""
    s = result.spec
    shown = [te for te in result.teachers if te.seed == s.teacher_seeds[0] or te.p is None]
    panels, cuts, keys = {}, {}, {}
    for te in shown:
        teacher = te.label if te.p is None else f"p={te.p}"
        for k in s.k_values:
            title = f"{teacher}, k={k}\n{phases.format_partition(te.cuts[k])}"
            panels[title], cuts[title], keys[title] = te.S, te.cuts[k], (teacher, k)
    table = plotting.similarity_table(panels, cuts)
    table.insert(1, "teacher", table["panel"].map(lambda title: keys[title][0]))
    table.insert(2, "k", table["panel"].map(lambda title: keys[title][1]))
    return table


def draw_maxcut(table: pd.DataFrame) -> plt.Figure:
    """Max-cut boundaries for each k, first seed's teachers and a pretrained model, DINOv2-B in
    the paper (Figs. 2–3, left)."""
    panels, partitions, first = plotting.similarity_matrices(table)
    return plotting.similarity_panels(panels, ncols=table["k"].nunique(), partitions=partitions,
                                      first_layer=first, width=plotting.BOX_WIDTH,
                                      max_height=plotting.BOX_TALLEST)


def stability_table(result: Result) -> pd.DataFrame:
    """C2's stability: one row a k and a subset size, the share of the held-out subsets of that
    size whose max-cut is the chapter's, with the teacher and the subsets per size."""
    return pd.DataFrame([{"k": k, "images per subset": n, "share giving the chapter's cut": share,
                          "teacher": result.stable_teacher,
                          "subsets per size": result.spec.n_resamples}
                         for k, row in result.stability.items() for n, share in row.items()])


def draw_stability(table: pd.DataFrame) -> plt.Figure:
    """Per k, the share of image subsets reproducing the max-cut against their size (C2); each k
    has its own marker and is shifted slightly sideways, so equal values stay visible."""
    fig, ((ax,),) = plotting.figure(height=3.6)
    markers = "osD^v<>p"
    by_k = dict(tuple(table.groupby("k", sort=False)))
    for i, (k, rows) in enumerate(by_k.items()):
        # shifted on screen only (3 pt a k), so that the data, and its CSV, keep the true sizes
        shift = ScaledTranslation(3 / 72 * (i - (len(by_k) - 1) / 2), 0, fig.dpi_scale_trans)
        ax.plot(rows["images per subset"], rows["share giving the chapter's cut"], ls="-", ms=6,
                marker=markers[i % len(markers)], label=f"k={k}", alpha=0.85,
                transform=ax.transData + shift)
    counts = sorted(set(table["images per subset"]))
    ax.set_xscale("log")
    ax.set_xticks(counts, counts)
    ax.minorticks_off()
    ax.set(ylim=(-0.05, 1.08), xlabel="images per subset",
           ylabel="share of subsets giving\nthe chapter's cut",
           title=f"teacher {table['teacher'].iloc[0]};\n"
                 f"{table['subsets per size'].iloc[0]} held-out subsets per size")
    plotting.legend_below(fig, [ax], ncols=4)
    return fig


def paper_partitions() -> pd.DataFrame:
    """DINOv2-B's published partitions (§3, Table 1; the authors' hierarchical bisection)."""
    parts = paper.DINOV2_B_PARTITIONS.values()
    return pd.DataFrame({"k": list(paper.DINOV2_B_PARTITIONS),
                         "paper (hierarchical)": [phases.format_partition(p) for p in parts],
                         "repeats n_j": [phases.partition_to_repeats(p) for p in parts]})


MAXCUT = Figure("finding_phases_maxcut", maxcut_table, draw_maxcut, "Figs. 2–3")
STABILITY = Figure("finding_phases_stability", stability_table, draw_stability)
FIGURES = (MAXCUT, STABILITY)
