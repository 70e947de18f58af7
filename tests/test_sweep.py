"""Sweeps (raptor.sweep): a chapter's trainings as submitit jobs, resumable, racing safely."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

from raptor.__main__ import main
from raptor.book.chapters import names, science
from raptor.book.runner import RunnerError
from raptor.planning import Plan
from raptor.storage.cache import entry_name, entry_path
from raptor import atlas, atlas_design
from raptor.gpu_cost import gpu_throughput
from raptor.job_options import Options
from raptor.sweep import (Job, atlas_sweep, cost, describe, missing_students, plan, sweep,
                          train_job)
from raptor.teachers import (TeacherConfig, TeacherRequest, TrainConfig, get_teacher, teacher_key,
                             teacher_snapshot)
from raptor.train import DistillConfig, StudentRequest, get_student, student_key
import raptor
import raptor.data

CHAPTER = "distillation"  # at smoke: one teacher, then one student distilled from it
TINY = TeacherConfig(depth=2, embed_dim=16, num_heads=2, patch_size=4, img_size=8, in_chans=1,
                     num_classes=3, reg_tokens=2)
TRAIN = TrainConfig(steps=4, batch_size=8, warmup_steps=1, eval_every=2, snapshot_steps=(2,))
DISTILL = DistillConfig(repeats=(1, 1), stage1_steps=2, stage2_steps=1, batch_size=8,
                        warmup_steps=1)
TEACHER = TeacherRequest(TINY, TRAIN, 0, "cpu")


def _no_training(kind: str, key: object, request: object) -> None:
    raise AssertionError(f"{kind} {key} would be trained")


@pytest.mark.slow
def test_local_sweep_fills_the_cache_then_the_chapter_trains_nothing(
        fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the jobs' arithmetic is the test process's
    lines: list[str] = []
    opts = Options(executor="local", folder=tmp_path / "jobs", time_min=20)
    assert sweep(CHAPTER, "smoke", opts=opts, out=lines.append) == 2
    text = "\n".join(lines)
    assert "round 1: 1 of 2 missing trainings ready" in text
    assert "round 2: 1 of 1" in text and "python -m raptor run --chapter distillation" in text
    swept = {p.relative_to(fresh_cache) for p in fresh_cache.glob("*/*.safetensors")}
    # the student's two stage-1 blocks (k = 2) are entries of their own
    assert [p.parts[0] for p in sorted(swept)] == ["block", "block", "student", "teacher"]
    assert not list(fresh_cache.glob("*/*.lock")) and not list(fresh_cache.glob("*/*.work*"))
    # everything cached: planning finds nothing, a second sweep submits nothing
    assert plan(CHAPTER, "smoke") == ([], None)
    assert sweep(CHAPTER, "smoke", opts=opts, out=lines.append) == 0
    mod = science(CHAPTER)
    mod.compute.compute(mod.SMOKE, Plan(_no_training))
    # the jobs stored what the in-process (notebook) path stores: same keys, same weights
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "in-process"))
    mod.compute.compute(mod.SMOKE)
    direct = {p.relative_to(tmp_path / "in-process")
              for p in (tmp_path / "in-process").glob("*/*.safetensors")}
    assert direct == swept
    for rel in swept:
        a = (fresh_cache / rel).read_bytes()
        b = (tmp_path / "in-process" / rel).read_bytes()
        assert _tensor_bytes(a) == _tensor_bytes(b), rel


@pytest.mark.slow
def test_a_two_rank_sweep_distils_under_torchrun_as_one_process_does(
        fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from raptor.storage.checkpoint import load_tensors

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    opts = Options(executor="local", folder=tmp_path / "jobs", time_min=20, ranks=2)
    assert sweep(CHAPTER, "smoke", opts=opts, out=lambda _: None) == 2
    assert not list(fresh_cache.glob("*/*.lock")) and not list(fresh_cache.glob("*/*.work*"))
    # the teacher trained in its job's process; only the student went through torchrun
    (jobfile,) = (tmp_path / "jobs" / "jobs").rglob("*.pickle")
    assert jobfile.parent.name == "student"
    (student,) = fresh_cache.glob("student/*.safetensors")
    (teacher,) = fresh_cache.glob("teacher/*.safetensors")
    ranked, record = load_tensors(student)
    assert record["world_size"] == 2
    mod = science(CHAPTER)
    mod.compute.compute(mod.SMOKE, Plan(_no_training))
    # the same student distilled in one process: DDP's mean over two half batches is the
    # gradient of the whole batch, up to float rounding (1e-6), which the weights' rounding to
    # float16 values (half_weights) can turn into a float16 step (at most 2^-10 of the value)
    one = tmp_path / "one-rank"
    (one / "teacher").mkdir(parents=True)
    (one / "teacher" / teacher.name).write_bytes(teacher.read_bytes())
    monkeypatch.setenv("RAPTOR_CACHE", str(one))
    train_job(pickle.loads(jobfile.read_bytes()), None)
    single, record = load_tensors(one / "student" / student.name)
    assert record["world_size"] == 1 and ranked.keys() == single.keys()
    for k in single:
        torch.testing.assert_close(ranked[k], single[k], rtol=2**-10, atol=1e-6,
                                   msg=lambda m, k=k: f"2 ranks vs 1, {k}: {m}")


def _tensor_bytes(raw: bytes) -> bytes:
    """The tensor data of a safetensors file (its header also holds build times)."""
    n = int.from_bytes(raw[:8], "little")
    return raw[8 + n:]


RACER = """
import sys, time
from pathlib import Path
import raptor.teachers, raptor.train
folder = Path(sys.argv[1])
def counted(name, fn):
    def run(*args, **kwargs):
        with open(folder / name, "a") as f:
            f.write("call\\n")
        while name == "teacher" and not (folder / "release").exists():
            time.sleep(0.05)
        return fn(*args, **kwargs)
    return run
