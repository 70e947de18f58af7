"""Sweeps: a chapter's trainings run as separate jobs through submitit (local processes or SLURM).

A chapter asks the cache (:mod:`raptor.storage.cache`) for every teacher and student it needs. To
find them without training, :func:`plan` runs the chapter's ``compute(spec, plan)`` with a
:class:`raptor.planning.Plan`: each missing entry becomes a :class:`Job` (the configuration
objects it was asked for with, :class:`~raptor.teachers.TeacherRequest` or
:class:`~raptor.train.StudentRequest`, and its cache key) and the chapter gets an untrained
stand-in, so ``compute`` runs to its end (a dry run: small stand-ins of the models and images,
:mod:`raptor.book.experiment`, so no full-size model is built). A student's key holds its
partition, which the chapter finds from its *trained* teacher, so a student is only ready once its
teacher is in the cache. :func:`sweep` therefore runs in rounds — plan, submit the ready jobs as
one job array, wait — until nothing is missing; then the chapter executes from the cache. Each job
asks for its entry as the chapter did, from its configuration objects (:func:`train_job`), and the
cache's per-entry lock makes two jobs racing for one key train it once, so a re-submitted sweep
resumes where it stopped. A teacher job is one process; a student job with ``ranks`` > 1 runs
``torchrun`` on its node (:func:`torchrun_job`), whose ranks read the pickled job and distil with
DDP (:func:`rank_job`), rank 0 storing the entry.

Cost estimates (:mod:`raptor.gpu_cost`): a Raptor applies its blocks as often as its teacher has
layers, so it costs its teacher's parameters.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import pickle
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from raptor import atlas, atlas_design, gpu_cost
from raptor.book.chapters import names, science
from raptor.book.experiment import DRY_BOOT, planned_record
from raptor.book.inputs import missing_inputs
from raptor.book.runner import RunnerError, model_refusals, resolve
from raptor.book.spec import Machine
from raptor.planning import Plan
from raptor.storage.cache import Tensors, entry_name, load_entry
from raptor.catalog import DatasetNotFoundError, dataset_info, find
from raptor.distributed import init_distributed
from raptor.job_options import Options
from raptor.loop import resolve_device
from raptor.teachers import (TeacherRequest, build_teacher, get_teacher, parameter_count,
                             teacher_key)
from raptor.train import StudentRequest, build_student, get_student

MAX_ROUNDS = 10
Request = TeacherRequest | StudentRequest


@dataclass(frozen=True)
class Job:
    """One missing cache entry: what the chapter asked for it with (``request``: its configuration
    objects), its cache ``key`` (the entry's name), a readable ``label``, its training FLOPs and
    whether it can start now."""

    request: Request
    key: Mapping[str, Any]
    label: str
    flops: float
    ready: bool

    @property
    def kind(self) -> str:
        return "student" if isinstance(self.request, StudentRequest) else "teacher"

    @property
    def device(self) -> str:
        """Where the job trains (a student's teacher trains there too)."""
        return _teacher(self.request).device


def _teacher(request: Request) -> TeacherRequest:
    """The teacher of a request: itself, or a student's."""
    return request.teacher if isinstance(request, StudentRequest) else request


# --- jobs ----------------------------------------------------------------------------------------

def train_job(job: Job, data_root: str | None) -> str:
    """One job: train its entry into the shared cache (or load it if there), asking for it with
    its configuration objects as the chapter did."""
    request = job.request
    if isinstance(request, StudentRequest):
        t = request.teacher
        get_student(t.cfg, t.train, t.seed, request.cfg, data_root, snapshot=request.snapshot,
                    progress=False)
    else:
        get_teacher(request.cfg, request.train, seed=request.seed, data_root=data_root,
                    progress=False, device=request.device)
    return entry_name(job.kind, job.key)


def rank_job(kind: str, jobfile: Path, data_root: str | None) -> str:
    """:func:`train_job` for the ``kind`` job pickled in ``jobfile``, alone or as one process of
    ``torchrun``: then it joins the process group, every rank distils the student (DDP) and rank 0
    stores it."""
    job = _read_job(jobfile)
    if job.kind != kind:
        raise ValueError(f"{jobfile} holds a {job.kind} job, not a {kind} one")
    _, world = init_distributed(job.device)
    try:
        if world > 1 and (not isinstance(job.request, StudentRequest)
                          or job.request.teacher.train is not None
                          and load_entry("teacher", job.key["teacher"]) is None):
            raise ValueError("only a student whose teacher is cached trains on several ranks")
        return train_job(job, data_root)
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def torchrun_job(jobfile: str, data_root: str | None, *, ranks: int) -> str:
    """A job of ``ranks`` processes: ``torchrun`` on this node runs ``python -m raptor job KIND
    JOBFILE`` (:func:`rank_job`) in each; their output goes to the job's log, and its last lines
    into the error if they fail."""
    job = _read_job(jobfile)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={ranks}", "-m", "raptor", "job", job.kind, jobfile,
           *(["--data-root", str(data_root)] if data_root else [])]
    tail: collections.deque[str] = collections.deque(maxlen=100)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as run:
        for line in run.stdout or ():
            print(line, end="", flush=True)
            tail.append(line)
    if run.returncode:
        raise RuntimeError(f"{shlex.join(cmd)} exited with {run.returncode}:\n{''.join(tail)}")
    return entry_name(job.kind, job.key)


def _read_job(path: str | Path) -> Job:
    job = pickle.loads(Path(path).read_bytes())
    if not isinstance(job, Job):
        raise ValueError(f"{path} holds no sweep job but a {type(job).__name__}")
    return job


# --- planning ------------------------------------------------------------------------------------

def _stand_in(request: Request) -> tuple[Tensors, dict[str, Any]]:
    """Untrained weights of the entry's shape, and a record with its evaluations as NaN."""
    if isinstance(request, StudentRequest):
        t = request.teacher
        student = build_student(build_teacher(t.cfg, t.seed), request.cfg)
        return dict(student.blocks.state_dict()), {"planned": True}
    state = build_teacher(request.cfg, request.seed).state_dict()
    tensors = dict(state)
    for step in request.train.snapshot_steps:
        tensors.update({f"snapshot.{step}.{k}": v for k, v in state.items()})
    return tensors, planned_record(request.train)


def _flops(request: Request) -> float:
    """Training FLOPs ≈ 6 × params × tokens × batch × steps (params: the teacher's)."""
    t = _teacher(request)
    params = parameter_count(t.cfg)
    tokens = (t.cfg.img_size // t.cfg.patch_size) ** 2 + 1 + t.cfg.reg_tokens
    if isinstance(request, StudentRequest):
        batch, steps = request.cfg.batch_size, request.cfg.stage1_steps + request.cfg.stage2_steps
    else:
        batch, steps = t.train.batch_size, t.train.steps
    return gpu_cost.training_flops(params, tokens, batch * steps)



def _label(request: Request) -> str:
    t = _teacher(request)
    arch = t.cfg
    who = f"p={arch.p} seed={t.seed}" + ("" if arch.residual else " no-skip")
    if t.train is None:
        who += " untrained"
    if isinstance(request, TeacherRequest):
        tr = t.train
        return (f"{who}: ViT L={arch.depth} D={arch.embed_dim} {arch.img_size}px on "
                f"{tr.dataset}, {_at_most(request)}{tr.steps} steps x {tr.batch_size}"
                + (f", {tr.train_limit} images" if tr.train_limit else ""))
    d = request.cfg
    snap = f" at step {request.snapshot}" if request.snapshot is not None else ""
    return (f"k={len(d.repeats)} Raptor of teacher {who}{snap}: "
            f"{_at_most(request)}{d.stage1_steps}+{d.stage2_steps} steps x {d.batch_size}")


def _stops_at_plateau(request: Request) -> bool:
    """Whether a training stops where its validation loss flattens: its steps, and so its FLOPs,
    are then a bound."""
    train = request.cfg if isinstance(request, StudentRequest) else request.train
    return train.patience is not None


def _at_most(request: Request) -> str:
    return "at most " if _stops_at_plateau(request) else ""


def _dry_images(dataset: str, img_size: int | None, n: int, seed: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """A dry run reads no data: a chapter's ``n`` images are random ones of the dataset's channels
    at the stand-in models' size, every class in turn."""
    info = dataset_info(dataset)
    size = img_size or info.image_size
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, info.in_chans, size, size, generator=g), torch.arange(n) % info.num_classes


def plan(name: str, profile: str, overrides: Mapping[str, Any] | None = None, *,
         dry: bool = False, fresh: bool = False) -> tuple[list[Job], str | None]:
    """The chapter's missing trainings, in the order it asks for them, and why planning stopped
    early (``None`` when ``compute`` ran to its end). A student is ready once its teacher is
    cached. ``dry``: on small stand-in models and images (no data read, no full-size model built:
    :mod:`raptor.book.experiment`); a student's partition then is a stand-in's, its key not its
    real one, and one already cached is listed as missing. ``fresh``: as from an empty cache."""
    spec = resolve(name, profile, overrides)
    if dry and hasattr(spec, "n_boot"):  # resamples of statistics no dry run reads
        spec = dataclasses.replace(spec, n_boot=DRY_BOOT)
    asked: dict[str, tuple[Mapping[str, Any], Request]] = {}

    def stand_in(kind: str, key: Mapping[str, Any], request: object
                 ) -> tuple[Tensors, dict[str, Any]]:
        if not isinstance(request, (TeacherRequest, StudentRequest)):
            raise RunnerError(f"the chapter asked for {entry_name(kind, key)} without its "
                              f"configuration objects, so no job can train it")
        asked[entry_name(kind, key)] = (key, request)
        return ({}, {"planned": True}) if dry else _stand_in(request)

    stopped = None
    threads = 1 if dry else torch.get_num_threads()
    with _threads(threads):
        try:
            science(name).compute.compute(spec, Plan(stand_in, _dry_images if dry else None,
                                                     fresh))
        except Exception as err:
            if not dry:
                raise
            stopped = f"{type(err).__name__}: {err}"
    jobs = []
    for key, request in asked.values():
        waits = (isinstance(request, StudentRequest)
                 and entry_name("teacher", key["teacher"]) in asked)
        jobs.append(Job(request, key, _label(request), _flops(request), ready=not waits))
    return jobs, stopped


def missing_students(profile: str, chapters: Sequence[str] | None = None,
                     overrides: Mapping[str, Any] | None = None) -> list[StudentRequest]:
    """The students the ``chapters`` (default: all) ask for at ``profile`` with the parameter
    ``overrides`` that the cache lacks, each once, for :mod:`raptor.student_batch`; their teachers
    must be cached."""
    found: dict[str, StudentRequest] = {}
    for name in chapters or names():
        for job in plan(name, profile, overrides)[0]:
            if job.kind != "student":
                continue
            if not job.ready:
                raise RunnerError(f"chapter {name}: {job.label} waits for its teacher; train "
                                  "the teachers first (python -m raptor sweep)")
            found.setdefault(entry_name("student", job.key), job.request)
    return list(found.values())


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` while inside.

    A dry run's stand-ins are tiny: a second thread buys nothing, and where another process holds
    a core its barriers spin (the Raptor chapter's dry run at ``paper``: 13 s on one thread, 363 s
    on two beside a one-thread job; BENCHMARKS)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --- checks and costs --------------------------------------------------------------------------

def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one."""
    return f"{n:,} {noun}{'s' * (n != 1)}"


def cost(name: str, profile: str = "paper") -> pd.DataFrame:
    """What training every model of chapter ``name`` at ``profile`` costs from an empty cache (a
    dry run, :func:`plan`): trainings, PFLOP and GPU-hours per round and in all, and where the
    throughput comes from (:func:`raptor.gpu_cost.throughput`).
    """
    jobs, stopped = plan(name, profile, dry=True, fresh=True)
    source, tflops, mark = gpu_cost.throughput()
    rows = {}
    for what, group in (("round 1", [j for j in jobs if j.ready]),
                        ("round 2 (students of round 1's teachers)",
                         [j for j in jobs if not j.ready]), ("total", jobs)):
        if group or what == "total":
            kinds = collections.Counter(j.kind for j in group)
            flops = sum(j.flops for j in group)
            rows[what] = (f"{_count(len(group), 'training')} "
                          f"({_count(kinds['teacher'], 'teacher')}, "
                          f"{_count(kinds['student'], 'student')}): {flops / 1e15:.4g} PFLOP, "
                          f"{mark}{gpu_cost.gpu_hours(flops, tflops):.3g} GPU-hours")
    rows["GPU-hours at"] = f"{tflops:.4g} TFLOP/s ({source})"
    if stopped:
        rows["note"] = f"planning on stand-in images stopped at {stopped}; later rounds may add jobs"
    rows["command"] = f"python -m raptor sweep --chapter {name} --profile {profile} --dry-run"
    return pd.DataFrame({f"{profile} profile: cost": rows})


def describe(jobs: Sequence[Job], throughput: tuple[str, float] | None, first: int = 1) -> str:
    """The job table (its round, counting the ready ones' as ``first``; kind, TFLOPs, GPU-hours,
    what) and the totals; GPU-hours at the measured ``throughput``, else estimated
    (:func:`~raptor.gpu_cost.assumed_throughput`, marked ``~``)."""
    source, tflops = throughput or gpu_cost.assumed_throughput()
    mark = "" if throughput else "~"
    hours = [gpu_cost.gpu_hours(j.flops, tflops) for j in jobs]
    rows = [f"  {'round':<6}{'kind':<9}{'TFLOP':>11}{'GPU-h':>10}  what"]
    for job, h in zip(jobs, hours):
        rows.append(f"  {first + (not job.ready):<6}{job.kind:<9}{job.flops / 1e12:11.4g}"
                    f"{mark + format(h, '.3g'):>10}  {job.label}")
    for later in (False, True):
        group = [(j, h) for j, h in zip(jobs, hours) if j.ready != later]
        if group:
            rows.append(f"  round {first + later}: {len(group)} trainings, "
                        f"{sum(j.flops for j, _ in group) / 1e15:.4g} PFLOP, "
                        f"{mark}{sum(h for _, h in group):.4g} GPU-hours")
    rows.append(f"  total: {len(jobs)} trainings, {sum(j.flops for j in jobs) / 1e15:.4g} PFLOP, "
                f"{mark}{sum(hours):.4g} GPU-hours at {tflops:.4g} TFLOP/s ("
                + (f"{source}, bench/gpu_check.py" if throughput else source) + ")")
    if any(_stops_at_plateau(j.request) for j in jobs):
        rows.append("  a training that stops at its plateau (\"at most\") counts its cap's FLOPs: "
                    "the totals bound it")
    if any(not j.ready for j in jobs):
        rows.append(f"  round {first + 1}: a student's partition is its trained teacher's max-cut, "
                    f"so it starts once that teacher (round {first}) is trained")
    return "\n".join(rows)


# --- running -----------------------------------------------------------------------------------

def _on_cuda(job: Job) -> bool:
    return job.device.startswith("cuda")


def _jobfile(opts: Options, job: Job) -> str:
    """The job pickled in ``<folder>/jobs/``, for its ranks to read."""
    path = (opts.folder / "jobs" / entry_name(job.kind, job.key)).with_suffix(".pickle").resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(job))
    return str(path)


def _uneven(jobs: Sequence[Job], ranks: int) -> str | None:
    """Why ``ranks`` cannot train these students (each rank takes an equal slice of a batch)."""
    bad = [j.label for j in jobs
           if isinstance(j.request, StudentRequest) and j.request.cfg.batch_size % ranks]
    return f"--ranks {ranks} must divide the batch size of: {'; '.join(bad)}" if bad else None


def _executor(opts: Options, gpus: int) -> Any:
    import submitit

    executor = submitit.AutoExecutor(folder=str(opts.folder / "%j"), cluster=opts.executor)
    executor.update_parameters(timeout_min=opts.time_min, name="raptor-sweep")
    if opts.executor == "slurm":
        executor.update_parameters(
            nodes=1, tasks_per_node=1, gpus_per_node=gpus, cpus_per_task=opts.cpus_per_task,
            slurm_array_parallelism=opts.array_parallelism,
            **({"slurm_partition": opts.partition} if opts.partition else {}))
    return executor


def sweep(name: str, profile: str, overrides: Mapping[str, Any] | None = None,
          opts: Options = Options(), *, dry_run: bool = False, out: Any = print) -> int:
    """Train every teacher and student the chapter needs, as jobs, round by round; ``dry_run``
    lists the jobs with their cost and trains nothing. Returns the number of jobs submitted."""
    spec = resolve(name, profile, overrides)
    unfit = model_refusals({name: spec})  # sweep imports torch anyway: checked first
    if unfit:
        raise RunnerError("\n".join(unfit))
    machine = getattr(spec, "machine", None)
    data_root = machine.data_root if isinstance(machine, Machine) else None
    problems = missing_inputs(spec)
    if dry_run:
        jobs, stopped = plan(name, profile, overrides, dry=True)
        out(f"dry run of chapter {name} at profile {profile}: parameters checked")
        out("\n".join(["inputs missing:", *problems]) if problems else "inputs: all found")
        out(describe(jobs, gpu_cost.gpu_throughput()) if jobs else
            "nothing to train: every model it asks for is cached, or it asks for none")
        if _uneven(jobs, opts.ranks):
            out(_uneven(jobs, opts.ranks))
        if any(j.kind == "student" for j in jobs):
            out("  (a dry run keys students on stand-in partitions: one already cached is listed)")
        if stopped:
            out(f"(planning on stand-in images stopped at {stopped}; later rounds may add jobs)")
        return 0
    if problems:
        raise RunnerError("\n".join([f"chapter {name!r} at profile {profile!r} lacks inputs:",
                                     *problems]))
    submitted = 0
    for round_ in range(1, MAX_ROUNDS + 1):
        jobs, _ = plan(name, profile, overrides)
        ready = [j for j in jobs if j.ready]
        if not jobs:
            break
        if not ready:
            raise RunnerError(f"none of the {len(jobs)} missing trainings can start: "
                              + "; ".join(j.label for j in jobs))
        if opts.executor == "slurm" and not opts.gpus_per_node and any(map(_on_cuda, ready)):
            raise RunnerError("these trainings are keyed to CUDA (device=auto found a GPU where "
                              "the sweep plans): give --gpus-per-node")
        if _uneven(ready, opts.ranks):
            raise RunnerError(_uneven(ready, opts.ranks))
        out(f"round {round_}: {len(ready)} of {len(jobs)} missing trainings ready\n"
            + describe(ready, gpu_cost.gpu_throughput(), round_))
        running = []
        for kind in ("teacher", "student"):  # one array each: a teacher is one process, one GPU
            group = [j for j in ready if j.kind == kind]
            ranks = opts.ranks if kind == "student" else 1
            if not group:
                continue
            executor = _executor(opts, opts.gpus_per_node if kind == "student"
                                 else min(opts.gpus_per_node, 1))
            handles = executor.map_array(
                train_job if ranks == 1 else functools.partial(torchrun_job, ranks=ranks),
                group if ranks == 1 else [_jobfile(opts, j) for j in group],
                [data_root] * len(group))
            running += zip(group, handles)
        submitted += len(running)
        for job, handle in running:
            try:
                handle.result()
            except Exception as err:
                raise RunnerError(f"job {handle.job_id} ({job.kind} {job.label}) failed; its "
                                  f"log: {handle.paths.stderr}\n{err}") from err
    else:
        raise RunnerError(f"still missing trainings after {MAX_ROUNDS} rounds")
    flags = "".join(f" -p {k} {v!r}" for k, v in (overrides or {}).items())
    out(f"chapter {name} at profile {profile}: every training is cached ({submitted} jobs "
        f"submitted). Execute it: python -m raptor run --chapter {name} --profile {profile}{flags}")
    return submitted


# --- the atlas ------------------------------------------------------------------------------------

def atlas_job(cell: atlas_design.Cell, folder: Path, data_root: str | None, device: str) -> str:
    """One atlas job: train ``cell``'s teacher into the shared cache (or load it), measure it and
    store its result in ``folder``."""
    return str(atlas.save(atlas.measure(cell, data_root=data_root, device=device), folder))


def atlas_stage2(results: Path) -> list[atlas_design.Cell]:
    """Stage 2's cells, chosen by the atlas chapter's C1 test on the cells in ``results``."""
    page = science("atlas")
    return page.compute.stage2(page.compute.compute(page.Spec(results=str(results.resolve()))))


def atlas_sweep(cells: Sequence[atlas_design.Cell], opts: Options = Options(), *,
                folder: Path = atlas_design.RESULTS, data_root: str | None = None,
                device: str = "auto", dry_run: bool = False, out: Any = print) -> int:
    """Measure every cell of ``cells`` without a stored result, one job each (one process, at most
    one GPU); ``dry_run`` lists them with their cost bound (the whole budget; the criterion
    usually stops sooner). Returns the number of jobs submitted."""
    try:
        find(atlas_design.DATASET, data_root)
    except DatasetNotFoundError as err:
        raise RunnerError(str(err)) from None
    todo = atlas.missing(cells, folder)
    on = resolve_device(device)
    jobs = [Job(request, teacher_key(request.cfg, request.train, request.seed, on), cell.name,
                _flops(request), True)
            for cell in todo
            for request in [TeacherRequest(cell.teacher(), cell.training(), cell.seed, on)]]
    out(f"atlas: {len(cells) - len(todo)} of {len(cells)} cells stored in {folder}")
    if not jobs:
        return 0
    out(describe(jobs, gpu_cost.gpu_throughput()) + "\n  (FLOPs: each cell's whole budget; GPU-hours: a "
        "lower bound, as ViTs this small keep a GPU far below its peak)")
    if dry_run:
        return 0
    executor = _executor(opts, min(opts.gpus_per_node, 1))
    handles = executor.map_array(atlas_job, todo, [folder] * len(todo), [data_root] * len(todo),
                                 [device] * len(todo))
    for cell, handle in zip(todo, handles):
        try:
            out(f"stored {handle.result()}")
        except Exception as err:
            raise RunnerError(f"job {handle.job_id} (atlas cell {cell.name}) failed; its log: "
                              f"{handle.paths.stderr}\n{err}") from err
    return len(handles)
