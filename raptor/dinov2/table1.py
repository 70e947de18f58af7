"""A pipeline run's Table 1 (§5): its probe results beside the paper's, as ``results.json``.

Table-1 units: ImageNet top-1 and ADE20k mIoU in %, NYUv2 RMSE in metres. The paper's rows
(:data:`raptor.paper.TABLE1`) are added for a DINOv2-B teacher: its own row always, a Raptor
row when the run used the published partition for its ``k``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raptor.model import repeats_from_partition
from raptor.paper import DINOV2_B, DINOV2_B_DEPTH, DINOV2_B_PARTITIONS, TABLE1

#: Table 1 columns: probe → (column, factor from the probe's metric to the table's unit).
TABLE1_COLUMNS = {"imagenet": ("IN-1k", 100.0), "ade20k": ("ADE20k", 100.0),
                  "nyuv2": ("NYUv2", 1.0)}


def distill_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """Timing, sizes and the final losses (mean of the last 100 steps; stage 1's summed over its
    blocks) of a distillation's record (:func:`raptor.train.distill`)."""
    def final(curves: Sequence[Mapping[str, Any]]) -> float | None:
        means = [sum(c["loss"][-100:]) / len(c["loss"][-100:]) for c in curves if c["loss"]]
        return sum(means) if means else None
    keep = ("seconds", "parameters", "flops_per_image", "teacher_flops_per_image", "world_size")
    return {**{k: record[k] for k in keep if k in record},
            "stage1_final_loss": final(record["stage1"]["blocks"]),
            "stage2_final_loss": final([record["stage2"]])}


def table1_results(model: str, repeats: Sequence[int], done: Mapping[str, Mapping[str, Any]],
                   student_file: str) -> dict[str, Any]:
    """``results.json`` of a run of teacher ``model`` distilled with ``repeats``.

    ``done`` maps each finished step to its record: ``stage2`` to the distillation's,
    ``probe:<who>:<probe>`` (``who`` = student or teacher) to the probe's summary (``best`` in
    the probe's metric, its curve). Returns Table-1 numbers of the finished probes, each probe's
    summary, the distillation's summary and, for DINOv2-B, the paper's rows and this run's
    fraction of the paper's DINOv2-B numbers.
    """
    k = len(repeats)
    label = {"student": f"Raptor k={k} (this run)", "teacher": f"{model} (this run)"}
    table: dict[str, dict[str, float]] = {}
    probes: dict[str, dict[str, Any]] = {}
    for step, record in done.items():
        if step.startswith("probe:"):
            _, who, probe = step.split(":")
            column, factor = TABLE1_COLUMNS[probe]
            table.setdefault(label[who], {})[column] = record["best"] * factor
            probes.setdefault(who, {})[probe] = dict(record)
    out: dict[str, Any] = {
        "model": model, "k": k, "repeats": list(repeats), "table1": table, "probes": probes,
        "distill": distill_summary(done["stage2"]) if "stage2" in done else None,
        "student_file": student_file if "stage2" in done else None, "steps_done": sorted(done)}
    if model.startswith(DINOV2_B.split(".")[0]):
        paper = {"DINOv2 ViT-B": TABLE1["DINOv2 ViT-B"]}
        if k in DINOV2_B_PARTITIONS and tuple(repeats) == repeats_from_partition(
                DINOV2_B_PARTITIONS[k], DINOV2_B_DEPTH):
            paper[f"Raptor k={k}"] = TABLE1[f"Raptor k={k}"]
        out["paper_table1"] = {row: {c: {"mean": m, "sd": s} for c, (m, s) in cols.items()}
                               for row, cols in paper.items()}
        ours = table.get(label["student"], {})
        out["fraction_of_paper_dinov2"] = {c: v / paper["DINOv2 ViT-B"][c][0]
                                           for c, v in ours.items()}
    return out


def format_table(res: Mapping[str, Any]) -> str:
    """Table 1 as text: this run's rows, then the paper's."""
    columns = [c for c, _ in TABLE1_COLUMNS.values()]
    lines = [f"{'model':<50}" + "".join(f"{c:>16}" for c in columns)]
    rows = [(name, {c: f"{v:.4g}" for c, v in cols.items()})
            for name, cols in res["table1"].items()]
    rows += [(f"{name} (paper)", {c: f"{v['mean']}" + (f" ± {v['sd']}" if v["sd"] else "")
                                  for c, v in cols.items()})
             for name, cols in res.get("paper_table1", {}).items()]
    for name, cols in rows:
        lines.append(f"{name:<50}" + "".join(f"{cols.get(c, '—'):>16}" for c in columns))
    return "\n".join(lines) + "\n(IN-1k top-1 %, ADE20k mIoU %, NYUv2 RMSE m; paper: 3 seeds)"