raptor.teachers.train_classifier = counted("teacher", raptor.teachers.train_classifier)
raptor.train.distill = counted("student", raptor.train.distill)
from raptor.__main__ import main
sys.exit(main(["sweep", "--chapter", "distillation", "--profile", "smoke", "--executor", "debug",
               "--folder", str(folder / "jobs")]))
"""


@pytest.mark.slow
def test_two_sweeps_racing_train_each_entry_once(fresh_cache: Path, tmp_path: Path) -> None:
    def racer(name: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", RACER, str(tmp_path)],
                                stdout=subprocess.DEVNULL,
                                stderr=open(tmp_path / f"{name}.err", "w"))

    first, second = racer("first"), racer("second")
    end = time.monotonic() + 300
    # one sweep trains the teacher (held until released); the other must wait for its lock
    while not any("waiting for teacher/" in (tmp_path / f"{n}.err").read_text()
                  for n in ("first", "second")):
        assert time.monotonic() < end and first.poll() is None and second.poll() is None
        time.sleep(0.1)
    (tmp_path / "release").touch()
    assert [p.wait(timeout=300) for p in (first, second)] == [0, 0], (
        (tmp_path / "first.err").read_text()[-2000:], (tmp_path / "second.err").read_text()[-2000:])
    assert (tmp_path / "teacher").read_text().split() == ["call"]
    assert (tmp_path / "student").read_text().split() == ["call"]
    assert plan(CHAPTER, "smoke") == ([], None)


@pytest.mark.slow
def test_dry_run_at_paper_lists_jobs_and_costs_and_trains_nothing(
        fresh_cache: Path, isolated_data: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--chapter", "dynamics", "--profile", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "inputs missing:" in out and "dataset 'cifar100' not found" in out
    assert "teacher" in out and "ViT L=12 D=768 224px on cifar100, 8000 steps x 256" in out
    assert "  2     student" in out and "GPU-hours at 395.6 TFLOP/s (an estimate: H100/H200" in out
    assert "stopped" not in out
    assert not fresh_cache.exists() or not list(fresh_cache.rglob("*.safetensors"))


@pytest.mark.timed
@pytest.mark.slow
@pytest.mark.parametrize("name", names())
def test_every_chapter_dry_run_at_paper_lists_every_job_with_gpu_hours_within_a_minute(
        name: str, tmp_path: Path) -> None:
    """The command as a user runs it, in its own process (imports included), on no data: small
    stand-ins for the models and images, so no full-size forward pass."""
    env = {**os.environ, "RAPTOR_CACHE": str(tmp_path / "cache"), "RAPTOR_DATA": str(tmp_path)}
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "raptor", "sweep", "--chapter", name, "--profile",
                          "paper", "--dry-run"], capture_output=True, text=True, env=env,
                         timeout=300)
    seconds = time.perf_counter() - start
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    assert "stopped" not in out and "Traceback" not in run.stderr
    if name in ("atlas", "claims"):  # they read stored results and train nothing
        assert "nothing to train" in out
    else:
        rows = [r for r in out.splitlines() if r.startswith(("  1 ", "  2 "))]
        assert rows and all(" ~" in r for r in rows)  # every job's GPU-hours, estimated
        assert "GPU-hours at 395.6 TFLOP/s (an estimate" in out
    assert not list((tmp_path / "cache").rglob("*.safetensors"))
    assert seconds < 60, f"{name}: {seconds:.0f} s"


def test_a_dry_plan_asks_for_the_trainings_a_real_plan_asks_for(fresh_cache: Path) -> None:
    """The dry plan's small stand-ins note each teacher with the key and request of a real plan
    (full-size stand-ins), and as many students, of the same cost; only a student's key differs
    (its partition is a stand-in's)."""
    for name in ("distillation", "functional-phases"):
        real, stopped = plan(name, "smoke")
        dry, dry_stopped = plan(name, "smoke", dry=True)
        assert stopped is dry_stopped is None
        teachers = [(j.key, j.request, j.flops, j.ready) for j in real if j.kind == "teacher"]
        assert teachers == [(j.key, j.request, j.flops, j.ready) for j in dry
                            if j.kind == "teacher"]
        assert sorted((j.flops, j.ready) for j in real if j.kind == "student") == sorted(
            (j.flops, j.ready) for j in dry if j.kind == "student")


def test_missing_students_wait_for_their_teachers_then_are_the_plans_students(
        fresh_cache: Path) -> None:
    with pytest.raises(RunnerError, match="waits for its teacher; train the teachers first"):
        missing_students("smoke", ["distillation"])
    for job in plan("distillation", "smoke")[0]:  # the teachers only
        if job.kind == "teacher":
            train_job(job, None)
    wanted = [j.request for j in plan("distillation", "smoke")[0]]
    assert missing_students("smoke", ["distillation"]) == wanted and wanted
    assert all(isinstance(r, StudentRequest) for r in wanted)
    converged = missing_students("smoke", ["distillation"], {
        "stage1_steps": 9, "distill_val_limit": 32, "distill_patience": 2})
    assert [dataclasses.replace(r.cfg, stage1_steps=w.cfg.stage1_steps,
                                val_limit=w.cfg.val_limit, patience=w.cfg.patience)
            for r, w in zip(converged, wanted)] == \
        [w.cfg for w in wanted]  # the same students, to the criterion the overrides name
    assert {(r.cfg.stage1_steps, r.cfg.val_limit, r.cfg.patience) for r in converged} == \
        {(9, 32, 2)}


def test_a_chapters_cost_is_its_dry_plan_from_an_empty_cache(fresh_cache: Path) -> None:
    """The cost table counts every training the chapter asks for, also those already cached."""
    jobs, _ = plan(CHAPTER, "smoke", dry=True)
    teachers = [j for j in jobs if j.kind == "teacher"]
    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'s' * (n != 1)}"

    total = (f"{count(len(jobs), 'training')} ({count(len(teachers), 'teacher')}, "
             f"{count(len(jobs) - len(teachers), 'student')}): "
             f"{sum(j.flops for j in jobs) / 1e15:.4g} PFLOP, ~")
    assert cost(CHAPTER, "smoke").loc["total"].item().startswith(total)
    train_job(teachers[0], None)
    assert len(plan(CHAPTER, "smoke", dry=True)[0]) < len(jobs)
    assert cost(CHAPTER, "smoke").loc["total"].item().startswith(total)


