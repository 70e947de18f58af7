"""Chapter *Where do phases appear?*: block excess over a ladder of nulls across small teacher
families (§2, Fig. 1; C1).

A max-cut always returns a partition, and a similarity that only decays with depth gets even cuts
with a positive contrast. This chapter trains each teacher family (depth ``L``, training steps)
with each stochastic-depth rate and ≥ 3 seeds, and measures the max-cut's block excess over the
warped-decay null (:mod:`raptor.structure`; the stationary and random-walk rungs beside it) with a
bootstrap interval over images, to find where block structure exists at a CPU budget and how depth,
training length and ``p`` change it.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor.book import plotting
from raptor.book.chapters.phase_structure import c1_block_excess, excess_row
from raptor.book.claims import EXCESS_MIN, HOLDS, Claim
from raptor.book.experiment import walk
from raptor.book.profiles import PAPER_TEACHER, SMOKE_TEACHER
from raptor.book.spec import TeacherSpec, nested, require
from raptor.loop import resolve_device
from raptor.structure import PhaseExcess, warped_decay_null

NAME = "phase-search"
NOTEBOOK = "chapters/phase_search.ipynb"


@dataclass(frozen=True)
class Spec:
    """Teacher ``families`` (``[L, steps]`` pairs), each trained with every rate in ``p_values``
    and every seed in ``teacher_seeds``, plus an untrained teacher per depth and seed.

    The teacher block's ``L`` and ``steps`` name the family the other chapters use; it must be one
    of ``families``, and the tables mark it.
    """

    teacher: TeacherSpec = nested(TeacherSpec)
    families: tuple[tuple[int, int], ...] = ((8, 400), (12, 1500))
    p_values: tuple[float, ...] = (0.0, 0.3)
    teacher_seeds: tuple[int, ...] = (0, 1, 2)
    k_values: tuple[int, ...] = (2, 3, 4)
    n_images: int = 1000
    n_boot: int = 200

    def __post_init__(self) -> None:
        require(len(self.families) >= 1 and all(len(f) == 2 and f[0] >= 3 and f[1] >= 1
                                                 for f in self.families), "families",
                "a non-empty list of [L, steps] pairs with L ≥ 3 and steps ≥ 1", self.families)
        require((self.teacher.depth, self.teacher.steps) in self.families, "L",
                f"with steps one of families {[list(f) for f in self.families]}",
                (self.teacher.depth, self.teacher.steps))
        require(len(self.p_values) >= 1 and all(0 <= p < 1 for p in self.p_values), "p_values",
                "a non-empty list of rates in [0, 1)", self.p_values)
        require(len(set(self.teacher_seeds)) >= 1 and all(s >= 0 for s in self.teacher_seeds),
                "teacher_seeds", "a non-empty list of seeds ≥ 0", self.teacher_seeds)
        require(len(self.k_values) >= 1 and all(2 <= k < min(self.depths) for k in self.k_values),
                "k_values", f"a non-empty list of k in [2, {min(self.depths) - 1}]", self.k_values)
        require(self.n_images >= 8, "n_images", "≥ 8", self.n_images)
        require(self.n_boot >= 10, "n_boot", "≥ 10", self.n_boot)

    @property
    def depths(self) -> list[int]:
        return sorted({L for L, _ in self.families})

    def by_cost(self) -> list[tuple[int, int]]:
        """The families, cheapest first (by ``L × steps``)."""
        return sorted(self.families, key=lambda f: (f[0] * f[1], f))


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, families=((4, 30), (5, 30)),
                            teacher_seeds=(0, 1), k_values=(2,), n_images=64, n_boot=20)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, families=((12, 8_000),),
                            p_values=(0.0, 0.2, 0.4, 0.6), n_images=2000)


@dataclass
class Run:
    """One teacher: its family, rate (``None``: untrained), seed, accuracy and excess per k."""

    depth: int
    steps: int
    p: float | None
    seed: int
    accuracy: float
    excess: dict[int, PhaseExcess]


@dataclass
class Result:
    spec: Spec
    runs: list[Run]
    residual: dict[str, np.ndarray]  # S minus its warped-decay null, first seed, first rate


def compute(spec: Spec) -> Result:
    """Every teacher of the grid and the untrained controls: per-image phase matrices on
    ``n_images`` validation images, and each k's :class:`~raptor.structure.PhaseExcess`."""
    images = spec.teacher.eval_images(spec.n_images)
    device = resolve_device(spec.teacher.device)
    runs, residual = [], {}
    settings = [(L, steps, p, s) for L, steps in spec.by_cost() for p in spec.p_values
                for s in spec.teacher_seeds]
    settings += [(L, 0, None, s) for L in spec.depths for s in spec.teacher_seeds]
    for L, steps, p, seed in settings:
        family = dataclasses.replace(spec.teacher, depth=L, steps=steps)
        w = walk(family.get_teacher(p or 0.0, seed=seed, trained=p is not None), images,
                 excess=spec.k_values, n_boot=spec.n_boot, boot_seed=seed, device=device)
        runs.append(Run(L, steps, p, seed, w.accuracy, w.excess))
        if seed == spec.teacher_seeds[0] and p in (spec.p_values[0], None):
            S = w.per_image.mean(0)
            residual[_label(L, steps, p)] = S - warped_decay_null(S)
    return Result(spec, runs, residual)


def _label(L: int, steps: int, p: float | None) -> str:
    return f"L={L}, untrained" if p is None else f"L={L}, {steps} steps, p={p}"


