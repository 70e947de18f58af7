"""Many Raptors distilled at once on one GPU, into the cache under the keys the book asks for.

A Raptor of width 64 launches thousands of kernels a step, each a few microseconds of GPU time, so
one student leaves a GPU mostly idle. Here each student is distilled by
:func:`raptor.train.get_student` in its own thread on its own CUDA stream, its steps replayed from
CUDA graphs (:class:`raptor.loop.CapturedStep`), so many fill the GPU side by side. Each is stored
under the key of the configuration a chapter asks for (on the CPU), its record saying where it was
trained (``trained_on``): the book then executes from those weights on the CPU, and the artifact
tier takes them from the cache. The same students distilled on a CPU agree in their statistics,
not in their last bits.

    python -c "import pickle; from raptor.sweep import missing_students; pickle.dump(
        missing_students('cpu'), open('students.pickle', 'wb'))"     # here: what the book lacks
    python -m raptor.student_batch students.pickle --threads 16 --minutes 8   # on the GPU
    OMP_NUM_THREADS=1 python -m raptor.student_batch students.pickle --device cpu --threads 1 \
        --part 0 2 --minutes 150                                      # or one process a CPU core

The file holds :class:`~raptor.train.StudentRequest` objects, their teachers cached (e.g. in the
tier); a run starts no student after ``--minutes`` and lists those left, and the cache's
``student/`` entries then go where the book runs. Measured on an H200 (results/students/): each
captured step matches the eager one to 1e-5 and runs 4× faster, but 24 threads reach ~230 steps/s
in all, GIL-bound by each step's host work (the loss read back, the batch gathered): too slow for
the book's 110 students in one 10-minute call. This module imports only the science, not the book.
"""

from __future__ import annotations

import argparse
import json
import pickle
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from raptor.loop import GATE
from raptor.storage.artifacts import metrics
from raptor.storage.cache import entry_name, load_entry
from raptor.teachers import teacher_key
from raptor.train import StudentRequest, get_student


def distil_all(requests: Sequence[StudentRequest], *, threads: int, deadline: float,
               device: str = "cuda", capture: bool = True, data_root: str | None = None,
               out: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Distil ``requests`` into the cache, ``threads`` at a time on ``device``, each thread on its
    own stream; none starts after ``deadline`` (``time.monotonic()``). One row per request:
    ``index``, ``status`` (``done``, ``failed`` with the ``error``, or ``not started``), wall
    ``seconds``, and per stage (stage 1: per block) the step it stopped at and why."""
    trained = {entry_name("teacher", key): key for r in requests for t in [r.teacher]
               if t.train is not None for key in [teacher_key(t.cfg, t.train, t.seed, t.device)]}
    missing = [name for name, key in trained.items() if load_entry("teacher", key) is None]
    if missing:  # trained here, a teacher would race the other threads for the global generator
        raise ValueError(f"{len(missing)} of the students' teachers are not cached: train them "
                         f"first (python -m raptor sweep)")
    lock = threading.Lock()
    streams = threading.local()

    def one(index: int, request: StudentRequest) -> dict[str, Any]:
        if time.monotonic() > deadline:
            return {"index": index, "status": "not started"}
        if not hasattr(streams, "stream"):
            streams.stream = torch.cuda.Stream(device) if device.startswith("cuda") else None
        start = time.monotonic()
        try:
            with GATE.shared(), (torch.cuda.stream(streams.stream) if streams.stream is not None
                                 else nullcontext()):
                t = request.teacher
                _, record = get_student(t.cfg, t.train, t.seed, request.cfg, data_root,
                                        snapshot=request.snapshot, progress=False, device=device,
                                        capture=capture)
        except Exception as err:  # noqa: BLE001 (one failed student does not stop the others)
            row = {"index": index, "status": "failed", "error": f"{type(err).__name__}: {err}",
                   "trace": traceback.format_exc(limit=8)}
        else:
            row = {"index": index, "status": "done",
                   "seconds": round(time.monotonic() - start, 1),
                   **{k: v for k, v in metrics(record).items() if k.endswith(("stopped", "why"))}}
        with lock:
            out(f"student {index + 1}/{len(requests)}: {row['status']}"
                f"{' in ' + str(row.get('seconds')) + ' s' if 'seconds' in row else ''}"
                f"{' — ' + row['error'] if 'error' in row else ''}")
        return row

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(len(requests)), requests))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raptor.student_batch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("students", type=Path, help="a file of students to distil (pickle)")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="start no student after this long")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--no-capture", action="store_true",
                        help="eager steps, no CUDA graphs (always so on a CPU)")
    parser.add_argument("--part", type=int, nargs=2, default=(0, 1), metavar=("I", "N"),
                        help="only every N-th student from the I-th (0-based): one of N processes")
    parser.add_argument("--data-root")
    parser.add_argument("--report", type=Path, help="write one JSON row per student here")
    args = parser.parse_args(argv)
    requests = pickle.loads(args.students.read_bytes())
    if not all(isinstance(r, StudentRequest) for r in requests):
        raise SystemExit(f"{args.students} must hold a list of StudentRequests")
    index, parts = args.part
    if not 0 <= index < parts:
        raise SystemExit(f"--part I N needs 0 <= I < N, got {index} {parts}")
    requests = requests[index::parts]
    rows = distil_all(requests, threads=args.threads,
                      deadline=time.monotonic() + 60 * args.minutes, device=args.device,
                      capture=not args.no_capture and args.device.startswith("cuda"),
                      data_root=args.data_root)
    if args.report:
        args.report.write_text(json.dumps(rows, indent=1, default=str))
    left = [r["index"] for r in rows if r["status"] != "done"]
    print(f"{len(rows) - len(left)} of {len(rows)} students distilled"
          + (f"; left: {left}" if left else ""))
    return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(main())
