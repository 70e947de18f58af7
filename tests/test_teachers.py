"""Tests for raptor.teachers: configs, the stochastic-depth block, training, cache and loading."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from timm.models.vision_transformer import Block
from torch.utils.data import Dataset, TensorDataset

import raptor.data
from raptor import teachers
from raptor.storage.cache import entry_path
from raptor.storage.checkpoint import CheckpointError
from raptor.teachers import (TeacherBlock, TeacherConfig, TrainConfig, build_teacher, evaluate,
                             get_teacher, load_pretrained, parameter_count, teacher_key,
                             teacher_snapshot, train_classifier)

TINY = dict(depth=3, embed_dim=32, num_heads=2, patch_size=4, img_size=16, in_chans=1,
            num_classes=3)
CFG = TeacherConfig(**TINY)
TRAIN = TrainConfig(steps=7, batch_size=16, warmup_steps=2, eval_every=3, snapshot_steps=(1, 5))


def toy_data(n: int = 48, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 1, 16, 16, generator=g), torch.randint(0, 3, (n,),
                                                                              generator=g))


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# --- configurations ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["depth", "embed_dim", "num_heads", "patch_size", "img_size",
                                  "in_chans", "num_classes"])
@pytest.mark.parametrize("bad", [0, -2, 2.0])
def test_teacher_config_positive_ints(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=name):
        TeacherConfig(**{**TINY, name: bad})


@pytest.mark.parametrize("changes, names", [
    ({"embed_dim": 30, "num_heads": 4}, ("embed_dim=30", "num_heads=4")),
    ({"img_size": 18}, ("img_size=18", "patch_size=4")),
    ({"p": 1.0}, ("p",)), ({"p": -0.1}, ("p",)),
    ({"reg_tokens": -1}, ("reg_tokens",)),
    ({"layerscale": 0.0}, ("layerscale",)),
])
def test_teacher_config_errors_name_the_parameter(changes: dict, names: tuple[str, ...]) -> None:
    with pytest.raises(ValueError) as info:
        TeacherConfig(**{**TINY, **changes})
    for name in names:
        assert name in str(info.value)


@pytest.mark.parametrize("changes, name", [
    ({"steps": 0}, "steps"), ({"batch_size": -1}, "batch_size"), ({"eval_every": 0}, "eval_every"),
    ({"steps": 1.5}, "steps"), ({"lr": 0.0}, "lr"), ({"weight_decay": -1.0}, "weight_decay"),
    ({"snapshot_steps": (0,)}, "snapshot_steps"), ({"snapshot_steps": (8,)}, "snapshot_steps"),
])
def test_train_config_errors(changes: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        TrainConfig(**{"steps": 7, **changes})


# --- TeacherBlock ---------------------------------------------------------------------------------

def block_pair(**kwargs) -> tuple[TeacherBlock, Block]:
    torch.manual_seed(0)
    ours = TeacherBlock(dim=32, num_heads=2, qkv_bias=True, init_values=0.5, **kwargs)
    ref = Block(dim=32, num_heads=2, qkv_bias=True, init_values=0.5)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def tokens(n: int = 8, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, 5, 32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("training", [False, True])
def test_block_without_layer_drop_is_timm_block(training: bool) -> None:
    ours, ref = block_pair()
    ours.train(training)
    ref.train(training)
    x = tokens()
    # x + (a + m) versus timm's (x + a) + m: equal up to float rounding
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-6, atol=1e-6)


def test_layer_drop_is_inactive_in_eval() -> None:
    ours, ref = block_pair(layer_drop=0.7)
    ours.eval()
    ref.eval()
    x = tokens()
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-6, atol=1e-6)


def test_layer_drop_in_training_drops_whole_samples() -> None:
    ours, _ = block_pair(layer_drop=0.5)
    ours.train()
    x = tokens(400)
    torch.manual_seed(3)
    out = ours(x)
    torch.manual_seed(3)
    kept = torch.rand(400) < 0.5  # the block draws exactly this mask first
    unchanged = (out == x).flatten(1).all(1)
    assert torch.equal(unchanged, ~kept)
    assert 150 < int(kept.sum()) < 250
    with torch.no_grad():
        a = ours.ls1(ours.attn(ours.norm1(x)))
        update = a + ours.ls2(ours.mlp(ours.norm2(x + a)))
    torch.testing.assert_close(out[kept], (x + update / 0.5)[kept], rtol=1e-5, atol=1e-6)


def test_block_without_residual() -> None:
    ours, ref = block_pair(residual=False)
    ours.eval()
    x = tokens()
    with torch.no_grad():
        expected = ref.ls2(ref.mlp(ref.norm2(ref.ls1(ref.attn(ref.norm1(x))))))
        torch.testing.assert_close(ours(x), expected, rtol=0, atol=0)


def test_build_teacher_uses_teacher_blocks_and_is_seeded() -> None:
    cfg = TeacherConfig(**{**TINY, "p": 0.3, "residual": False, "reg_tokens": 2})
    model = build_teacher(cfg, seed=4)
    assert len(model.blocks) == 3
    assert all(isinstance(b, TeacherBlock) and b.layer_drop == 0.3 and not b.residual
               for b in model.blocks)
    assert model.reg_token.shape == (1, 2, 32)
    assert same_weights(model, build_teacher(cfg, seed=4))
    assert not same_weights(model, build_teacher(cfg, seed=5))


# --- training -------------------------------------------------------------------------------------

P_CFG = TeacherConfig(**{**TINY, "p": 0.2})  # layer drop exercises the per-step RNG seeding


@pytest.fixture(scope="module")
def uninterrupted() -> tuple[torch.nn.Module, dict, dict]:
    model = build_teacher(P_CFG)
    record, snaps = train_classifier(model, toy_data(), toy_data(24, 1), TRAIN,
                                     config={"run": 1}, progress=False)
    return model, record, snaps


def test_training_is_deterministic(uninterrupted) -> None:
    model_a, record_a, snaps_a = uninterrupted
    model_b = build_teacher(P_CFG)
    record_b, snaps_b = train_classifier(model_b, toy_data(), toy_data(24, 1), TRAIN,
                                         config={"run": 1}, progress=False)
    assert same_weights(model_a, model_b)
    assert record_a["loss"] == record_b["loss"] and len(record_a["loss"]) == 7
    assert [v["step"] for v in record_a["val"]] == [3, 6, 7]
    assert record_a["val"] == record_b["val"]
    assert sorted(snaps_a) == [1, 5]
    assert not same_weights(model_a, build_teacher(P_CFG))  # it did train


def test_snapshots_hold_the_weights_at_their_step(uninterrupted) -> None:
    _, _, snaps = uninterrupted
    # the lr schedule depends on `steps` except during warmup: one step of a 1-step run is the
    # first step of the 7-step run
    one = build_teacher(P_CFG)
    train_classifier(one, toy_data(), toy_data(24, 1), dataclasses.replace(TRAIN, snapshot_steps=(),
                                                                           steps=1, warmup_steps=2),
                     config={}, progress=False)
    assert all(torch.equal(snaps[1][k], v) for k, v in one.state_dict().items())
    assert not all(torch.equal(snaps[5][k], v) for k, v in one.state_dict().items())


def run_killed_then_resumed(tmp_path: Path, kill_after: Callable[..., Dataset],
                            cfg: TeacherConfig = P_CFG, train: TrainConfig = TRAIN,
                            config: dict | None = None
                            ) -> tuple[torch.nn.Module, dict, dict, list[str]]:
    work = tmp_path / "run.work.safetensors"
    config = config or {"run": 1}
    # 3 steps of 16 images per epoch; dies while fetching step 5
    with pytest.raises(kill_after.Killed):
        train_classifier(build_teacher(cfg), kill_after(toy_data(), 16 * 5), toy_data(24, 1),
                         train, config=config, work_path=work, checkpoint_every=2,
                         progress=False)
    assert work.exists()
    left = sorted(p.name for p in tmp_path.iterdir())
    model = build_teacher(cfg)
    record, snaps = train_classifier(model, toy_data(), toy_data(24, 1), train, config=config,
                                     work_path=work, checkpoint_every=2, progress=False)
    return model, record, snaps, left


def test_killed_training_resumes_to_the_same_weights(uninterrupted, tmp_path: Path,
                                                     kill_after: Callable[..., Dataset]) -> None:
    model_a, record_a, snaps_a = uninterrupted
    model_b, record_b, snaps_b, _ = run_killed_then_resumed(tmp_path, kill_after)
    assert same_weights(model_a, model_b)
    assert record_b["loss"] == record_a["loss"]
    assert record_b["val"] == record_a["val"]
    assert sorted(snaps_b) == [1, 5]
    assert all(torch.equal(snaps_a[s][k], snaps_b[s][k]) for s in snaps_a for k in snaps_a[s])


def test_resumed_record_has_the_same_keys(uninterrupted, tmp_path: Path,
                                          kill_after: Callable[..., Dataset]) -> None:
    _, record_a, _ = uninterrupted
    _, record_b, _, _ = run_killed_then_resumed(tmp_path, kill_after)
    assert record_b.keys() == record_a.keys()


def test_foreign_work_file_is_ignored(uninterrupted, tmp_path: Path,
                                      kill_after: Callable[..., Dataset]) -> None:
    work = tmp_path / "run.work.safetensors"
    with pytest.raises(kill_after.Killed):
        train_classifier(build_teacher(P_CFG), kill_after(toy_data(), 16 * 5), toy_data(24, 1),
                         TRAIN, config={"run": 2}, work_path=work, checkpoint_every=2,
                         progress=False)
    model = build_teacher(P_CFG)
    train_classifier(model, toy_data(), toy_data(24, 1), TRAIN, config={"run": 1},
                     work_path=work, checkpoint_every=2, progress=False)
    assert same_weights(model, uninterrupted[0])


def test_evaluate_against_hand_count() -> None:
    model = build_teacher(CFG).eval()
    data = toy_data(30)
    x, y = data.tensors
    with torch.no_grad():
        logits = model(x)
    result = evaluate(model, data, batch_size=7)
    assert result["acc"] == pytest.approx((logits.argmax(1) == y).float().mean().item(), abs=1e-5)
    assert result["loss"] == pytest.approx(
        torch.nn.functional.cross_entropy(logits, y).item(), abs=1e-5)


# --- cache ----------------------------------------------------------------------------------------

@pytest.fixture
def tiny_datasets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict]:
    """get_datasets returns toy data; RAPTOR_CACHE is a fresh folder. Records every call."""
    calls: list[dict] = []

    def fake(name: str, **kwargs) -> tuple[TensorDataset, TensorDataset]:
        calls.append({"name": name, **kwargs})
        return toy_data(), toy_data(24, 1)

    monkeypatch.setattr(raptor.data, "get_datasets", fake)
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    return calls


def test_get_teacher_trains_once_then_loads(tiny_datasets, monkeypatch, uninterrupted) -> None:
    model, record = get_teacher(P_CFG, TRAIN, seed=0, progress=False)
    assert not model.training
    assert same_weights(model, uninterrupted[0])  # the same recipe as train_classifier directly
    assert record["loss"] == uninterrupted[1]["loss"]
    assert tiny_datasets[0]["name"] == TRAIN.dataset and tiny_datasets[0]["img_size"] == 16
    entry = entry_path("teacher", teacher_key(P_CFG, TRAIN, 0))
    assert entry.is_file()

    def no_training(*args, **kwargs):
        raise AssertionError("the cached teacher was trained again")

    monkeypatch.setattr(teachers, "train_classifier", no_training)
    again, record_again = get_teacher(P_CFG, TRAIN, seed=0, progress=False)
    assert same_weights(model, again)
    assert record_again["loss"] == record["loss"]
    snap = teacher_snapshot(P_CFG, TRAIN, 5)
    assert all(torch.equal(snap.state_dict()[k], v) for k, v in uninterrupted[2][5].items())
    with pytest.raises(ValueError, match="snapshot"):
        teacher_snapshot(P_CFG, TRAIN, 3)
    with pytest.raises(AssertionError, match="trained again"):  # another seed is another teacher
        get_teacher(P_CFG, TRAIN, seed=1, progress=False)


def test_untrained_teacher_is_the_seeded_init(tiny_datasets) -> None:
    model, record = get_teacher(CFG, None, seed=3)
    assert record == {"untrained": True}
    assert same_weights(model, build_teacher(CFG, seed=3))
    assert tiny_datasets == []


# --- pretrained -----------------------------------------------------------------------------------

TIMM_NAME = "vit_tiny_patch16_224"


def test_load_pretrained_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown timm model 'vit_nonexistent_xyz'"):
        load_pretrained("vit_nonexistent_xyz", weights="w.safetensors")


def test_load_pretrained_needs_weights_or_download() -> None:
    with pytest.raises(ValueError, match="no weights given"):
        load_pretrained(TIMM_NAME)


def test_load_pretrained_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not found"):
        load_pretrained(TIMM_NAME, tmp_path / "absent.safetensors", img_size=32)


@pytest.fixture(scope="module")
def tiny_timm_weights(tmp_path_factory) -> tuple[dict[str, torch.Tensor], Path]:
    import timm

    torch.manual_seed(7)
    state = timm.create_model(TIMM_NAME, pretrained=False, img_size=32).state_dict()
    path = tmp_path_factory.mktemp("weights") / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, path)
    return state, path


def test_load_pretrained_from_safetensors(tiny_timm_weights) -> None:
    state, path = tiny_timm_weights
    model = load_pretrained(TIMM_NAME, path, img_size=32)
    assert not model.training
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_load_pretrained_from_torch_file_resamples_positions(tiny_timm_weights,
                                                             tmp_path: Path) -> None:
    state, _ = tiny_timm_weights
    path = tmp_path / "tiny.pth"
    torch.save({"model": state, "epoch": 3}, path)
    model = load_pretrained(TIMM_NAME, path, img_size=48)
    loaded = model.state_dict()
    assert loaded["pos_embed"].shape == (1, 1 + 9, 192)
    torch.testing.assert_close(loaded["pos_embed"][:, 0], state["pos_embed"][:, 0])  # cls kept
    assert all(torch.equal(loaded[k], state[k]) for k in state if k != "pos_embed")


def test_load_pretrained_other_architecture(tmp_path: Path) -> None:
    path = tmp_path / "teacher.safetensors"
    save_file({k: v.contiguous() for k, v in build_teacher(CFG).state_dict().items()}, path)
    with pytest.raises(CheckpointError) as info:
        load_pretrained(TIMM_NAME, path, img_size=16)
    message = str(info.value)
    assert "108 missing keys" in message and "blocks.10." in message  # 9 absent blocks x 12
    assert "shape mismatches" in message and "file (32,) vs model (192,)" in message
    assert str(path) in message


# --- checks before work (#11) ---------------------------------------------------------------------

@pytest.mark.parametrize("changes, name", [
    ({"lr": float("nan")}, "lr"), ({"lr": float("inf")}, "lr"), ({"lr": -1e-3}, "lr"),
    ({"grad_clip": 0.0}, "grad_clip"), ({"grad_clip": -1.0}, "grad_clip"),
    ({"grad_clip": float("inf")}, "grad_clip"), ({"min_lr": 1e-2}, "min_lr"),
    ({"min_lr": float("nan")}, "min_lr"), ({"warmup_steps": -1}, "warmup_steps"),
    ({"warmup_steps": 1.5}, "warmup_steps"), ({"weight_decay": float("inf")}, "weight_decay"),
    ({"seed": -1}, "seed"), ({"train_limit": 0}, "train_limit"), ({"val_limit": 0}, "val_limit"),
    ({"dataset": "mnist-typo"}, "dataset"), ({"batch_size": True}, "batch_size"),
])
def test_train_config_rejects_nonsense_naming_the_field(changes: dict, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        TrainConfig(**{"steps": 7, **changes})


def test_train_config_grad_clip_none_disables_clipping() -> None:
    assert TrainConfig(grad_clip=None).grad_clip is None
    assert TrainConfig(min_lr=1e-3, lr=1e-3).min_lr == 1e-3  # min_lr = lr: a constant rate


def test_evaluate_refuses_no_images_and_warns_on_nan() -> None:
    model = build_teacher(CFG).eval()
    with pytest.raises(ValueError, match="at least one image"):
        evaluate(model, toy_data(0))
    x, y = toy_data(10).tensors
    x = x.clone()
    x[3, 0, 0, 0] = float("nan")
    with pytest.warns(UserWarning, match="1 of 10 images hold NaN"):
        evaluate(model, TensorDataset(x, y))


def test_training_device_is_checked() -> None:
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda'"):
        train_classifier(build_teacher(CFG), toy_data(), toy_data(24, 1), TRAIN, config={},
                         progress=False, device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            train_classifier(build_teacher(CFG), toy_data(), toy_data(24, 1), TRAIN, config={},
                             progress=False, device="cuda")


def test_teacher_keys_on_the_cpu_are_unchanged() -> None:
    """The key of a CPU-trained teacher is what it was before devices existed (the cache and the
    artifact tier hold teachers under it); a CUDA-trained one is another entry."""
    key = teacher_key(CFG, TRAIN, 0)
    assert set(key) == {"arch", "train", "seed", "format"}
    assert teacher_key(CFG, TRAIN, 0, "cpu") == key
    untied = {k: v for k, v in dataclasses.asdict(CFG).items() if k != "tied"}
    assert teacher_key(CFG, None, 0, "cpu") == {"arch": untied, "train": None, "seed": 0,
                                                 "format": 1}
    if torch.cuda.is_available():
        assert teacher_key(CFG, TRAIN, 0, "cuda:0") == {**key, "device": "cuda"}


# --- resume verifies what it resumes (#11) --------------------------------------------------------

def flip_byte(path: Path, where: float = 0.9) -> None:
    """Flip one byte of ``path`` at ``where`` of its length (in the tensor data)."""
    data = bytearray(path.read_bytes())
    data[int(len(data) * where)] ^= 0x01
    path.write_bytes(bytes(data))


def killed_run(tmp_path: Path, kill_after: Callable[..., Dataset]) -> Path:
    """A run killed at step 5 with checkpoints at steps 2 and 4 (snapshot 1 saved); its work."""
    work = tmp_path / "run.work.safetensors"
    with pytest.raises(kill_after.Killed):
        train_classifier(build_teacher(P_CFG), kill_after(toy_data(), 16 * 5), toy_data(24, 1),
                         TRAIN, config={"run": 1}, work_path=work, checkpoint_every=2,
                         progress=False)
    return work


@pytest.mark.parametrize("damage", ["flip a byte in the work file", "flip a byte in a snapshot",
                                    "delete a snapshot", "another configuration"])
def test_damaged_resume_restarts_from_zero_bit_identical(uninterrupted, tmp_path: Path,
                                                         kill_after: Callable[..., Dataset],
                                                         damage: str) -> None:
    work = killed_run(tmp_path, kill_after)
    snapshot = teachers._snapshot_path(work, 1)
    config = {"run": 1}
    if damage == "flip a byte in the work file":
        flip_byte(work)
        named = work
    elif damage == "flip a byte in a snapshot":
        flip_byte(snapshot)
        named = snapshot
    elif damage == "delete a snapshot":
        snapshot.unlink()
        named = snapshot
    else:
        config, named = {"run": 1, "lr": "other"}, work
    model = build_teacher(P_CFG)
    with pytest.warns(UserWarning, match="not resuming from") as caught:
        record, snaps = train_classifier(model, toy_data(), toy_data(24, 1), TRAIN, config=config,
                                         work_path=work, checkpoint_every=2, progress=False)
    assert any(str(named) in str(w.message) for w in caught)
    model_a, record_a, snaps_a = uninterrupted
    sa, sb = model_a.state_dict(), model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert record["loss"] == record_a["loss"] and len(record["loss"]) == TRAIN.steps
    assert record["val"] == record_a["val"]
    assert sorted(snaps) == [1, 5]
    assert all(torch.equal(snaps_a[s][k], snaps[s][k]) for s in snaps_a for k in snaps_a[s])


# --- the convergence criterion (TrainConfig.patience) ---------------------------------------------

PATIENT = TrainConfig(steps=40, batch_size=16, lr=3e-3, warmup_steps=2, eval_every=1, patience=3)


@pytest.fixture(scope="module")
def converged() -> tuple[torch.nn.Module, dict]:
    model = build_teacher(CFG)  # random labels: the validation loss soon rises
    record, _ = train_classifier(model, toy_data(), toy_data(24, 1), PATIENT, config={"run": 3},
                                 progress=False)
    return model, record


def test_patience_stops_at_the_criterion_and_keeps_the_lowest_validation_loss(converged) -> None:
    model, record = converged
    losses = [v["loss"] for v in record["val"]]
    best, low = 0, float("inf")  # the criterion, recomputed from the record
    for step, loss in enumerate(losses, 1):
        if loss < low * (1 - teachers.CONVERGENCE_TOL):
            best, low = step, loss
    assert record["converged"] and record["stopped"] == best + PATIENT.patience < PATIENT.steps
    assert record["best"] == {"step": best, "loss": low}
    assert len(record["loss"]) == record["stopped"]
    assert evaluate(model, toy_data(24, 1))["loss"] == pytest.approx(low, abs=1e-5)


def test_patience_keeps_the_weights_a_fixed_run_has_at_that_step(converged) -> None:
    """Same budget, same cosine: the fixed-length run's snapshot at the best step is the kept
    model, bit for bit."""
    model, record = converged
    fixed = dataclasses.replace(PATIENT, patience=None, snapshot_steps=(record["best"]["step"],))
    _, snaps = train_classifier(build_teacher(CFG), toy_data(), toy_data(24, 1), fixed,
                                config={}, progress=False)
    assert all(torch.equal(snaps[record["best"]["step"]][k], v)
               for k, v in model.state_dict().items())


def test_patience_resumes_to_the_same_weights(converged, tmp_path: Path,
                                              kill_after: Callable[..., Dataset]) -> None:
    model_a, record_a = converged
    model_b, record_b, _, _ = run_killed_then_resumed(tmp_path, kill_after, CFG, PATIENT,
                                                      {"run": 3})
    assert same_weights(model_a, model_b)
    assert {k: v for k, v in record_b.items() if k != "seconds"} == \
        {k: v for k, v in record_a.items() if k != "seconds"}


def test_half_weights_round_the_kept_weights_and_snapshots(tiny_datasets, uninterrupted) -> None:
    """``half_weights``: the same training, its weights and snapshots rounded to float16 values;
    a key of its own, and none of the field where it is off (stored keys hold)."""
    half = dataclasses.replace(TRAIN, half_weights=True)
    model, _ = get_teacher(P_CFG, half, seed=0, progress=False)
    assert all(torch.equal(v, u.half().float())
               for v, u in zip(model.state_dict().values(), uninterrupted[0].state_dict().values()))
    snap = teacher_snapshot(P_CFG, half, 5)
    assert all(torch.equal(snap.state_dict()[k], v.half().float())
               for k, v in uninterrupted[2][5].items())
    assert teacher_key(P_CFG, half, 0)["train"]["half_weights"] is True
    assert "half_weights" not in teacher_key(P_CFG, TRAIN, 0)["train"]


def test_patience_is_in_a_key_only_when_set() -> None:
    assert "patience" not in teacher_key(CFG, TRAIN, 0)["train"]
    assert teacher_key(CFG, PATIENT, 0)["train"]["patience"] == 3
    with pytest.raises(ValueError, match="patience"):
        TrainConfig(patience=0)
    with pytest.raises(ValueError, match="patience=None"):
        TrainConfig(patience=2, snapshot_steps=(3,))


# ---------------------------------------------------------------- a teacher with planted phases


def test_a_tied_teacher_shares_each_groups_block(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``tied=(2, 1)``: blocks 1 and 2 are one module (their parameters counted and trained once),
    block 3 its own; it trains, is stored and loads back with its groups still one module, and an
    untied teacher's key is as it was before ``tied`` existed."""
    tied = TeacherConfig(**{**TINY, "tied": (2, 1)})
    model = build_teacher(tied)
    assert model.blocks[0] is model.blocks[1] and model.blocks[1] is not model.blocks[2]
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in build_teacher(CFG).parameters()) - sum(
        p.numel() for p in model.blocks[0].parameters())
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: (toy_data(), toy_data(24, 1)))
    train = dataclasses.replace(TRAIN, snapshot_steps=())
    trained, _ = get_teacher(tied, train, seed=0, progress=False, device="cpu")
    loaded, _ = get_teacher(tied, train, seed=0, progress=False, device="cpu")
    assert loaded.blocks[0] is loaded.blocks[1] and same_weights(trained, loaded)
    assert not same_weights(trained, build_teacher(tied))
    assert "tied" not in teacher_key(CFG, TRAIN, 0)["arch"]
    with pytest.raises(ValueError, match=r"tied=\(2, 2\) must sum to depth=3"):
        TeacherConfig(**{**TINY, "tied": (2, 2)})


def test_parameter_count_is_the_built_models_and_ignores_depth_rate_and_skips() -> None:
    for cfg in (CFG, TeacherConfig(**{**TINY, "depth": 4, "tied": (2, 2)})):
        built = sum(p.numel() for p in build_teacher(cfg).parameters())
        assert parameter_count(cfg) == built
        assert parameter_count(dataclasses.replace(cfg, p=0.5, residual=False)) == built
    assert parameter_count(TeacherConfig(**{**TINY, "depth": 4, "tied": (2, 2)})) < \
        parameter_count(TeacherConfig(**{**TINY, "depth": 4}))
