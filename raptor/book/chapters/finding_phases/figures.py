"""The figures and tables of chapter *Finding the phases*, drawn from its
:class:`~raptor.book.chapters.finding_phases.compute.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.transforms import ScaledTranslation

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.chapters.finding_phases.compute import Result


def maxcut_figure(result: Result) -> plt.Figure:
    """Max-cut boundaries for each k, first seed's teachers and a pretrained model, DINOv2-B in
    the paper (Figs. 2–3, left)."""
    s = result.spec
    shown = [te for te in result.teachers if te.seed == s.teacher_seeds[0] or te.p is None]
    panels, cuts = {}, {}
    for te in shown:
        for k in s.k_values:
            title = (f"{te.label if te.p is None else f'p={te.p}'}, k={k}\n"
                     f"{phases.format_partition(te.cuts[k])}")
            panels[title], cuts[title] = te.S, te.cuts[k]
    return plotting.similarity_panels(panels, ncols=len(s.k_values), partitions=cuts,
                                      width=plotting.BOX_WIDTH, max_height=plotting.BOX_TALLEST)


def stability_figure(result: Result) -> plt.Figure:
    """Per k, the share of image subsets reproducing the max-cut against their size (C2); each k
    has its own marker and is shifted slightly sideways, so equal values stay visible."""
    s = result.spec
    fig, ((ax,),) = plotting.figure(height=3.6)
    markers = "osD^v<>p"
    for i, (k, row) in enumerate(result.stability.items()):
        # shifted on screen only (3 pt a k), so that the data, and its CSV, keep the true sizes
        shift = ScaledTranslation(3 / 72 * (i - (len(result.stability) - 1) / 2), 0,
                                  fig.dpi_scale_trans)
        ax.plot(list(row), list(row.values()), ls="-", ms=6, marker=markers[i % len(markers)],
                label=f"k={k}", alpha=0.85, transform=ax.transData + shift)
    counts = sorted({n for row in result.stability.values() for n in row})
    ax.set_xscale("log")
    ax.set_xticks(counts, counts)
    ax.minorticks_off()
    ax.set(ylim=(-0.05, 1.08), xlabel="images per subset",
           ylabel="share of subsets giving\nthe chapter's cut",
           title=f"teacher {result.stable_teacher};\n"
                 f"{s.n_resamples} held-out subsets per size")
    plotting.legend_below(fig, [ax], ncols=4)
    return fig


def paper_partitions() -> pd.DataFrame:
    """DINOv2-B's published partitions (§3, Table 1; the authors' hierarchical bisection)."""
    parts = paper.DINOV2_B_PARTITIONS.values()
    return pd.DataFrame({"k": list(paper.DINOV2_B_PARTITIONS),
                         "paper (hierarchical)": [phases.format_partition(p) for p in parts],
                         "repeats n_j": [phases.partition_to_repeats(p) for p in parts]})

FIGURES = ()  # converting: each figure a Figure drawn from its table