def test_a_dry_plan_runs_on_one_thread_and_restores_the_count(
        fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its stand-ins are too small for a second thread, which only spins where a core is busy."""
    module, seen = science(CHAPTER).compute, []
    compute = module.compute
    monkeypatch.setattr(module, "compute", lambda spec, plan: (
        seen.append(torch.get_num_threads()) or compute(spec, plan)))
    torch.set_num_threads(2)
    try:
        assert plan(CHAPTER, "smoke", dry=True)[0]
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)  # as conftest sets it


def test_a_sweep_lacking_its_data_submits_nothing(fresh_cache: Path, isolated_data: None,
                                                  tmp_path: Path) -> None:
    with pytest.raises(RunnerError, match="lacks inputs:(.|\n)*cifar100"):
        sweep("dynamics", "paper", opts=Options(folder=tmp_path / "jobs"))
    assert not (tmp_path / "jobs").exists()


def test_cost_is_six_params_tokens_batch_steps(tmp_path: Path) -> None:
    from raptor.sweep import _flops
    from raptor.teachers import build_teacher

    params = sum(p.numel() for p in build_teacher(TINY).parameters())
    assert _flops(TEACHER) == 6 * params * (4 + 1 + 2) * 8 * 4
    assert _flops(StudentRequest(TEACHER, DISTILL)) == 6 * params * (4 + 1 + 2) * 8 * (2 + 1)
    jobs = [Job(TEACHER, {}, "a", 3.6e15, True),
            Job(StudentRequest(TEACHER, DISTILL), {}, "b", 7.2e15, False)]
    text = describe(jobs, ("H200", 1.0))
    assert "round 1: 1 trainings, 3.6 PFLOP, 1 GPU-hours" in text
    assert "round 2: 1 trainings, 7.2 PFLOP, 2 GPU-hours" in text
    assert "total: 2 trainings, 10.8 PFLOP, 3 GPU-hours at 1 TFLOP/s (H200" in text
    assert "  1     teacher" in text and "  2     student" in text and "~" not in text
    # nothing measured: an estimate at an assumed utilisation of a named GPU, marked as such
    text = describe(jobs, None)
    assert "total: 2 trainings, 10.8 PFLOP, ~0.007583 GPU-hours at 395.6 TFLOP/s" in text
    assert "an estimate: H100/H200 SXM at an assumed 40% of its 989 TFLOP/s dense bf16" in text
    assert "bound" not in text
    # under a stopping criterion a training's steps are its cap: the cost is an upper bound
    stopping = StudentRequest(TEACHER, dataclasses.replace(DISTILL, val_limit=4, patience=2))
    assert "at most 2+1 steps x 8" in raptor.sweep._label(stopping)
    assert "at most" not in raptor.sweep._label(StudentRequest(TEACHER, DISTILL))
    text = describe([Job(stopping, {}, "b", 7.2e15, True)], ("H200", 1.0))
    assert "counts its cap's FLOPs: the totals bound it" in text
    record = tmp_path / "gpu_check.json"
    assert gpu_throughput(record) is None
    record.write_text('{"device": "H200", "tflops": 412.5}')
    assert gpu_throughput(record) == ("H200", 412.5)


@pytest.mark.slow
def test_gpu_check_writes_the_record_the_dry_run_reads(tmp_path: Path) -> None:
    record = tmp_path / "gpu_check.json"
    script = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"
    subprocess.run([sys.executable, str(script), "--cpu", "--quick", "--batch-size", "2",
                    "--threads", "1", "--record", str(record)], check=True, capture_output=True)
    device, tflops = gpu_throughput(record)
    assert device.startswith("CPU") and 0 < tflops < 10
    assert f"({device}, bench/gpu_check.py)" in describe([Job(TEACHER, {}, "a", 1e12, True)],
                                                          (device, tflops))


def test_ranks_default_to_one_per_gpu_and_must_split_each_batch() -> None:
    from raptor.sweep import _uneven

    assert Options().ranks == 1 and Options(gpus_per_node=4).ranks == 4
    student = StudentRequest(TEACHER, DistillConfig(repeats=(1, 1), batch_size=32))
    jobs = [Job(TEACHER, {}, "t", 1.0, True), Job(student, {}, "s", 1.0, True)]
    assert _uneven(jobs, 4) is None
    assert _uneven(jobs, 3) == "--ranks 3 must divide the batch size of: s"


def test_a_failed_job_stops_the_sweep_naming_it(fresh_cache: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(job: Job, data_root: object) -> str:
        raise RuntimeError("planted failure")

    monkeypatch.setattr("raptor.sweep.train_job", fails)
    with pytest.raises(RunnerError, match="teacher p=0.2 seed=0.*failed"):
        sweep(CHAPTER, "smoke", opts=Options(executor="debug", folder=tmp_path / "jobs"),
              out=lambda _: None)


@pytest.mark.slow
def test_a_failed_torchrun_job_raises_with_its_ranks_output(fresh_cache: Path,
                                                           tmp_path: Path) -> None:
    from raptor.sweep import torchrun_job

    jobfile = tmp_path / "teacher.pickle"
    jobfile.write_bytes(pickle.dumps(Job(TEACHER, teacher_key(TINY, TRAIN, 0), "t", 1.0, True)))
    with pytest.raises(RuntimeError, match="(?s)exited with 1.*only a student whose teacher is "
                                           "cached trains on several ranks"):
        torchrun_job(str(jobfile), None, ranks=2)


def test_a_job_trains_the_entry_its_configuration_asked_for(fresh_cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache hands a planner the configuration objects of each request; a job made of them
    (pickled, as submitit sends it) trains the entry of the key the chapter asked for, which the
    chapter then finds: a teacher, its student and the student of its snapshot."""
    g = torch.Generator().manual_seed(0)
    toy = TensorDataset(torch.randn(32, 1, 8, 8, generator=g), torch.randint(0, 3, (32,),
                                                                             generator=g))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *args, **kwargs: (toy, toy))
    asked: list[tuple[str, dict, object]] = []

    def stand_in(kind: str, key: dict, request: object) -> tuple[dict, dict]:
        from raptor.sweep import _stand_in

        asked.append((kind, key, request))
        return _stand_in(request)

    def jobs_run() -> list[str]:
        names = [train_job(pickle.loads(pickle.dumps(Job(request, key, "j", 0.0, True))), None)
                 for _, key, request in asked]
        asked.clear()
        return names

    get_teacher(TINY, TRAIN, seed=0, progress=False, device="cpu", plan=Plan(stand_in))
    assert [(k, r) for k, _, r in asked] == [("teacher", TEACHER)]
    assert jobs_run() == [entry_name("teacher", teacher_key(TINY, TRAIN, 0))]
    plan = Plan(stand_in)  # now the teacher is cached: its students
    get_student(TINY, TRAIN, 0, DISTILL, progress=False, plan=plan)
    get_student(TINY, TRAIN, 0, DISTILL, snapshot=2, progress=False, plan=plan)
    assert [r for _, _, r in asked] == [StudentRequest(TEACHER, DISTILL),
                                        StudentRequest(TEACHER, DISTILL, snapshot=2)]
    teacher, _ = get_teacher(TINY, TRAIN, seed=0, progress=False, device="cpu")
    keys = [student_key(TINY, TRAIN, 0, DISTILL, teacher),  # as chapters computed them
            {**student_key(TINY, TRAIN, 0, DISTILL, teacher_snapshot(TINY, TRAIN, 2)),
             "snapshot": 2}]
    assert jobs_run() == [entry_name("student", key) for key in keys]
    assert all(entry_path("student", key).is_file() for key in keys)
    finds = Plan(_no_training)  # the chapter finds everything
    get_student(TINY, TRAIN, 0, DISTILL, progress=False, plan=finds)
    get_student(TINY, TRAIN, 0, DISTILL, snapshot=2, progress=False, plan=finds)


