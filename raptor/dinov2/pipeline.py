"""The paper's DINOv2 run (§5, Table 1) as one resumable command: distil, save, probe.

    torchrun --nproc_per_node=N -m raptor.dinov2.pipeline \\
        --weights dinov2_vitb14_reg4.safetensors \\
        --imagenet /data/imagenet --k 3 --out runs/k3 [--ade20k DIR] [--nyuv2 DIR] \\
        [--linear-head FILE]

(``python -m raptor.dinov2.pipeline`` runs the same on one device or the CPU.) Steps: ``stage1`` and
``stage2``, :func:`raptor.train.distill` of :attr:`PipelineConfig.distill` (by default
:func:`paper_distill`: §3's recipe on DINOv2-B's partition for ``--k``, Table 1); then each
probe of §5 that has data (:mod:`raptor.probes`) on the student, ``--probe-teacher`` also on the
teacher. Each step's output is a checkpoint in ``--out`` (:mod:`raptor.dinov2.run_folder`), so a
rerun resumes; ``results.json`` (:mod:`raptor.dinov2.table1`) is rewritten after every step.
Every input is checked before any long work: the model and its arguments, the partition, the weights file,
every dataset root, the linear head's shape, a distillation already in ``--out``.

Its parts: :mod:`~raptor.dinov2.run_config` and :mod:`~raptor.dinov2.command_line` (the
configuration), :mod:`~raptor.dinov2.architecture` and :mod:`~raptor.dinov2.datasets` (the
teacher's and the data's checks), :mod:`~raptor.dinov2.plan` (the validated run and its step
keys), :mod:`~raptor.dinov2.steps` (distillation and probes), :mod:`~raptor.dinov2.cost`.

[ours] Engineering choices:

- The teacher is built with ``dynamic_img_size=True`` so one model serves distillation at
  ``--img-size`` and the dense probes at their own resolutions (518 px ADE20k, padded NYUv2).
- Training batches are decoded by a thread pool (:class:`raptor.data.ThreadedImages`).
- Under ``torchrun`` all ranks distil (DDP, :mod:`raptor.distributed`); rank 0 alone saves the
  student and runs the probes (single device) while the other ranks exit.
- A distillation done with another configuration is an error (a student is never discarded
  silently); a probe done with another configuration is run again. The teacher's weights (and
  ``--linear-head``) enter the keys by their digest, so other weights under the same file name
  are another configuration; a step file that fails its digest is redone, with a warning.
- The dense probes use bf16 autocast (``amp``) only on CUDA.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch.distributed as dist

from raptor.catalog import DatasetNotFoundError
from raptor.dinov2.command_line import parse_args
from raptor.dinov2.cost import cost
from raptor.dinov2.plan import RESULTS_FILE, plan_run, results, step_done, write_results
from raptor.dinov2.run_config import PipelineConfig, paper_distill
from raptor.dinov2.run_folder import STUDENT_FILE, step_path
from raptor.dinov2.steps import (dry_run, load_student, probe_summary, run_distillation, say,
                                 train_probe)
from raptor.dinov2.table1 import format_table
from raptor.model import Raptor
from raptor.storage.checkpoint import CheckpointError, save_tensors

# The run's API, beside the command line: its configuration, and what it costs.
__all__ = ["PipelineConfig", "cost", "main", "paper_distill", "run_pipeline"]


def run_pipeline(config: PipelineConfig | Sequence[str]) -> dict[str, Any]:
    """Run (or resume) the whole pipeline; returns ``results.json``
    (:func:`raptor.dinov2.plan.results`).

    ``config`` is a :class:`PipelineConfig` or command-line arguments. With ``dry_run`` it
    returns the plan instead and writes nothing. Under ``torchrun`` the ranks other than 0
    return ``{"rank": r}`` once the student is saved.
    """
    cfg = config if isinstance(config, PipelineConfig) else parse_args(list(config))
    joined = dist.is_initialized()
    try:
        plan = plan_run(cfg)
        if cfg.dry_run:
            return dry_run(plan)
        cfg.out.mkdir(parents=True, exist_ok=True)
        raptor: Raptor | None = None
        if step_done(plan, "stage2"):
            say(plan, f"distillation done ({STUDENT_FILE}): skipped")
        else:
            raptor = run_distillation(plan)
        if plan.rank != 0:
            return {"rank": plan.rank}
        if dist.is_initialized() and not joined:
            dist.destroy_process_group()  # the probes run on rank 0 alone
        for step in (s for s in plan.keys if s.startswith("probe:")):
            if step_done(plan, step):
                say(plan, f"{step}: done, skipped")
                continue
            if step_path(plan.cfg.out, step).exists():
                say(plan, f"{step}: done with another configuration, running again")
            _, who, probe = step.split(":")
            say(plan, f"{step}: training the probe")
            if who == "student" and raptor is None:
                raptor = load_student(plan)
            result = train_probe(plan, raptor if who == "student" else plan.teacher, probe)
            save_tensors(step_path(cfg.out, step), result.head.state_dict(), plan.keys[step],
                         probe_summary(result))
            write_results(plan)
        res = results(plan)
        if not (cfg.out / RESULTS_FILE).is_file():
            write_results(plan)
        say(plan, f"results in {cfg.out / RESULTS_FILE}\n{format_table(res)}")
        return res
    finally:
        if dist.is_initialized() and not joined:
            dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: 0 on success, 2 (with the message) on bad input."""
    try:
        run_pipeline(parse_args(argv))
    except (ValueError, CheckpointError, DatasetNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
