"""Command line: ``python -m raptor run [--profile P] [--chapter C ...] [-p NAME VALUE ...]``,
``python -m raptor sweep --chapter C --profile P --executor local|slurm [...]``
(``python -m raptor job KIND JOBFILE``: one of its jobs, or one ``torchrun`` rank of it),
``python -m raptor atlas [--cell NAME ...] --executor local|slurm|debug [...]`` (the atlas's
cells, measured and stored in ``results/atlas``),
``python -m raptor analyze --model NAME --weights FILE --images DIR|DATASET [...]`` (the chapter
*Your own ViT* on any timm ViT), ``python -m raptor build``,
``python -m raptor compare EXPECTED ACTUAL``, ``python -m raptor findings`` (the README's table
of what the book found, from the stored claims) and ``python -m raptor artifacts export|verify``."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

from raptor import atlas_design
from raptor.book.compare import REPRODUCE_ATOL, REPRODUCE_RTOL, compare
from raptor.book.findings import FindingsError, with_findings
from raptor.book.runner import BOOK, RunnerError, build_book, parse_value, run
from raptor.book import launch
from raptor.book.chapters import CHAPTERS, PROFILES, names, toc
from raptor.config import check_device
from raptor.job_options import EXECUTORS, Options
from raptor.storage.manifest import MANIFEST, RETRAIN_MISSING, ArtifactError, read_manifest

# The commands that train, measure or pack models import these (torch and the science) when one
# of them is chosen, so that ``run``, ``build`` and ``compare`` check their input, and refuse bad
# input, at the interpreter's start (issue 26). Everything else here imports no torch; these two
# function-level imports are listed, with this reason, in tests/test_layout.py.
def _sweep() -> ModuleType:
    """:mod:`raptor.sweep`, imported now."""
    from raptor import sweep
    return sweep


def _tier() -> ModuleType:
    """:mod:`raptor.storage.artifacts`, imported now."""
    from raptor.storage import artifacts
    return artifacts


def _parser() -> argparse.ArgumentParser:
    """The command line's parser: one subcommand each."""
    parser = argparse.ArgumentParser(prog="python -m raptor",
                                     description="Execute the Raptor companion's chapters.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="execute chapters with papermill, then build the book")
    p_run.add_argument("--profile", default="cpu", help=f"one of {', '.join(PROFILES)}")
    p_run.add_argument("--chapter", action="append", dest="chapters",
                       help=f"repeatable; default all: {', '.join(names())}")
    p_run.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                       help="override a papermill parameter (Python literal or string)")
    p_run.add_argument("--update-book", action="store_true",
                       help="write a non-cpu run into book/ instead of runs/<profile>/")
    p_run.add_argument("--no-build", action="store_true", help="do not build the book")
    p_run.add_argument("--out", type=Path,
                       help="write the notebooks and claims to this folder, never the book")
    _retrain_option(p_run)
    p_cmp = sub.add_parser("compare", help="compare two claims folders: verdicts exactly, "
                           "numbers within one unit of their last printed digit")
    p_cmp.add_argument("expected", type=Path, help="e.g. book/claims")
    p_cmp.add_argument("actual", type=Path, help="e.g. runs/nbval/book/claims")
    p_cmp.add_argument("--chapter", action="append", dest="chapters",
                       help="compare only this chapter (repeatable; default: all)")
    p_cmp.add_argument("--retrained", action="store_true",
                       help="the actual book was retrained from scratch: rounded numbers within "
                       f"{REPRODUCE_RTOL:g} of their value + {REPRODUCE_ATOL:g} as well")
    p_sweep = sub.add_parser("sweep", help="train a chapter's teachers and students as jobs "
                             "(submitit: local processes or a SLURM cluster)")
    p_sweep.add_argument("--chapter", required=True, help=f"one of {', '.join(names())}")
    p_sweep.add_argument("--profile", default="cpu", help=f"one of {', '.join(PROFILES)}")
    p_sweep.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                         help="override a chapter parameter (as for run)")
    _job_options(p_sweep)
    p_sweep.add_argument("--dry-run", action="store_true",
                         help="check parameters and inputs, list the jobs and their cost, exit")
    _retrain_option(p_sweep)
    p_atlas = sub.add_parser("atlas", help="measure the atlas's cells (teachers trained to their "
                             "convergence criterion, C1's matrices) and store them in the "
                             "repository, as jobs")
    p_atlas.add_argument("--cell", action="append", dest="cells", metavar="NAME",
                         help="a cell such as L12-D64-n1000-p0-P7-s0 (repeatable; default: "
                         "the --stage's cells, cheapest first)")
    p_atlas.add_argument("--stage", type=int, choices=(1, 2), default=1,
                         help="1: the screening design, one seed a cell; 2: two more seeds of "
                         "the cells that pass C1's test and their neighbours (of the largest "
                         "excess and its neighbours where none passes), chosen on the stored "
                         "stage 1")
    p_atlas.add_argument("--results", type=Path, default=atlas_design.RESULTS,
                         help="the results folder (default: the repository's results/atlas)")
    p_atlas.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:<index>")
    p_atlas.add_argument("--data-root", help="where Fashion-MNIST is (default: searched)")
    _job_options(p_atlas)
    p_atlas.add_argument("--dry-run", action="store_true",
                         help="list the cells not yet stored and their cost bound, exit")
    p_an = sub.add_parser("analyze", help="the paper's phase analysis of any timm ViT: the chapter "
                          "'Your own ViT' executed on it, with analysis.json")
    p_an.add_argument("--model", required=True,
                      help="a timm ViT name (e.g. vit_base_patch16_224), or 'companion': the "
                      "book's own teacher")
    p_an.add_argument("--weights", help="its weights: a safetensors file or a torch state dict")
    p_an.add_argument("--images", required=True,
                      help="a folder of image files, or fashion-mnist, cifar100, imagenet")
    p_an.add_argument("--k", type=int, nargs="+", help="numbers of phases (default 2 3 4)")
    for flag in ("--n-images", "--img-size", "--batch-size", "--n-boot"):
        p_an.add_argument(flag, type=int)
    p_an.add_argument("--fit-raptor", type=int, metavar="STEPS",
                      help="distil a Raptor of k blocks on each max-cut for STEPS steps (half in "
                      "each stage) and compare it with the model layer by layer")
    p_an.add_argument("--random-partitions", type=int, metavar="N",
                      help="with --fit-raptor: also N random partitions per k, for comparison")
    p_an.add_argument("--bf16", action="store_true", help="forward passes in bfloat16 autocast")
    p_an.add_argument("--device", help="auto (default), cpu, cuda or cuda:<index>")
    p_an.add_argument("--data-root", help="where a named dataset is")
    p_an.add_argument("--out", type=Path,
                      help="the output folder (default runs/analyze/<model>)")
    p_job = sub.add_parser("job", help="train one cache entry from its job file (the sweep's "
                           "pickled job) as a sweep's job does; under torchrun every rank distils "
                           "the student")
    p_job.add_argument("kind", choices=["teacher", "student"])
    p_job.add_argument("jobfile", type=Path)
    p_job.add_argument("--data-root")
    sub.add_parser("build", help="write book/_toc.yml from the chapters' registry and each "
                   "chapter's install cell (raptor/book/launch.py), then jupyter-book build book/ "
                   "(no execution)")
    p_find = sub.add_parser("findings", help="rewrite the README's table of what the book found "
                            "from the stored claims")
    p_find.add_argument("--readme", type=Path, default=BOOK.parent / "README.md")
    p_find.add_argument("--claims", type=Path, default=BOOK / "claims")
    p_art = sub.add_parser("artifacts", help="fill or check the artifact tier (artifacts/)")
    p_art.add_argument("action", choices=["export", "verify", "compare", "stage", "unstage"],
                       help="stage: add the cache's students distilled to the convergence "
                       "criterion that the book's tier lacks to the tier at --root (models "
                       "trained over sessions); unstage: write that tier's entries into the cache")
    p_art.add_argument("--log", type=Path, help="export: the $RAPTOR_CACHE_LOG of a book run")
    p_art.add_argument("--root", type=Path, default=Path("artifacts"))
    p_art.add_argument("--cache", type=Path,
                       help="compare: a cache retrained from scratch (make reproduce)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(_shield_negative_values(sys.argv[1:] if argv is None else argv))
    if getattr(args, "retrain_missing", False):  # read by the kernels and jobs this one starts
        os.environ[RETRAIN_MISSING] = "1"
    try:
        if args.command == "build":
            (BOOK / "_toc.yml").write_text(toc())
            for package in CHAPTERS:
                if package.NOTEBOOK.startswith("chapters/"):
                    launch.write(BOOK / package.NOTEBOOK, package.NAME)
            build_book()
        elif args.command == "findings":
            args.readme.write_text(with_findings(args.readme.read_text(), args.claims))
            print(f"{args.readme}: the findings table written from {args.claims}")
        elif args.command == "artifacts":
            return _artifacts(args)
        elif args.command == "job":
            print(_sweep().rank_job(args.kind, args.jobfile, args.data_root))
        elif args.command == "compare":
            wide = dict(rtol=REPRODUCE_RTOL, atol=REPRODUCE_ATOL) if args.retrained else {}
            problems = compare(args.expected, args.actual, args.chapters, **wide)
            print("\n".join(problems) or f"{args.actual} matches {args.expected}")
            return 1 if problems else 0
        elif args.command == "sweep":
            _sweep().sweep(args.chapter, args.profile, _overrides(args.p), _options(args),
                           dry_run=args.dry_run)
        elif args.command == "analyze":
            return _analyze(args)
        elif args.command == "atlas":
            try:
                cells = ([atlas_design.Cell.from_name(n) for n in args.cells] if args.cells
                         else atlas_design.stage1() if args.stage == 1
                         else _sweep().atlas_stage2(args.results))
                check_device(args.device)
            except ValueError as err:
                raise RunnerError(str(err)) from None
            _sweep().atlas_sweep(cells, _options(args), folder=args.results,
                                 data_root=args.data_root, device=args.device,
                                 dry_run=args.dry_run)
        else:
            run(args.profile, args.chapters, _overrides(args.p), build=not args.no_build,
                update_book=args.update_book, out=args.out)
    except (RunnerError, ArtifactError, FindingsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _shield_negative_values(argv: list[str]) -> list[str]:
    """``argv`` with each ``-p NAME VALUE`` whose VALUE starts with '-' (``-1e-3``, which argparse
    would read as an option) shielded by a leading space (:func:`_overrides` removes it)."""
    out = list(argv)
    for i in range(len(out) - 2):
        if out[i] == "-p" and out[i + 2].startswith("-"):
            out[i + 2] = " " + out[i + 2]
    return out


def _overrides(pairs: list[list[str]]) -> dict[str, object]:
    """``-p NAME VALUE`` pairs as parameter values."""
    return {name: parse_value(value[1:] if value.startswith(" -") else value)
            for name, value in pairs}


def _analyze(args: argparse.Namespace) -> int:
    """The chapter *Your own ViT* executed on ``args``' model into ``--out``, with its numbers
    (analysis.json) and its page, built as the book's chapters are."""
    values = {"model": args.model, "weights": args.weights, "images": args.images,
              "k_values": args.k, "n_images": args.n_images, "input_size": args.img_size,
              "batch": args.batch_size, "n_boot": args.n_boot, "device": args.device,
              "data_root": args.data_root, "bf16": args.bf16 or None,
              "random_partitions": args.random_partitions, "fit_raptor": False}
    if args.fit_raptor is not None:
        if args.fit_raptor < 2:
            raise RunnerError(f"--fit-raptor must be at least 2 steps (one per stage), got "
                              f"{args.fit_raptor}")
        values |= {"fit_raptor": True, "stage1_steps": args.fit_raptor - args.fit_raptor // 2,
                   "stage2_steps": args.fit_raptor // 2}
    out = (args.out or Path("runs") / "analyze" / args.model).resolve()
    run("cpu", ["analyze"], {k: v for k, v in values.items() if v is not None}, build=False,
        out=out)
    for name in ("_config.yml", "references.bib", "_ext", "_static", "_vendor"):
        if (BOOK / name).is_dir():
            shutil.copytree(BOOK / name, out / name, dirs_exist_ok=True)
        else:
            shutil.copy(BOOK / name, out / name)
    (out / "_toc.yml").write_text("format: jb-book\nroot: chapters/analyze\n")
    build_book(out, strict=False)  # the book's cross-references are not in a one-page site
    print(f"the analysis: {out / '_build' / 'html' / 'chapters' / 'analyze.html'} (executed "
          f"notebook {out / 'chapters' / 'analyze.ipynb'}), its numbers: "
          f"{out / 'chapters' / 'analysis.json'}")
    return 0


def _retrain_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retrain-missing", action="store_true",
                        help="retrain a model whose artifact-tier file is missing or damaged "
                        "(default: an error naming the file)")


def _job_options(parser: argparse.ArgumentParser) -> None:
    """The options of a command that runs jobs (submitit)."""
    parser.add_argument("--executor", default="local", help=f"one of {', '.join(EXECUTORS)}")
    parser.add_argument("--folder", type=Path, default=Options.folder,
                        help="submitit's folder for the jobs' pickles and logs")
    parser.add_argument("--partition", help="SLURM partition")
    parser.add_argument("--time", type=int, default=Options.time_min, help="minutes per job")
    parser.add_argument("--gpus-per-node", type=int, default=Options.gpus_per_node,
                        help="SLURM: GPUs for each job")
    parser.add_argument("--array-parallelism", type=int, default=Options.array_parallelism,
                        help="SLURM: jobs of one array running at once")
    parser.add_argument("--ranks", type=int, default=Options.ranks,
                        help="processes (torchrun, DDP) per student job; default one per GPU "
                        "(--gpus-per-node) or 1")
    parser.add_argument("--cpus-per-task", type=int, default=Options.cpus_per_task,
                        help="SLURM: cores for each job")


def _options(args: argparse.Namespace) -> Options:
    return Options(args.executor, args.folder, args.partition, args.time, args.gpus_per_node,
                   args.array_parallelism, args.ranks, args.cpus_per_task)


def _artifacts(args: argparse.Namespace) -> int:
    if args.action == "verify":
        print(f"{_tier().verify(args.root)} artifacts match {args.root / MANIFEST}")
        return 0
    if args.action == "compare":
        return _compare_retrained(args.root, args.cache)
    if args.action == "stage":
        print(f"{len(_tier().stage(args.root)['entries'])} students staged in {args.root}")
        return 0
    if args.action == "unstage":
        print(f"{_tier().unstage(args.root)} entries of {args.root} written into the cache")
        return 0
    if args.log is None or not args.log.is_file():
        raise ArtifactError("export needs --log FILE: the $RAPTOR_CACHE_LOG written by a book run")
    manifest = _tier().export(args.log.read_text().split(), args.root)
    print(f"exported {len(manifest['entries'])} artifacts, "
          f"{manifest['total_bytes'] / 1e6:.1f} MB, to {args.root}")
    return 0


def _compare_retrained(root: Path, cache: Path | None) -> int:
    if cache is None or not cache.is_dir():
        raise ArtifactError(f"compare needs --cache DIR: a cache retrained from scratch, got "
                            f"{cache}")
    rows, unmatched = _tier().compare_retrained(root, cache)
    if not rows:
        raise ArtifactError(f"{cache} holds none of the {len(read_manifest(root))} entries of "
                            f"{root}")
    print("| entry | tensors | max abs diff | final metric (retrained / tier) "
          "| wall s (retrained / tier) |\n|---|---|---|---|---|")
    for r in rows:
        key = next((k for k in ("val_acc", "stage2_final_loss") if k in r["tier_metrics"]), None)
        metric = (f"{key} {r['metrics'].get(key, float('nan')):.4g} / {r['tier_metrics'][key]:.4g}"
                  if key else "—")
        print(f"| {r['name']} | {'identical' if r['identical'] else 'differ'} | "
              f"{r['max_abs_diff']:.3g} | {metric} | {r['wall_s']:.0f} / {r['tier_wall_s']:.0f} |")
    same = sum(r["identical"] for r in rows)
    print(f"{same} of {len(rows)} retrained entries are bit-identical to the tier's; "
          f"retraining took {sum(r['wall_s'] for r in rows) / 60:.1f} min "
          f"(the tier's records: {sum(r['tier_wall_s'] for r in rows) / 60:.1f} min)")
    if unmatched:
        print(f"{len(unmatched)} retrained entries have no counterpart in the tier (a student "
              f"whose retrained teacher has another max-cut partition): {', '.join(unmatched)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