def table(result: Result) -> pd.DataFrame:
    """One row per teacher and k: accuracy, cuts, excess with its interval, agreement, rank."""
    book = (result.spec.teacher.depth, result.spec.teacher.steps)
    return pd.DataFrame([{"L": r.depth, "steps": r.steps or "untrained", "p": r.p, "seed": r.seed,
                          "book's family": (r.depth, r.steps) == book, "val acc": r.accuracy,
                          "k": k, **excess_row(e)}
                         for r in result.runs for k, e in r.excess.items()])


def summary(result: Result) -> pd.DataFrame:
    """Per family, rate and k: the C1 verdict over its seeds and the range of the excess."""
    rows = []
    for (L, steps, p), group in itertools.groupby(
            result.runs, key=lambda r: (r.depth, r.steps, r.p)):
        group = list(group)
        for k in result.spec.k_values:
            c = c1_block_excess({f"seed {r.seed}": r.excess[k] for r in group}, k=k)
            rows.append({"L": L, "steps": steps or "untrained", "p": p, "k": k,
                         "seeds": len(group),
                         "excess (min)": min(r.excess[k].excess for r in group),
                         "excess (max)": max(r.excess[k].excess for r in group),
                         "verdict": c.verdict})
    return pd.DataFrame(rows)


def cheapest_family(result: Result, k: int) -> tuple[int, int] | None:
    """The cheapest trained family (``L × steps``) in which C1 holds for every rate and seed."""
    s = summary(result)
    trained = s[(s.k == k) & (s.steps != "untrained")]
    for L, steps in result.spec.by_cost():
        rows = trained[(trained.L == L) & (trained.steps == steps)]
        if len(rows) and (rows.verdict == HOLDS).all():
            return L, steps
    return None


def findings(result: Result, k: int) -> dict[str, str]:
    """What the search finds at ``k``, as text for the chapter's prose."""
    s = summary(result)
    at_k = s[s.k == k]
    trained, untrained = at_k[at_k.steps != "untrained"], at_k[at_k.steps == "untrained"]
    best = cheapest_family(result, k)
    median = {(r.depth, r.steps, r.p): [] for r in result.runs if r.p is not None}
    for r in result.runs:
        if r.p is not None:
            median[(r.depth, r.steps, r.p)].append(r.excess[k].excess)
    (L, steps, p), values = max(median.items(), key=lambda kv: float(np.median(kv[1])))
    passing = sorted(untrained[untrained.verdict == HOLDS].L)
    return {"holding": str(int((trained.verdict == HOLDS).sum())), "groups": str(len(trained)),
            "best": "none" if best is None else f"L = {best[0]}, {best[1]} steps",
            "largest": f"{float(np.median(values)):+.3f} (L = {L}, {steps} steps, p = {p})",
            "untrained": ", ".join(f"L = {d}" for d in passing) or "none"}


def excess_figure(result: Result) -> plt.Figure:
    """Block excess (cross-fitted, 95% bootstrap interval) of every teacher, one panel per k."""
    s = result.spec
    groups = [*s.by_cost(), *((L, 0) for L in s.depths)]
    rates = [*s.p_values, None]
    colours = dict(zip(rates, plt.get_cmap("tab10").colors))
    fig, axes = plotting.figure(len(s.k_values), 1, height=2.4 * len(s.k_values) + 0.6,
                                sharex=True)
    for ax, k in zip(axes[:, 0], s.k_values):
        for x, (L, steps) in enumerate(groups):
            runs = [r for r in result.runs if (r.depth, r.steps) == (L, steps)]
            for j, r in enumerate(runs):
                e = r.excess[k]
                # the interval drawn as it is: a cross-fitted estimate may lie outside its
                # bootstrap percentiles (few resamples at smoke), which errorbar refuses
                at = x + (j - (len(runs) - 1) / 2) * 0.6 / len(runs)
                ax.vlines(at, e.low, e.high, color=colours[r.p], lw=1)
                ax.plot(at, e.excess, "o", ms=4, color=colours[r.p])
        ax.axhline(0, color="0.4", lw=0.8)
        ax.axhline(EXCESS_MIN.value, color="0.2", lw=0.8, ls="--")
        ax.set_ylabel(f"excess, k = {k}")
    ax.set_xticks(range(len(groups)), [f"L={L}\n{steps} steps" if steps else f"L={L}\nuntrained"
                                       for L, steps in groups])
    ax.set_xlabel("teacher family (seeds side by side)")
    handles = [plt.Line2D([], [], marker="o", ls="", color=c,
                          label="untrained" if p is None else f"p = {p}")
               for p, c in colours.items()]
    handles.append(plt.Line2D([], [], color="0.2", ls="--", label="C1 threshold"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    return fig


def residual_figure(result: Result) -> plt.Figure:
    """``S`` minus its warped-decay null per family (first seed, first rate): what is left once
    the smooth decay with depth is removed, the residual C1 is judged on. Blocks show as red
    squares on the diagonal."""
    mats = result.residual
    ncols = min(len(mats), 3)
    nrows = -(-len(mats) // ncols)
    fig, axes = plotting.figure(nrows, ncols, height=nrows * 2.6 + 0.3)
    bound = max(float(np.abs(m).max()) for m in mats.values())
    for ax, (title, R) in zip(axes.flat, mats.items()):
        image = ax.imshow(R, cmap="RdBu_r", vmin=-bound, vmax=bound)
        plotting.layer_ticks(ax, len(R), first_layer=1)
        ax.set_title(title)
    for ax in axes.flat[len(mats):]:
        ax.set_axis_off()
    fig.colorbar(image, ax=axes, label="S − warped-decay null")
    return fig


def claims(result: Result) -> list[Claim]:
    """The search tests no claim of its own: its per-family C1 verdicts are :func:`summary`;
    C1 itself is judged in the chapter *Emergent phase structure*."""
    return []
