"""Tests for raptor.storage.cache: build once, detect corrupt or foreign entries, clean up work
files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import TensorDataset

from raptor.storage.manifest import cache_root
from raptor.storage.build_log import builds_reported
from raptor.storage.cache import digest, entry_name, entry_path, get_or_build, load_entry

CONFIG = {"model": "toy", "width": 4, "seed": 0}
pytestmark = pytest.mark.usefixtures("fresh_cache")


class Builder:
    """Counts its calls; writes a work file like a resumable training run would."""

    def __init__(self, value: float = 1.0) -> None:
        self.calls = 0
        self.value = value

    def __call__(self, work: Path) -> tuple[dict[str, torch.Tensor], dict]:
        self.calls += 1
        work.parent.mkdir(parents=True, exist_ok=True)
        work.write_bytes(b"partial state")
        return ({"w": torch.full((64,), self.value), "i": torch.arange(6).reshape(2, 3)},
                {"acc": 0.75})


def test_cache_root_follows_env(fresh_cache: Path) -> None:
    assert cache_root() == fresh_cache
    assert entry_path("teacher", CONFIG).parent == fresh_cache / "teacher"


def test_builds_once_then_loads() -> None:
    build = Builder()
    tensors, record = get_or_build("toy", CONFIG, build)
    assert build.calls == 1 and record["acc"] == 0.75
    assert record["digest"] == digest(tensors)
    again, record2 = get_or_build("toy", CONFIG, build)
    assert build.calls == 1
    assert record2 == record
    assert all(torch.equal(again[k], tensors[k]) for k in tensors)
    assert load_entry("toy", CONFIG) is not None


def test_work_file_is_removed_after_build() -> None:
    build = Builder()
    get_or_build("toy", CONFIG, build)
    folder = entry_path("toy", CONFIG).parent
    assert [p.name for p in folder.iterdir()] == [entry_path("toy", CONFIG).name]


def data_offset(path: Path) -> int:
    """Start of the tensor bytes in a safetensors file: 8-byte header length + JSON header."""
    (n,) = struct.unpack("<Q", path.read_bytes()[:8])
    return 8 + n


@pytest.mark.parametrize("damage", ["flip-data", "truncate", "zero-header"])
def test_corrupt_entry_is_rebuilt(damage: str) -> None:
    build = Builder()
    tensors, _ = get_or_build("toy", CONFIG, build)
    path = entry_path("toy", CONFIG)
    blob = bytearray(path.read_bytes())
    if damage == "flip-data":
        i = data_offset(path) + 37  # inside the tensor bytes; safetensors cannot notice
        blob[i] ^= 0xFF
    elif damage == "truncate":
        blob = blob[: len(blob) // 2]
    else:
        blob[:8] = bytes(8)
    path.write_bytes(bytes(blob))
    with pytest.warns(UserWarning, match=f"cache entry {path} is damaged .*; it will be rebuilt"):
        assert load_entry("toy", CONFIG) is None
    with pytest.warns(UserWarning, match="it will be rebuilt"):
        rebuilt, _ = get_or_build("toy", CONFIG, build)
    assert build.calls == 2
    assert all(torch.equal(rebuilt[k], tensors[k]) for k in tensors)
    assert load_entry("toy", CONFIG) is not None


def test_entry_of_another_config_is_not_loaded() -> None:
    get_or_build("toy", CONFIG, Builder(1.0))
    other = {**CONFIG, "seed": 1}
    # a foreign entry placed where `other` would be stored (a stale or mis-copied file)
    entry_path("toy", other).write_bytes(entry_path("toy", CONFIG).read_bytes())
    with pytest.warns(UserWarning, match="is damaged"):
        assert load_entry("toy", other) is None
    build = Builder(2.0)
    with pytest.warns(UserWarning, match="it will be rebuilt"):
        tensors, _ = get_or_build("toy", other, build)
    assert build.calls == 1 and torch.all(tensors["w"] == 2.0)


def test_entry_whose_digest_lies_is_rebuilt() -> None:
    from raptor.storage.checkpoint import load_tensors, save_tensors

    get_or_build("toy", CONFIG, Builder())
    path = entry_path("toy", CONFIG)
    tensors, record = load_tensors(path, CONFIG)
    tensors["w"] = tensors["w"] + 1  # a well-formed file whose tensors no longer match the record
    save_tensors(path, tensors, CONFIG, record)
    with pytest.warns(UserWarning, match="its tensors do not match their digest"):
        assert load_entry("toy", CONFIG) is None


@pytest.mark.parametrize("kind", ["", "a/b", "two words", "../up", "9lives"])
def test_kind_must_be_an_identifier(kind: str) -> None:
    with pytest.raises(ValueError, match="kind must be an identifier"):
        entry_path(kind, CONFIG)
    with pytest.raises(ValueError, match="kind"):
        get_or_build(kind, CONFIG, Builder())


def test_digest_sees_names_dtypes_and_shapes() -> None:
    x = torch.arange(6, dtype=torch.int32)
    base = digest({"x": x})
    assert digest({"x": x.clone()}) == base
    assert digest({"y": x}) != base
    assert digest({"x": x.reshape(2, 3)}) != base
    assert digest({"x": x.view(torch.float32)}) != base  # same bytes, other dtype
    assert digest({"x": x, "e": torch.zeros(0)}) != base
    assert digest({"a": x, "b": x + 1}) == digest({"b": x + 1, "a": x})
    assert digest({"x": torch.arange(12, dtype=torch.int32)[::2]}) == digest(
        {"x": torch.arange(0, 12, 2, dtype=torch.int32)})  # views are hashed by value


def test_digest_of_scalar_tensors() -> None:
    assert digest({"s": torch.tensor(1.0)}) != digest({"s": torch.tensor(2.0)})


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=1, max_size=40), st.data())
def test_digest_changes_with_any_byte(raw: list[int], data: st.DataObject) -> None:
    t = torch.tensor(raw, dtype=torch.uint8)
    i = data.draw(st.integers(0, len(raw) - 1))
    flip = data.draw(st.integers(1, 255))
    changed = t.clone()
    changed[i] ^= flip
    assert digest({"t": t}) != digest({"t": changed})


def test_teacher_build_leaves_only_the_entry(tmp_path: Path) -> None:
    from raptor.teachers import TeacherConfig, TrainConfig, build_teacher, train_classifier

    cfg = TeacherConfig(depth=2, embed_dim=16, num_heads=2, patch_size=4, img_size=8, in_chans=1,
                        num_classes=2)
    train = TrainConfig(steps=4, batch_size=8, warmup_steps=1, eval_every=4, snapshot_steps=(1,))
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(16, 1, 8, 8, generator=g), torch.randint(0, 2, (16,),
                                                                             generator=g))

    def build(work: Path) -> tuple[dict[str, torch.Tensor], dict]:
        model = build_teacher(cfg)
        record, _ = train_classifier(model, data, data, train, config=CONFIG, work_path=work,
                                     checkpoint_every=2, progress=False)
        return dict(model.state_dict()), record

    get_or_build("teacher", CONFIG, build)
    folder = entry_path("teacher", CONFIG).parent
    assert [p.name for p in folder.iterdir()] == [entry_path("teacher", CONFIG).name]


# A process that asks the cache for one entry (the second one only once the first is building);
# its builder logs the call, holds the entry's lock until the file `release` exists and returns
# random (unseeded) weights.
RACER = """
import sys, time, torch
from pathlib import Path
from raptor.storage.cache import digest, get_or_build
folder = Path(sys.argv[1])
while sys.argv[2] == "second" and not (folder / "calls").exists():
    time.sleep(0.05)