def test_a_job_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    from raptor.sweep import rank_job

    jobfile = tmp_path / "teacher.pickle"
    jobfile.write_bytes(pickle.dumps(Job(TEACHER, teacher_key(TINY, TRAIN, 0), "t", 1.0, True)))
    with pytest.raises(ValueError, match="holds a teacher job, not a student one"):
        rank_job("student", jobfile, None)
    jobfile.write_bytes(pickle.dumps(teacher_key(TINY, TRAIN, 0)))
    with pytest.raises(ValueError, match="holds no sweep job but a dict"):
        rank_job("teacher", jobfile, None)


@pytest.mark.parametrize("argv, message", [
    (["--chapter", "nope", "--profile", "smoke"], "unknown chapter 'nope'; valid chapters:"),
    (["--chapter", "distillation", "--profile", "huge"], "unknown profile 'huge'; valid profiles:"),
    (["--chapter", "distillation", "--profile", "smoke", "-p", "nope", "1"], "nope"),
    (["--chapter", "distillation", "--profile", "smoke", "--executor", "pbs"],
     "--executor must be"),
    (["--chapter", "distillation", "--profile", "smoke", "--time", "0"], "--time must be"),
    (["--chapter", "distillation", "--profile", "smoke", "--ranks", "0"], "--ranks must be"),
    (["--chapter", "distillation", "--profile", "smoke", "--cpus-per-task", "0"],
     "--cpus-per-task must be"),
    (["--chapter", "distillation", "--profile", "smoke", "--gpus-per-node", "2", "--ranks", "4"],
     "--ranks must be at most --gpus-per-node (2)"),
    (["--chapter", "finding-phases", "--profile", "smoke", "-p", "weights", __file__, "-p",
      "images", "."], "chapter 'finding-phases': parameter 'weights': unreadable weights file"),
])
def test_bad_arguments_are_clear_errors(argv: list[str], message: str, tmp_path: Path,
                                        fresh_cache: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", *argv, "--dry-run", "--folder", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_slurm_script_asks_for_what_the_options_say(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from raptor.sweep import _executor

    bin_ = tmp_path / "bin"  # submitit looks for srun before it writes a script
    bin_.mkdir()
    (bin_ / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_ / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    opts = Options(executor="slurm", folder=tmp_path / "jobs", partition="gpu", time_min=90,
                   gpus_per_node=4, array_parallelism=8, cpus_per_task=12)
    script = _executor(opts, gpus=4)._executor._make_submission_file_text("python -V", "u")
    for line in ("--partition=gpu", "--time=90", "--gpus-per-node=4", "--cpus-per-task=12",
                 "--nodes=1", "--ntasks-per-node=1"):
        assert f"#SBATCH {line}\n" in script


# --- the atlas ------------------------------------------------------------------------------------

ATLAS_CELL = atlas_design.Cell(3, 16, 256)


def test_an_atlas_sweep_stores_each_cell_once(short_atlas: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    opts = Options(executor="debug", folder=tmp_path / "jobs")
    assert atlas_sweep([ATLAS_CELL], opts, folder=short_atlas, device="cpu",
                       dry_run=True, out=lines.append) == 0
    assert "0 of 1 cells stored" in lines[0] and ATLAS_CELL.name in lines[1]
    assert "GPU-hours at 395.6 TFLOP/s (an estimate: H100/H200" in lines[1]  # none measured
    assert "a lower bound" in lines[1]
    assert not short_atlas.exists()
    assert atlas_sweep([ATLAS_CELL], opts, folder=short_atlas, device="cpu",
                       out=lines.append) == 1
    assert [r.cell for r in atlas.load(short_atlas)] == [ATLAS_CELL]
    assert atlas_sweep([ATLAS_CELL], opts, folder=short_atlas, out=lines.append) == 0
    assert "1 of 1 cells stored" in lines[-1]


def test_an_atlas_sweep_lacking_its_data_submits_nothing(isolated_data: None,
                                                         tmp_path: Path) -> None:
    with pytest.raises(RunnerError, match="fashion-mnist"):
        atlas_sweep([ATLAS_CELL], Options(folder=tmp_path / "jobs"), folder=tmp_path / "r")
    assert not (tmp_path / "jobs").exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv, message", [
    (["--cell", "L8-D64"], "is not of the form L12-D64-n1000-p0-P7-s0"),
    (["--cell", "L8-D72-n1000-p0-P7-s0"], "width must be a multiple of 16"),
    (["--device", "gpu"], "device must be"),
    (["--executor", "pbs"], "--executor must be"),
])
def test_bad_atlas_arguments_are_clear_errors(argv: list[str], message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["atlas", *argv, "--dry-run", "--folder", str(tmp_path / "jobs"),
                 "--results", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
