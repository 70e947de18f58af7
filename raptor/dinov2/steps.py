"""A pipeline run's long work: the distillation (stages 1 and 2) and each probe, on a
:class:`~raptor.dinov2.plan.Plan`; or, for a dry run, what it would do."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset

from raptor.dinov2.cost import cost
from raptor.dinov2.dense_probes import train_depth_probe, train_segmentation_probe
from raptor.dinov2.plan import Plan, probe_config, step_done, write_results
from raptor.dinov2.run_folder import STUDENT_FILE, WORK_FILE, jsonable, saved
from raptor.distributed import cpu_share
from raptor.model import Raptor, flops_per_image
from raptor.probes import ProbeResult, train_linear_probe
from raptor.storage.checkpoint import load_tensors, save_tensors
from raptor.train import build_student, distill


def say(plan: Plan, message: str) -> None:
    """Print ``message`` on rank 0 unless the run is quiet."""
    if plan.cfg.progress and plan.rank == 0:
        print(f"[raptor.dinov2.pipeline] {message}", flush=True)


def run_distillation(plan: Plan) -> Raptor:
    """Stages 1 and 2 (resuming from the work file), then the student saved on rank 0."""
    out = plan.cfg.out
    work = saved(out / WORK_FILE)
    say(plan, "distilling: " + (f"resuming at stage {work[1]['stage']}, step "
                                f"{work[1]['step']}" if work else "from the start")
        + f" (repeats {plan.cfg.distill.repeats}, world size {plan.world})")
    try:
        raptor, record = distill(plan.teacher, plan.distill_set, plan.cfg.distill,
                                 work_path=out / WORK_FILE,
                                 checkpoint_every=plan.cfg.checkpoint_every,
                                 progress=plan.cfg.progress)
    finally:
        if plan.rank == 0:
            write_results(plan)
    if plan.rank == 0:
        save_tensors(out / STUDENT_FILE, raptor.blocks.state_dict(), plan.keys["stage2"], record)
        (out / WORK_FILE).unlink(missing_ok=True)
        write_results(plan)
        say(plan, f"student saved to {out / STUDENT_FILE}")
    if plan.world > 1:
        dist.barrier()
    return raptor


def load_student(plan: Plan) -> Raptor:
    """The saved student, checked against the run's key."""
    tensors, _ = load_tensors(plan.cfg.out / STUDENT_FILE, plan.keys["stage2"])
    raptor = build_student(plan.teacher, plan.cfg.distill)
    raptor.blocks.load_state_dict(tensors)
    return raptor.eval()


def train_probe(plan: Plan, model: nn.Module, probe: str) -> ProbeResult:
    """Probe ``probe`` (imagenet, ade20k or nyuv2) trained on the frozen ``model``."""
    cfg = plan.cfg
    device = cfg.distill.device  # under torchrun: this rank's GPU, made current in init_distributed
    pcfg = probe_config(cfg, probe, device)
    workers = cpu_share(8) if cfg.workers is None else cfg.workers
    train, val = plan.probe_data[probe]

    def loader(ds: Dataset, shuffle: bool) -> DataLoader:
        return DataLoader(ds, batch_size=pcfg.batch_size, shuffle=shuffle, num_workers=workers,
                          generator=torch.Generator().manual_seed(cfg.distill.seed) if shuffle
                          else None, pin_memory=device.startswith("cuda"),
                          persistent_workers=workers > 0)

    train_loader, val_loader = loader(train, True), loader(val, False)
    if probe == "imagenet":
        return train_linear_probe(model, train_loader, val_loader, pcfg,
                                  num_classes=plan.num_classes, init_head=cfg.linear_head,
                                  device=device)
    run: Callable[..., ProbeResult] = (train_segmentation_probe if probe == "ade20k"
                                       else train_depth_probe)
    return run(model, train_loader, val_loader, pcfg, device=device)


def probe_summary(result: ProbeResult) -> dict[str, Any]:
    """A probe's record (checkpoint and ``results.json``): its metric's best, last and curve."""
    return {"metric": result.metric, "higher_is_better": result.higher_is_better,
            "best": result.best, "best_epoch": result.best_epoch, "last": result.last,
            "history": list(result.history)}


def dry_run(plan: Plan) -> dict[str, Any]:
    """What the run would do (each step's state, the data's sizes, the cost), printed; nothing
    trained or written."""
    steps = {step: "to do" if not step_done(plan, step) else "done" for step in plan.keys}
    raptor = build_student(plan.teacher, plan.cfg.distill)
    plan_out = {"dry_run": True, "steps": steps, "repeats": list(plan.cfg.distill.repeats),
                "distill": jsonable(dataclasses.asdict(plan.cfg.distill)),
                "distill_images": len(plan.distill_set),
                "probes": {p: [len(t), len(v)] for p, (t, v) in plan.probe_data.items()},
                "flops_per_image": flops_per_image(raptor),
                "teacher_flops_per_image": flops_per_image(plan.teacher),
                "cost": cost(plan.cfg.distill, plan.cfg.model, plan.cfg.img_size).iloc[:, 0]
                .to_dict()}
    say(plan, "dry run, nothing trained:\n" + json.dumps(plan_out, indent=1))
    return plan_out