def build(work):
    with open(folder / "calls", "a") as f:
        f.write("built\\n")
    while not (folder / "release").exists():
        time.sleep(0.05)
    return {"w": torch.randn(16)}, {}
tensors, _ = get_or_build("toy", {"model": "race"}, build)
print(digest(tensors))
"""


def _racer(folder: Path, name: str):
    import subprocess
    import sys

    err = open(folder / f"{name}.err", "w")
    return subprocess.Popen([sys.executable, "-c", RACER, str(folder), name], stdout=subprocess.PIPE,
                            stderr=err, text=True)


def _until(ok, what: str, timeout: float = 120.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def _calls(folder: Path) -> int:
    return len((folder / "calls").read_text().split()) if (folder / "calls").exists() else 0


def test_two_processes_build_an_entry_once(tmp_path: Path) -> None:
    first, second = _racer(tmp_path, "first"), _racer(tmp_path, "second")
    _until(lambda: _calls(tmp_path) == 1, "the first process to build")
    _until(lambda: "waiting for" in (tmp_path / "second.err").read_text(), "the second to wait")
    assert f"pid {first.pid}" in (tmp_path / "second.err").read_text()
    (tmp_path / "release").touch()
    outs = [p.communicate(timeout=120)[0].strip() for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0]
    assert _calls(tmp_path) == 1
    assert outs[0] == outs[1] == digest(load_entry("toy", {"model": "race"})[0])
    assert [p.name for p in entry_path("toy", {"model": "race"}).parent.iterdir()] == [
        entry_path("toy", {"model": "race"}).name]


def test_a_killed_builder_leaves_no_stale_lock(tmp_path: Path) -> None:
    import signal

    first, second = _racer(tmp_path, "first"), _racer(tmp_path, "second")
    _until(lambda: _calls(tmp_path) == 1, "the first process to build")
    _until(lambda: "waiting for" in (tmp_path / "second.err").read_text(), "the second to wait")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    _until(lambda: _calls(tmp_path) == 2, "the waiting process to build")
    (tmp_path / "release").touch()
    out = second.communicate(timeout=120)[0].strip()
    assert second.returncode == 0
    assert out == digest(load_entry("toy", {"model": "race"})[0])


RANKS = """
import datetime, sys
from pathlib import Path
import torch, torch.distributed as dist
import raptor.storage.cache
from raptor.storage.checkpoint import digest
folder = Path(sys.argv[1])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))  # a deadlock fails
rank, save = dist.get_rank(), raptor.storage.cache.save_tensors
def note(name, text):
    with open(folder / name, "a") as f:
        f.write(f"{text}\\n")
