"""Command line: ``python -m raptor run [--profile P] [--chapter C ...] [-p NAME VALUE ...]``."""

from __future__ import annotations

import argparse
import sys

from raptor.profiles import CHAPTERS, PROFILES
from raptor.runner import RunnerError, build_book, parse_value, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raptor",
                                     description="Execute the Raptor companion's chapters.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="execute chapters with papermill, then build the book")
    p_run.add_argument("--profile", default="cpu", help=f"one of {', '.join(PROFILES)}")
    p_run.add_argument("--chapter", action="append", dest="chapters",
                       help=f"repeatable; default all: {', '.join(CHAPTERS)}")
    p_run.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                       help="override a papermill parameter (Python literal or string)")
    p_run.add_argument("--no-build", action="store_true", help="do not build the book")
    sub.add_parser("build", help="jupyter-book build book/ (no execution)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build_book()
        else:
            overrides = {name: parse_value(value) for name, value in args.p}
            run(args.profile, args.chapters, overrides, build=not args.no_build)
    except RunnerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
