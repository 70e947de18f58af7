"""Tests for raptor.storage.checkpoint: round trips, mismatches, corruption, atomicity, no
pickle."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from torch import nn

from raptor.storage.checkpoint import (CheckpointError, atomic_write, fingerprint,
                                       load_state_checked, load_tensors, load_training_state,
                                       narrowed, read_state_dict, save_tensors,
                                       save_training_state)

CONFIG = {"arch": {"depth": 3, "width": 32}, "seed": 0, "lr": 1e-3}


def some_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(3, 4, generator=g), "b": torch.arange(5),
            "h": torch.randn(2, 2, generator=g).half(), "m": torch.tensor([True, False])}


def test_save_load_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ckpt.safetensors"
    tensors = some_tensors()
    save_tensors(path, tensors, CONFIG, {"acc": 0.5, "curve": [1, 2]})
    loaded, record = load_tensors(path, CONFIG)
    assert loaded.keys() == tensors.keys()
    assert all(torch.equal(loaded[k], v) and loaded[k].dtype == v.dtype
               for k, v in tensors.items())
    assert record == {"acc": 0.5, "curve": [1, 2]}
    assert load_tensors(path)[1] == record  # without a config: no check
    assert sorted(os.listdir(path.parent)) == ["ckpt.safetensors"]  # no temporary file left


def test_fingerprint_ignores_key_order_and_sees_values() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": 1}) != fingerprint({"a": 1.5})


def test_config_mismatch_names_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.safetensors"
    save_tensors(path, some_tensors(), CONFIG)
    other = {**CONFIG, "seed": 1, "extra": True}
    with pytest.raises(CheckpointError, match="differs in: extra, seed"):
        load_tensors(path, other)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_tensors(tmp_path / "absent.safetensors")


@pytest.mark.parametrize("damage", ["truncate", "header", "garbage", "empty"])
def test_corrupt_file(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "c.safetensors"
    save_tensors(path, some_tensors(), CONFIG)
    blob = path.read_bytes()
    if damage == "truncate":
        blob = blob[: len(blob) - 7]
    elif damage == "header":  # the JSON header right after the 8-byte length
        blob = blob[:8] + b"#" * 10 + blob[18:]
    elif damage == "garbage":
        blob = os.urandom(len(blob))
    else:
        blob = b""
    path.write_bytes(blob)
    with pytest.raises(CheckpointError, match="corrupt checkpoint"):
        load_tensors(path, CONFIG)


def test_file_without_record_metadata_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "plain.safetensors"
    save_file({"x": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_tensors(path)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_written_file_has_the_mode_the_umask_gives(tmp_path: Path, umask: int, mode: int
                                                     ) -> None:
    """A cache shared by a group on a cluster file system: entries are as readable as any new
    file there (not mkstemp's 0600)."""
    old = os.umask(umask)
    try:
        save_tensors(tmp_path / "entry.safetensors", {"x": torch.zeros(2)}, {"k": 1})
        atomic_write(tmp_path / "f.bin", lambda tmp: Path(tmp).write_bytes(b"x"))
    finally:
        os.umask(old)
    for name in ("entry.safetensors", "f.bin"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


def test_atomic_write_keeps_old_file_when_writer_fails(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(b"old"))

    def failing(tmp: str) -> None:
        Path(tmp).write_bytes(b"half-writ")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, failing)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(b"new"))
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["f.bin"]


def tiny_net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))


def adam_steps(model: nn.Module, opt: torch.optim.Optimizer, steps: range) -> None:
    for s in steps:
        g = torch.Generator().manual_seed(s)
        x, y = torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_training_state_roundtrip_continues_exactly(tmp_path: Path) -> None:
    path = tmp_path / "work.safetensors"
    model = tiny_net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, betas=(0.8, 0.95))
    adam_steps(model, opt, range(3))
    save_training_state(path, model=model, optimizer=opt, config=CONFIG, record={"step": 3})

    restored = tiny_net(seed=1)
    restored_opt = torch.optim.AdamW(restored.parameters(), lr=5.0)
    record = load_training_state(path, model=restored, optimizer=restored_opt, config=CONFIG)
    assert record["step"] == 3
    assert restored_opt.param_groups[0]["lr"] == 1e-2
    assert tuple(restored_opt.param_groups[0]["betas"]) == (0.8, 0.95)
    adam_steps(model, opt, range(3, 5))
    adam_steps(restored, restored_opt, range(3, 5))
    for a, b in zip(model.state_dict().values(), restored.state_dict().values()):
        assert torch.equal(a, b)
    for p, q in zip(model.parameters(), restored.parameters()):
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt.state[p][name], restored_opt.state[q][name])


def test_training_state_of_another_config(tmp_path: Path) -> None:
    path = tmp_path / "work.safetensors"
    save_training_state(path, model=tiny_net(), optimizer=None, config=CONFIG, record={})
    with pytest.raises(CheckpointError, match="lr"):
        load_training_state(path, model=tiny_net(), optimizer=None, config={**CONFIG, "lr": 1})