def counted_save(*args, **kwargs):
    note("stored", rank)
    return save(*args, **kwargs)
raptor.storage.cache.save_tensors = counted_save
def build(work):
    note("built", rank)
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)  # returns only once every rank builds
    return {"w": torch.arange(4.0) * total}, {"total": total.item()}
for _ in range(2):  # built, then found
    tensors, _ = raptor.storage.cache.get_or_build("toy", {"model": "ranks"}, build)
    note(f"got{rank}", digest(tensors))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_the_ranks_of_a_process_group_build_an_entry_together(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "ranks.py").write_text(RANKS)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", str(tmp_path / "ranks.py"), str(tmp_path)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted((tmp_path / "built").read_text().split()) == ["0", "1"]
    assert (tmp_path / "stored").read_text().split() == ["0"]
    got = [(tmp_path / f"got{rank}").read_text().split() for rank in (0, 1)]
    tensors, record = load_entry("toy", {"model": "ranks"})
    assert got[0] == got[1] == [digest(tensors)] * 2
    assert record["total"] == 3 and torch.equal(tensors["w"], torch.arange(4.0) * 3)
    path = entry_path("toy", {"model": "ranks"})
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no lock, no work file


def test_every_build_is_reported_with_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """A new entry, then a rebuilt damaged one: each named, with its reason, once."""
    monkeypatch.setenv("RAPTOR_ARTIFACTS", "")
    path = entry_path("toy", CONFIG)
    with builds_reported() as built:
        get_or_build("toy", CONFIG, lambda _: ({"w": torch.ones(2)}, {}))
        get_or_build("toy", CONFIG, lambda _: ({"w": torch.ones(2)}, {}))  # loaded: no report
        path.write_bytes(b"damaged")
        with pytest.warns(UserWarning, match="it will be rebuilt"):
            get_or_build("toy", CONFIG, lambda _: ({"w": torch.ones(2)}, {}))
        name = entry_name("toy", CONFIG)
        assert built() == [f"{name}: neither the cache nor the artifact tier held it",
                           f"{name}: its cache copy {path} was damaged"]

