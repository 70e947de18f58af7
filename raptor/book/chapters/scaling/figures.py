"""The figures and tables of chapter *Scaling Raptor to foundation models*, from its
:class:`~raptor.book.chapters.scaling.compute.Result` and the paper's Tables 1–2; its figure drawn
from its table (:mod:`raptor.book.figure_table`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.chapters.scaling.compute import Result
from raptor.book.figure_table import Figure

#: Table 1's columns: the paper's metric, our heading and its decimals.
_COLUMNS = {"IN-1k": ("IN-1k top-1", 1), "ADE20k": ("ADE20k mIoU", 1), "NYUv2": ("NYUv2 RMSE", 3)}


def table1() -> pd.DataFrame:
    """The paper's Table 1 (mean ± σ over seeds where it gives one)."""
    def cell(score: paper.Score, decimals: int) -> str:
        mean, sd = score
        return f"{mean:.{decimals}f}" + ("" if sd is None else f" ± {sd:.{decimals}f}")

    return pd.DataFrame({name: [cell(row[c], d) for row in paper.TABLE1.values()]
                         for c, (name, d) in _COLUMNS.items()}, index=list(paper.TABLE1))


def run_table(result: Result) -> pd.DataFrame:
    """This run's Table 1 per seed: partition, head and probe accuracy of each model."""
    rows = []
    for run in result.runs:
        models = {f"Raptor k={k}": (phases.format_partition(run.partitions[k]), run.head_acc[k], a)
                  for k, a in run.probe_acc.items()}
        models[f"teacher (L={result.spec.teacher.depth})"] = ("—", run.teacher_acc,
                                                             run.teacher_probe)
        rows += [(run.seed, name, partition, head, probe, 100 * probe / run.teacher_probe)
                 for name, (partition, head, probe) in models.items()]
    columns = ["seed", "model", "partition", "head acc", "probe acc", "probe, % of teacher"]
    return pd.DataFrame(rows, columns=columns).set_index(["seed", "model"])


def ladder_table(result: Result) -> pd.DataFrame:
    """Table 2: the paper's rungs beside this run's, one column per seed, in %."""
    seeds = {f"seed {run.seed}": [100 * c.mean() for c in run.ladder_correct.values()]
             for run in result.runs}
    return pd.DataFrame({"paper (IN-1k)": list(paper.TABLE2.values()), **seeds},
                        index=list(result.runs[0].ladder_correct))


PROBE, TEACHER_PROBE = "Raptor probe accuracy (%)", "teacher probe accuracy (%)"
COSINE = "cosine similarity to the teacher"


def share_cosine_table(result: Result) -> pd.DataFrame:
    """One row a seed's Raptor k: its probe accuracy and its teacher's (%, each its own linear
    probe); then one row a layer of a token group of the first seed's Raptor k: its cosine
    similarity to the teacher."""
    first = result.runs[0]
    rows = [{"seed": run.seed, "k": k, PROBE: 100 * acc, TEACHER_PROBE: 100 * run.teacher_probe}
            for run in result.runs for k, acc in run.probe_acc.items()]
    rows += [{"seed": first.seed, "k": k, "group": g, "layer": layer, COSINE: float(y)}
             for k in first.probe_acc for g in ("cls", "patches")
             for layer, y in enumerate(first.cosine[k][g])]
    columns = ["seed", "k", PROBE, TEACHER_PROBE, "group", "layer", COSINE]
    return pd.DataFrame(rows, columns=columns).astype({"layer": "Int64"})


def draw_share_cosine(table: pd.DataFrame) -> plt.Figure:
    """(A) what C13 judges: each seed's Raptor probe accuracy per k (points: no zero baseline),
    its teacher's own probe dashed; (B) cosine to the teacher through depth, first seed (Fig. 14).
    C12's shares of DINOv2-B on ImageNet are another quantity and stay off these axes."""
    accuracy, cosine = table.dropna(subset=[PROBE]), table.dropna(subset=[COSINE])
    fig, ((ax_a, ax_b),) = plotting.figure(1, 2, width=plotting.BOX_WIDTH, height=3.4)
    seeds = accuracy.groupby("seed", sort=False)
    palette = plt.get_cmap("Greys")(np.linspace(0.95, 0.5, len(seeds)))  # (B) has colour
    for colour, (seed, rows) in zip(palette, seeds):
        ax_a.plot(rows["k"], rows[PROBE], marker="o", ms=4, color=colour,
                  label=f"seed {seed}: Raptor (own probe)")
        ax_a.axhline(rows[TEACHER_PROBE].iloc[0], color=colour, ls="--", lw=0.8,
                     label=f"_seed {seed}: its teacher (own probe)")
    ax_a.plot([], [], color="grey", ls="--", lw=0.8, label="its teacher (own probe)")
    ax_a.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax_a.set(xlabel="number of phases k", ylabel="probe accuracy (%)",
             title="(A) accuracy by k\n(C13; Table 1)")
    plotting.layer_curves({f"k={k} {g}": rows[COSINE].to_numpy(float)
                           for (k, g), rows in cosine.groupby(["k", "group"], sort=False)},
                          ylabel="cosine similarity to the teacher", ax=ax_b,
                          title="(B) cosine through depth\n(Fig. 14)",
                          first_layer=int(cosine["layer"].min()))
    plotting.legend_below(fig, [ax_a, ax_b], ncols=2)
    return fig


SHARE_COSINE = Figure("scaling_share_cosine", share_cosine_table, draw_share_cosine, "Fig. 14")
FIGURES = (SHARE_COSINE,)