@pytest.mark.parametrize("wrap", [None, "model", "state_dict"])
def test_read_state_dict_torch_file(tmp_path: Path, wrap: str | None) -> None:
    state = tiny_net().state_dict()
    path = tmp_path / "w.pth"
    torch.save(state if wrap is None else {wrap: state, "epoch": 9}, path)
    loaded = read_state_dict(path)
    assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)


def test_read_state_dict_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    save_file(some_tensors(), path)
    assert read_state_dict(path).keys() == some_tensors().keys()
    with pytest.raises(CheckpointError, match="not found"):
        read_state_dict(tmp_path / "nothing.pth")


class Payload:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_read_state_dict_never_runs_pickled_code(tmp_path: Path) -> None:
    marker = tmp_path / "code-was-executed"
    path = tmp_path / "evil.pth"
    torch.save({"model": tiny_net().state_dict(), "x": Payload(marker)}, path)
    with pytest.raises((CheckpointError, pickle.UnpicklingError)):
        read_state_dict(path)
    assert not marker.exists()


@pytest.mark.parametrize("content", ["pickle", "garbage"])
def test_read_state_dict_unreadable_torch_file_is_checkpoint_error(tmp_path: Path,
                                                                   content: str) -> None:
    path = tmp_path / "bad.pth"
    if content == "pickle":
        torch.save({"x": Payload(tmp_path / "m")}, path)
    else:
        path.write_bytes(b"not a torch file at all" * 5)
    with pytest.raises(CheckpointError):
        read_state_dict(path)


def test_load_state_checked_names_every_problem() -> None:
    model = tiny_net()
    state = dict(model.state_dict())
    state["0.weight"] = torch.zeros(8, 5)
    del state["3.bias"]
    state["extra.weight"] = torch.zeros(1)
    with pytest.raises(CheckpointError) as info:
        load_state_checked(model, state, source="my.pth")
    msg = str(info.value)
    assert "my.pth" in msg and "1 missing keys ['3.bias']" in msg
    assert "1 unexpected keys ['extra.weight']" in msg
    assert "0.weight: file (8, 5) vs model (8, 4)" in msg
    good = tiny_net(seed=2).state_dict()
    load_state_checked(model, good)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in good.items())


@settings(max_examples=20, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=5), st.one_of(
    st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=5), st.booleans()),
    max_size=5))
def test_fingerprint_is_stable_under_reordering(config: dict) -> None:
    assert fingerprint(dict(reversed(list(config.items())))) == fingerprint(config)


@pytest.mark.parametrize("where", ["tensor", "record", "config"])
def test_one_flipped_byte_anywhere_is_caught_by_the_digest(tmp_path: Path, where: str) -> None:
    path = tmp_path / "c.safetensors"
    save_tensors(path, some_tensors(), CONFIG, {"loss": [0.25, 0.125]})
    blob = bytearray(path.read_bytes())
    # a byte whose change keeps the file parseable: the last tensor byte, or a digit in the JSON
    at = {"tensor": len(blob) - 1, "record": blob.index(b"0.125") + 4,
          "config": blob.index(b"0.001")}[where]
    blob[at] = {"tensor": blob[at] ^ 0x01, "record": ord("6"), "config": ord("1")}[where]
    path.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="do not match its digest"):
        load_tensors(path)


def test_files_without_a_digest_still_load(tmp_path: Path) -> None:
    """Checkpoints written before digests existed (e.g. the artifact tier's) stay readable."""
    import json

    path = tmp_path / "old.safetensors"
    meta = {"config": json.dumps(CONFIG, sort_keys=True), "fingerprint": fingerprint(CONFIG),
            "record": "{}"}
    save_file(some_tensors(), path, metadata=meta)
    tensors, record = load_tensors(path, CONFIG)
    assert record == {} and tensors.keys() == some_tensors().keys()


@pytest.mark.parametrize("content, match", [
    (b"", "is empty"), (b"hello, these are not weights\n", "unreadable weights file"),
    ("list", "holds a list, not a state dict"), ("non-tensors", "holds a dict, not a state dict"),
])
def test_read_state_dict_refuses_what_is_no_state_dict(tmp_path: Path, content: object,
                                                        match: str) -> None:
    path = tmp_path / "weights.pth"
    if content == "list":
        torch.save([torch.zeros(2)], path)
    elif content == "non-tensors":
        torch.save({"epoch": 3}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match=match) as info:
        read_state_dict(path)
    assert str(path) in str(info.value) and "allowed: a safetensors file" in str(info.value)


def test_narrowed_names_do_not_depend_on_the_tensors_order() -> None:
    """A file packed twice is the same bytes: the narrowed names come sorted, however the
    tensors were ordered (safetensors reads a file's tensors in no fixed order)."""
    tensors = {name: torch.full((2,), float(i)) for i, name in enumerate("qbza")}
    tensors["x"] = torch.tensor([0.1, 0.2])  # float16 does not hold it: stays float32
    first, names = narrowed(tensors)
    again, names_again = narrowed(dict(reversed(list(tensors.items()))))
    assert names == names_again == ["a", "b", "q", "z"]
    assert first["x"].dtype == torch.float32 and first["a"].dtype == torch.float16
