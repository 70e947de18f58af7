"""One Raptor training step vs one step of the untied teacher of the same depth (runtime parity).

Appendix E's runtime parity says applying a block ``n_j`` times costs as much as ``n_j`` distinct
blocks. This benchmark checks it for training: a stage-2 step of a Raptor (k = 2: ``7|5``,
k = 3: ``7|3|2``, Table 1) against a step of an untied copy of the teacher's 12 blocks
trained with the same autoregressive loss on the same batch (forward, loss, backward, gradient
clipping, AdamW; the teacher trajectory is precomputed so only the trained model is timed).
Both are timed alternately in the same process (warm-up, repeats, median). Memory: the
activations autograd saves for backward in one step, and the model state (weights, gradients,
AdamW moments). It also reports stage-1 (λ = 0.5: TF and AR both computed) and stage-2
throughput of the full engine step (teacher trajectory online) in images/s.

CPU configuration: teacher ``TeacherConfig(depth=12, embed_dim=64, num_heads=4, patch_size=7,
img_size=28, in_chans=1, num_classes=10)``, batch 128.

    .venv/bin/python bench/bench_train_step.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from raptor.losses import BlockObjective, Objective, token_mse
from raptor.model import Raptor
from raptor.paper import DINOV2_B_PARTITIONS, RECIPE
from raptor.teachers import TeacherConfig, build_teacher
from raptor.trajectories import TokenGroups, trajectory

TEACHER = TeacherConfig(depth=12, embed_dim=64, num_heads=4, patch_size=7, img_size=28,
                        in_chans=1, num_classes=10)
BATCH = 128
REPEATS = {k: tuple(b - a for a, b in DINOV2_B_PARTITIONS[k]) for k in (2, 3)}  # (7, 5), (7, 3, 2)
WEIGHTS = RECIPE.stage2_weights


Loss = Callable[[torch.Tensor], torch.Tensor]


def setup(k: int | None, depth_scaling: bool = True
          ) -> tuple[nn.Module, Loss, Callable[[torch.Tensor], None], torch.Tensor]:
    """The trained model (a Raptor for ``k``, the untied blocks for ``None``), its loss, its
    training step, and a batch's teacher trajectory."""
    torch.manual_seed(0)
    teacher = build_teacher(TEACHER).eval()
    images = torch.randn(BATCH, 1, 28, 28)
    with torch.no_grad():
        traj = trajectory(teacher, images)
    groups = TokenGroups.from_model(teacher)
    if k is None:
        model: nn.Module = copy.deepcopy(teacher.blocks).requires_grad_(True).train()

        def loss_fn(t: torch.Tensor) -> torch.Tensor:
            states, x = [], t[:, 0]
            for block in model:
                x = block(x)
                states.append(x)
            return token_mse(torch.stack(states, 1), t[:, 1:], groups, WEIGHTS)
    else:
        model = Raptor(teacher, REPEATS[k], init="random", depth_scaling=depth_scaling).train()
        objective = Objective(model, groups, WEIGHTS)

        def loss_fn(t: torch.Tensor) -> torch.Tensor:
            return objective(t)[0]
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=RECIPE.lr, weight_decay=RECIPE.weight_decay)

    def step(t: torch.Tensor) -> None:
        loss = loss_fn(t)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    return model, loss_fn, step, traj


def engine_step(k: int, stage: int) -> tuple[Callable[[], None], torch.Tensor]:
    """A full engine step: teacher trajectory online, then the stage's loss and update."""
    torch.manual_seed(0)
    teacher = build_teacher(TEACHER).eval()
    raptor = Raptor(teacher, REPEATS[k], init="random").train()
    groups = TokenGroups.from_model(teacher)
    blocks_loss = [BlockObjective(b, seg, groups, RECIPE.stage1_weights if seg[1] == raptor.depth
                                  else None) for b, seg in zip(raptor.blocks, raptor.partition)]
    chain = Objective(raptor, groups, WEIGHTS)

    def objective(traj: torch.Tensor, stage: int, lam: float) -> tuple[torch.Tensor, None]:
        """Every block's stage-1 step at once (each trains alone; the work is their sum)."""
        if stage == 2:
            return chain(traj)[0], None
        return sum(o(traj, lam)[0] for o in blocks_loss), None
    params = raptor.raptor_parameters()
    blocks = [list(b.parameters()) for b in raptor.blocks] if stage == 1 else [params]
    optimizer = torch.optim.AdamW(params, lr=RECIPE.lr, weight_decay=RECIPE.weight_decay)
    images = torch.randn(BATCH, 1, 28, 28)

    def step() -> None:
        with torch.no_grad():
            traj = trajectory(teacher, images)
        loss, _ = objective(traj, stage, 0.5 if stage == 1 else 0.0)  # λ=0.5: TF and AR both run
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for group in blocks:
            nn.utils.clip_grad_norm_(group, 1.0)
        optimizer.step()

    return step, images


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def memory_mib(model: nn.Module, loss_fn: Loss, traj: torch.Tensor) -> tuple[float, float]:
    """``(activations saved for backward, weights + grads + AdamW moments)`` in MiB.

    Activations are the distinct storages autograd saves during one forward (parameters and
    the teacher trajectory excluded): what a training step holds at its peak besides the
    model state.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    skip.add(traj.untyped_storage().data_ptr())
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn(traj)
    state = 4 * sum(p.numel() * p.element_size() for p in params)
    return sum(saved.values()) / 2**20, state / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--no-depth-scaling", action="store_true",
                        help="time Raptors without the depth-scaling MLP")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warmup, repeats = (1, 5) if args.quick else (3, 15)
    print(f"teacher {TEACHER}\nbatch {BATCH}, threads {args.threads}, warm-up {warmup}, "
          f"repeats {repeats} (median), depth scaling {not args.no_depth_scaling}\n")
    untied, untied_loss, untied_step, traj = setup(None)
    base_mem = memory_mib(untied, untied_loss, traj)
    print(f"{'model':<22}{'step ms':>9}{'untied ms':>11}{'ratio':>7}"
          f"   MiB activations / weights+grads+AdamW (untied)")
    for _ in range(warmup):
        untied_step(traj)
    for k in REPEATS:
        raptor, raptor_loss, raptor_step, _ = setup(k, not args.no_depth_scaling)
        for _ in range(warmup):
            raptor_step(traj)
        times: dict[str, list[float]] = {"raptor": [], "untied": []}
        for _ in range(repeats):  # interleaved, so load changes hit both alike
            times["raptor"].append(timed(lambda: raptor_step(traj)))
            times["untied"].append(timed(lambda: untied_step(traj)))
        r, u = (statistics.median(times[n]) * 1e3 for n in ("raptor", "untied"))
        act, state = memory_mib(raptor, raptor_loss, traj)
        print(f"{f'Raptor k={k} {REPEATS[k]}':<22}{r:>9.1f}{u:>11.1f}{r / u:>7.3f}"
              f"   {act:.1f} / {state:.2f}  ({base_mem[0]:.1f} / {base_mem[1]:.2f})")
    print("\nengine throughput (teacher online), k=3:")
    for stage in (1, 2):
        step, images = engine_step(3, stage)
        for _ in range(warmup):
            step()
        med = statistics.median(timed(step) for _ in range(repeats))
        print(f"  stage {stage}: {len(images) / med:8.0f} images/s ({med * 1e3:.1f} ms/step)")


if __name__ == "__main__":
    main()
