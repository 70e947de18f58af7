"""Every forward pass of a chapter runs on its spec's ``device`` (issue #11).

CUDA is pretended available, so ``"auto"`` resolves to ``"cuda"``, which this machine cannot run;
the science functions' own defaults are set to ``"auto"`` too. A chapter computed with
``device="cpu"`` then passes only if every model it runs is given the spec's device.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from raptor import metrics, probes
from raptor.book.chapters import chapter, names, science
from raptor.book.experiment import batched, trajectories_of
from raptor.book.spec import Machine
from raptor.loop import resolve_device

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")

DEFAULTED = (metrics.evaluate_student, metrics.head_accuracy, probes.probe_features)


def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA reported available (it is not), and ``"auto"`` the default of every forward path."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # the optimizer's CUDA-graph check asks the pretended accelerator for its stream: not a
    # forward path, and not the model's device
    monkeypatch.setattr(torch.optim.Optimizer, "_accelerator_graph_capture_health_check",
                        lambda self: None)
    for f in DEFAULTED:
        monkeypatch.setitem(inspect.unwrap(f).__kwdefaults__, "device", "auto")


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in names()
                                  if hasattr(chapter(name).Spec(), "teacher")])
def test_chapter_runs_on_the_spec_device(name: str, smoke_result: Callable[[str], Any],
                                         smoke_cache: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    mod = science(name)
    reference = smoke_result(name)  # "auto" on this machine: the CPU, models in the smoke cache
    spec = dataclasses.replace(mod.SMOKE, machine=Machine(device="cpu"))
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    fake_cuda(monkeypatch)
    assert mod.claims.claims(mod.compute.compute(spec)) == mod.claims.claims(reference)


@pytest.mark.parametrize("run", [
    lambda m, x, y: trajectories_of(m, x, y),
    lambda m, x, y: metrics.evaluate_student(m, m, batched(x, y)),
    lambda m, x, y: metrics.head_accuracy(m, batched(x, y)),
    lambda m, x, y: probes.probe_features(m, batched(x, y)),
], ids=["trajectories_of", "evaluate_student", "head_accuracy", "probe_features"])
def test_negative_control_auto_tries_cuda(run: Callable, tiny_teacher: Callable[..., Any],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: under the same patch a forward path left at ``"auto"`` tries
    CUDA, and leaves the model where it was."""
    model, x, y = tiny_teacher(), torch.randn(4, 1, 16, 16), torch.arange(4)
    fake_cuda(monkeypatch)
    assert resolve_device("auto") == "cuda"
    with pytest.raises((AssertionError, RuntimeError)):
        run(model, x, y)
    assert next(model.parameters()).device.type == "cpu"
