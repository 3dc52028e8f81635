"""Command line: `python -m helpers run|truncate|bench|effective-depth ...` (see `--help` of each)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_run(args: argparse.Namespace) -> int:
    from helpers.run import REPO, parse_overrides, run

    run(args.profile, parse_overrides(args.param), only=args.only, out_root=Path(args.out) if args.out else REPO,
        build=not args.no_build, strict=args.strict)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m helpers", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="execute the chapters under a profile and build the book")
    p.add_argument("--profile", default="default", help="a profile in notebooks/profiles/ (smoke, default, paper, ...)")
    p.add_argument("--only", help="execute only this chapter (e.g. 02_logit_lens); the others must exist")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter (value read as YAML); repeatable")
    p.add_argument("--out", help="write book/chapters and _build under this folder instead of the repository")
    p.add_argument("--no-build", action="store_true", help="execute the notebooks but do not build the book")
    p.add_argument("--strict", action="store_true", help="treat stderr output in a notebook as an error")
    p.set_defaults(func=_cmd_run)

    for register in _extra_commands():
        register(sub)
    return parser


def _extra_commands():
    """Subcommands that live next to their library code."""
    from helpers import cli_commands

    return cli_commands.REGISTRY


def main(argv: list[str] | None = None) -> int:
    from helpers.data import DataError
    from helpers.models import ModelLoadError
    from helpers.run import RunError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (RunError, ModelLoadError, DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished records are kept in the results store and a re-run resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
