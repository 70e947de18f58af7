"""The figures of chapter *Raptor*, each drawn from its table
(:mod:`raptor.book.figure_table`), made from the chapter's
:class:`~raptor.book.chapters.distillation.compute.Result`."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from raptor.book import plotting
from raptor.book.chapters.distillation.claims import MIN_COSINE
from raptor.book.chapters.distillation.compute import GROUPS, Result
from raptor.book.figure_table import Figure
from raptor.train import stage_curves

SMOOTH = 10  # steps: the running mean a loss curve shows
METRICS = {"r2": "R²", "cosine": "cosine similarity"}


def training_table(result: Result) -> pd.DataFrame:
    """The first seed's Raptors' training (:func:`raptor.train.distill`'s records): one row a
    point of a curve (``label`` "k=3", ``stage`` 1 or 2, ``block`` of stage 1, empty for stage 2
    or a stage 1 trained jointly, ``step``, ``quantity``, ``value``): the loss as a running mean
    over :data:`SMOOTH` steps (fewer on a shorter curve), the held-out loss with its ``plateau``
    and ``stop`` on it, and the first stage-1 curve's teacher-forcing weight λ."""
    rows: list[dict[str, Any]] = []
    for k, record in result.runs[0].records.items():
        label, apart = f"k={k}", "blocks" in record["stage1"]
        for stage in (1, 2):
            for j, curve in enumerate(stage_curves(record, f"stage{stage}")):
                loss = np.asarray(curve["loss"], dtype=float)
                if not loss.size:
                    continue
                block = j + 1 if stage == 1 and apart else None
                at = {"label": label, "stage": stage, "block": block}
                width = min(SMOOTH, loss.size)
                mean = np.convolve(loss, np.ones(width) / width, mode="valid")
                rows += [{**at, "step": width + i, "quantity":
                          f"loss (running mean over {width} steps)", "value": float(y)}
                         for i, y in enumerate(mean)]
                val = {v["step"]: v["loss"] for v in curve.get("val", [])}
                rows += [{**at, "step": s, "quantity": "held-out loss", "value": float(y)}
                         for s, y in val.items()]
                rows += [{**at, "step": s, "quantity": q, "value": float(val[s])}
                         for q, s in (("plateau", curve.get("plateau")),
                                      ("stop", curve.get("stopped"))) if s in val]
        first = stage_curves(record, "stage1")[0]
        rows += [{"label": label, "stage": 1, "block": 1 if apart else None, "step": i,
                  "quantity": "λ", "value": float(y)}
                 for i, y in enumerate(first["lambda"])]
    return pd.DataFrame(rows, columns=["label", "stage", "block", "step", "quantity", "value"]
                        ).astype({"block": float})


def draw_training(table: pd.DataFrame) -> plt.Figure:
    """Raptor's two training stages (App. A): each stage-1 block's loss with the teacher-forcing
    weight λ, then the stage-2 loss, on a log scale; under the convergence criterion each curve's
    held-out loss (dashed), on which the rule reads its plateau (○), and its stop (×)."""
    fig, (axes,) = plotting.figure(1, 2, height=3.5)
    ax1, ax2 = axes
    lam_ax = ax1.twinx()
    labels = list(dict.fromkeys(table["label"]))
    for color, label in zip(sns.color_palette("colorblind", len(labels)), labels):
        rows = table[table["label"] == label]
        named: set[int] = set()
        for (stage, _), curve in rows.groupby(["stage", "block"], sort=False, dropna=False):
            ax = ax1 if stage == 1 else ax2
            loss = curve[curve["quantity"].str.startswith("loss")]
            if loss.empty:
                continue
            ax.plot(loss["step"], loss["value"], color=color,
                    label=None if stage in named else label)
            named.add(stage)
            val = curve[curve["quantity"] == "held-out loss"]
            if not val.empty:
                ax.plot(val["step"], val["value"], color=color, ls="--", lw=0.8)
            for quantity, marker in (("plateau", "o"), ("stop", "x")):
                marks = curve[curve["quantity"] == quantity]
                for step, value in zip(marks["step"], marks["value"]):
                    ax.plot(step, value, marker=marker, color=color, ms=6,
                            mfc="none" if marker == "o" else color)
        lam = rows[rows["quantity"] == "λ"]
        lam_ax.plot(lam["step"], lam["value"], color=color, ls=":", lw=1)
    lam_ax.plot([], [], color="grey", ls=":", label="λ (right axis)")
    if (table["quantity"] == "plateau").any():
        lam_ax.plot([], [], color="grey", ls="--", lw=0.8, label="held-out loss")
        lam_ax.plot([], [], "o", color="grey", mfc="none", label="plateau")
        lam_ax.plot([], [], "x", color="grey", label="stop")
    lam_ax.set_ylabel("teacher-forcing weight λ")
    lam_ax.set_ylim(-0.05, 1.05)
    ax1.set(title="stage 1: each block, TF → AR", xlabel="step", ylabel="loss", yscale="log")
    ax2.set(title="stage 2: end to end, AR", xlabel="step", ylabel="loss", yscale="log")
    plotting.legend_below(fig, [ax1, lam_ax], ncols=4)
    return fig


def layerwise_table(result: Result) -> pd.DataFrame:
    """R² and cosine similarity to the teacher through depth: one row a metric, k, token group
    and layer, with the mean over seeds and the lowest and highest seed's value."""
    rows = []
    for metric, quantity in METRICS.items():
        for k in result.spec.k_values:
            for g in GROUPS:
                c = np.array([run.evals[k][metric][g] for run in result.runs])
                rows += [{"quantity": quantity, "k": k, "group": g, "layer": layer,
                          "mean over seeds": float(mean), "lowest seed": float(low),
                          "highest seed": float(high)}
                         for layer, (mean, low, high) in enumerate(zip(
                             c.mean(axis=0), c.min(axis=0), c.max(axis=0)))]
    return pd.DataFrame(rows)


def draw_layerwise(table: pd.DataFrame) -> plt.Figure:
    """R² (as in Fig. 4B) and cosine similarity (Fig. 14) to the teacher through depth: the mean
    over seeds, shaded from the lowest seed to the highest."""
    fig, axes = plotting.figure(1, 2, width=plotting.BOX_WIDTH, height=3.4)
    for ax, letter, (quantity, rows) in zip(axes[0], "AB",
                                             table.groupby("quantity", sort=False)):
        curves = {f"k={k} {g}": c for (k, g), c in rows.groupby(["k", "group"], sort=False)}
        plotting.layer_curves({n: c["mean over seeds"].to_numpy(float)
                               for n, c in curves.items()},
                              ylabel=f"{quantity} to the teacher", ax=ax,
                              title=f"({letter}) {quantity}\nthrough depth")
        for line, (n, c) in zip(ax.lines, curves.items()):
            ax.fill_between(c["layer"].to_numpy(), c["lowest seed"].to_numpy(float),
                            c["highest seed"].to_numpy(float), color=line.get_color(),
                            alpha=0.15, lw=0, label=f"_{n} seed range")
    axes[0][1].axhline(MIN_COSINE.value, color="0.4", ls=":", lw=1,
                       label=f"C15 threshold {MIN_COSINE.value:g} [ours]")
    plotting.legend_below(fig, axes, ncols=2)
    return fig


TRAINING = Figure("distillation_training", training_table, draw_training)
LAYERWISE = Figure("distillation_layerwise", layerwise_table, draw_layerwise,
                   ("Fig. 4B", "Fig. 14"))
FIGURES = (TRAINING, LAYERWISE)
