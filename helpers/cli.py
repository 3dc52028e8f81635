"""The command line, `python -m helpers COMMAND`: every subcommand's arguments and what it runs, in one place.

run              execute the chapters under a profile and build the book
truncate         greedy continuation of a truncated model
effective-depth  the three effective depths of a model on a problem set, as JSON
bench            benchmarks that print measured ratios as JSON
glued-diff       compare the glued values of two builds
install-models   install the wheels of a profile's embedded models
notebook-code    lines of code, definitions and loops in the chapter notebooks
release          the results release: add the local store's checked records, or say what it holds
audit            re-derive released decodes with the model here (teacher-forced log-probs, greedy argmax, counts)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

BUDGET_SPENT = 3  # `run --budget` stopped with work left: the same command again goes on


def parse_duration(text: str) -> float:
    """Seconds from '150m', '2.5h', '90s' or a plain number of seconds; a clear error otherwise."""
    units = {"s": 1, "m": 60, "h": 3600}
    body, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        value = float(body) * unit
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise argparse.ArgumentTypeError(f"a duration is a positive time such as 150m, 2.5h or 90s, not {text!r}")
    return value


def _cmd_run(args: argparse.Namespace) -> int:
    import os

    from helpers.core import env
    from helpers.core.budget import BudgetSpent
    from helpers.runner.profiles import RunError, parse_overrides
    from helpers.runner.run import run

    overrides = parse_overrides(args.param)
    if args.dtype is not None:
        overrides["dtype"] = args.dtype
    if args.only is not None and len(args.only) > 1:
        raise RunError(f"--only takes one chapter, given {len(args.only)} ({', '.join(args.only)}): run them one "
                       "after the other, or write a profile whose 'chapters' lists them.")
    only = args.only[0] if args.only else None
    if args.no_release:
        os.environ[env.RELEASE] = "off"  # the kernels inherit it
    try:
        run(args.profile, overrides, only=only, out_root=Path(args.out) if args.out else env.REPO,
            build=not args.no_build, strict=args.strict, budget=args.budget,
            recompute=args.recompute or args.no_release)
    except BudgetSpent as spent:
        print(f"[run] budget spent: {spent}. Every finished record is in the results store; run the same command "
              "again to go on.", flush=True)
        return BUDGET_SPENT
    return 0


def _truncate(args: argparse.Namespace) -> int:
    from helpers.data.problems import DataError
    from helpers.data.prompts import chat_ids
    from helpers.models.loading import context_length, load_model, stop_token_ids
    from helpers.samplers.plain import decode

    if not args.prompt or not args.prompt.strip():
        raise DataError("--prompt must not be empty")
    _tokens_fit(args.max_new_tokens, context_length(args.model))  # known models: before loading anything
    model = load_model(args.model, dtype=args.dtype)
    info, tokenizer = model.info, model.tokenizer
    _tokens_fit(args.max_new_tokens, getattr(model.config, "max_position_embeddings", None))
    shallow = model.truncated(args.depth, args.method)
    if info.chat and not args.raw:
        ids = chat_ids(tokenizer, [{"role": "user", "content": args.prompt}])
    else:
        ids = tokenizer(args.prompt)["input_ids"]
    (completion,) = decode(shallow.module, [ids], args.max_new_tokens, stop_token_ids(model.module, tokenizer))
    print(f"# {info.name}: {args.method} truncation to depth {args.depth} of {info.n_layers} "
          f"(blocks {block_ranges(shallow.truncation.kept_blocks)}); {completion.decoded_tokens} tokens in "
          f"{completion.seconds:.1f} s")
    print(tokenizer.decode(completion.tokens, skip_special_tokens=True))
    return 0


def _tokens_fit(tokens: int, context: int | None) -> None:
    """--max-new-tokens at least 1 and at most half the model's context (the prompt needs the rest)."""
    if tokens < 1:
        raise ValueError(f"--max-new-tokens must be at least 1, got {tokens}")
    if context and tokens > context // 2:
        raise ValueError(f"--max-new-tokens {tokens:,} does not fit the model's context of {context:,} tokens with "
                         f"the prompt; use at most {context // 2:,}")


def block_ranges(kept: list[int]) -> str:
    """Kept block indices as runs: [0, 1, 2, 3] → '0..3'; [0, 1, 2, 29] → '0..2, 29'."""
    runs: list[list[int]] = []
    for b in kept:
        if runs and b == runs[-1][-1] + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _effective_depth(args: argparse.Namespace) -> int:
    import torch

    from helpers.interp.depth import effective_depth_report
    from helpers.runner.params import MAX_COUNT

    if not 1 <= args.n <= MAX_COUNT:
        raise ValueError(f"--n must be a number of problems from 1 to {MAX_COUNT:,}, got {args.n}")
    if not 0 < args.kl_fraction < 1:  # NaN fails every comparison
        raise ValueError(f"--kl-fraction must lie strictly between 0 and 1 (a share of the KL curve's maximum), got "
                         f"{args.kl_fraction}")
    if not 0 <= args.overlap_threshold < 1:
        raise ValueError(f"--overlap-threshold must lie in [0, 1) (a share of the top-5 tokens), got "
                         f"{args.overlap_threshold}")
    with torch.no_grad():  # not set_grad_enabled(False): main() runs inside other programs (and tests) too
        report = effective_depth_report(args.model, args.dataset, args.n, args.reduction, args.kl_fraction,
                                        args.overlap_threshold, dtype=args.dtype)
    print(json.dumps(report, indent=2))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from helpers.bench.memory import bench_effective_depth
    from helpers.bench.sampling import bench_sampling
    from helpers.bench.throughput import bench_throughput

    if args.what == "throughput":
        sizes = _integers(args.batch_sizes, "--batch-sizes", "1,8,32")
        if any(b < 1 for b in sizes):
            raise ValueError(f"--batch-sizes must be positive integers such as 1,8,32; got {args.batch_sizes!r}")
        print(json.dumps(bench_throughput(args.model, sizes, args.max_new_tokens, args.shots,
                                          with_generate=not args.no_generate, dtype=args.dtype), indent=2))
        return 0
    if args.what == "effective-depth":
        print(json.dumps(bench_effective_depth(args.profile), indent=2))
        return 0
    if args.what == "barriers":
        from helpers.bench.barriers import bench_barriers

        (groups,) = _integers(args.problems, "--problems", "8")
        print(json.dumps(bench_barriers(args.model, groups, args.particles, args.max_new_tokens, args.block_size,
                                        args.shots, args.repeats, dtype=args.dtype), indent=2))
        return 0
    if args.what == "rows":
        from helpers.bench.rows import bench_rows

        engines = tuple(e.strip() for e in args.engine.split(",") if e.strip())
        print(json.dumps(bench_rows(_integers(args.rows, "--rows", "1000,4000"), args.particles, args.max_new_tokens,
                                    args.block_size, engines), indent=2))
        return 0
    if args.what == "dtype":
        from helpers.bench.dtype import bench_dtype

        counts = _integers(args.problems, "--problems", "16,64,128")
        print(json.dumps(bench_dtype(args.model, counts, args.max_new_tokens, args.shots), indent=2))
        return 0
    if args.what == "kernels":
        from helpers.bench.kernels import bench_kernels

        print(json.dumps(bench_kernels(), indent=2))
        return 0
    if args.what == "depth-sweep":
        from helpers.bench.depth_sweep import bench_depth_sweep

        (n,) = _integers(args.problems, "--problems", "16")
        print(json.dumps(bench_depth_sweep(args.model, n, args.span, args.max_new_tokens, args.shots,
                                           _integers(args.levels, "--levels", "5,6"), dtype=args.dtype),
                         indent=2))
        return 0
    levels = _integers(args.levels, "--levels", "1,2,3")
    problems = _integers(args.problems, "--problems", "16,32")
    models = tuple(m.strip() for m in args.model.split(",") if m.strip())
    if not models:
        raise ValueError(f"--model needs at least one model name, e.g. smollm2-135m; got {args.model!r}")
    engines = tuple(e.strip() for e in args.engine.split(",") if e.strip())
    print(json.dumps(bench_sampling(models, problems, args.max_new_tokens, args.block_size, args.steps,
                                    args.alpha, args.shots, levels=levels, baseline=not args.no_baseline,
                                    repeats=args.repeats, engines=engines, particles=args.particles,
                                    where=tuple(j.strip() for j in args.where.split(",") if j.strip()),
                                    jobs=tuple(j.strip() for j in args.jobs.split(",") if j.strip()) if args.jobs
                                    else None, dtype=args.dtype), indent=2))
    return 0


def _integers(text: str, flag: str, example: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated integers such as {example}; got {text!r}") from None
    return values


def _glued_diff(args: argparse.Namespace) -> int:
    from helpers.runner.glued import diff, read_rows

    if not (math.isfinite(args.rel) and args.rel >= 0):
        raise ValueError(f"--rel must be a finite tolerance of 0 or more, got {args.rel}")
    before, after = read_rows(args.before), read_rows(args.after)
    moved = diff(before, after, rel=args.rel)
    print(json.dumps({"compared": len(before), **moved}, indent=1, ensure_ascii=False, default=str))
    return 1 if any(moved.values()) else 0


def _install_models(args: argparse.Namespace) -> int:
    from helpers.runner.installs import install_models

    installed = install_models(args.profile)
    print(f"installed {' '.join(installed)}" if installed else f"the models of profile {args.profile!r} are installed")
    return 0


def _notebook_code(args: argparse.Namespace) -> int:
    from helpers.runner.notebook_code import measure_all

    folder = Path(args.folder)
    if not folder.is_dir() or not any(folder.glob("*.ipynb")):
        raise ValueError(f"{args.folder} is not a folder of notebooks (*.ipynb); the chapters are in notebooks/")
    print(json.dumps(measure_all(folder), indent=1))
    return 0


def _release(args: argparse.Namespace) -> int:
    from helpers.runner import publish

    if args.action == "status":
        print(publish.status(Path(args.release) if args.release else None))
        return 0
    if args.action == "drop-checkpoints":
        return _drop_checkpoints(args)
    batch = publish.add(Path(args.store) if args.store else None, Path(args.release) if args.release else None,
                        Path(args.build) if args.build else None, args.commit, dry_run=args.dry_run,
                        chapter=args.chapter)
    lines, released = publish.add_report(batch, args.dry_run)
    print("\n".join(lines))
    return 0 if released else 1


def _drop_checkpoints(args: argparse.Namespace) -> int:
    from helpers.results.release import ReleaseError, drop_checkpoints, release_root

    runs = [tuple(run.split("/", 1)) for run in args.run or []]
    if not runs or any(len(run) != 2 or not all(run) for run in runs):
        print("Name each run whose checkpoints to drop as --run EXPERIMENT/CONFIG_HASH (`release status` lists "
              "them).", file=sys.stderr)
        return 2
    root = Path(args.release) if args.release else release_root()
    if root is None:
        print("There is no release here (release/manifest.json is absent, or SVD_RELEASE=off).", file=sys.stderr)
        return 2
    try:
        chains = drop_checkpoints(root, runs)
    except ReleaseError as err:
        print(err, file=sys.stderr)
        return 2
    print(f"dropped the checkpoints of {chains} chains from the release; its records are unchanged")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from helpers.runner.auditing import run_audit

    return run_audit(store=args.store, release=args.release, since=args.since, batch=args.batch, sample=args.sample,
                     every=args.all, seed=args.seed, findings=args.findings, resume=args.resume)


def _dtype_flag(parser: argparse.ArgumentParser, default: str | None = "auto") -> None:
    """`--dtype`, passed to what the command loads; `run` leaves it None, so that the profile's `dtype` decides."""
    from helpers.models.precision import CHOICES

    parser.add_argument("--dtype", choices=CHOICES, default=default,
                        help="the models' weights and activations: auto (default: float32, or bfloat16 on a GPU "
                        "that computes it natively and on a CPU where `bench dtype` measured it faster), float32 or "
                        "bfloat16")


def build_parser() -> argparse.ArgumentParser:
    prog = "search-vs-depth" if Path(sys.argv[0]).name == "search-vs-depth" else "python -m helpers"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="execute the chapters under a profile and build the book")
    p.add_argument("--profile", default="default", help="a profile in notebooks/profiles/ (smoke, default, paper, ...) or a path to your own YAML file")
    p.add_argument("--only", action="append", help="execute only this chapter (e.g. 02_logit_lens); the others must "
                   "exist")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter (value read as YAML); repeatable")
    p.add_argument("--out", help="write book/chapters and _build under this folder instead of the repository")
    p.add_argument("--no-build", action="store_true", help="execute the notebooks but do not build the book")
    p.add_argument("--strict", action="store_true", help="treat stderr output in a notebook as an error")
    p.add_argument("--budget", type=parse_duration, metavar="TIME",
                   help="stop when this much time is spent (150m, 2.5h, 90s), every finished record stored; exit "
                   f"status {BUDGET_SPENT} says work is left and the same command goes on")
    p.add_argument("--no-release", action="store_true",
                   help="ignore the results release (release/): recompute what the local store lacks")
    p.add_argument("--recompute", action="store_true",
                   help="compute what neither the release nor the local store holds, also for a profile marked "
                   "released (full, default), whose builds otherwise stop before any such work")
    _dtype_flag(p, default=None)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("truncate", help="greedy continuation of a truncated model")
    p.add_argument("--model", default="smollm2-135m", help="known name, hub id or local directory")
    p.add_argument("--depth", type=int, required=True, help="number of blocks the model runs")
    p.add_argument("--method", choices=("stitch", "naive"), default="stitch")
    p.add_argument("--prompt", required=True, help="the user message (chat models) or raw text")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--raw", action="store_true", help="do not apply the chat template")
    _dtype_flag(p)
    p.set_defaults(func=_truncate)

    p = sub.add_parser("effective-depth", help="the three effective depths of a model on a problem set, as JSON")
    p.add_argument("--model", default="smollm2-135m", help="known name, hub id or local directory")
    p.add_argument("--dataset", default="arithmetic", help="arithmetic, math500, gsm8k or a JSON/JSONL file")
    p.add_argument("--n", type=int, default=12, help="number of problems (levels taken in turn)")
    p.add_argument("--reduction", choices=("tokens", "prompts"), default="tokens")
    p.add_argument("--kl-fraction", type=float, default=0.5)
    p.add_argument("--overlap-threshold", type=float, default=0.3)
    _dtype_flag(p)
    p.set_defaults(func=_effective_depth)

    p = sub.add_parser("bench", help="benchmarks that print measured ratios as JSON")
    p.add_argument("what", choices=["sampling", "effective-depth", "throughput", "depth-sweep", "barriers", "rows",
                                    "dtype", "kernels"])
    p.add_argument("--model", default="smollm2-135m", help="sampling: comma-separated models, e.g. "
                   "smollm2-135m,qwen2.5-coder-0.5b")
    p.add_argument("--problems", default="16", help="sampling: comma-separated problem counts (one batch each), "
                   "e.g. 16,32")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--alpha", type=float, default=4.0)
    p.add_argument("--shots", type=int, default=2)
    p.add_argument("--profile", default="default", help="effective-depth: the profile to run chapter 01 under")
    p.add_argument("--batch-sizes", default="1,8,32,64", help="throughput: comma-separated batch sizes")
    p.add_argument("--no-generate", action="store_true", help="throughput: skip the transformers generate baseline")
    p.add_argument("--levels", default="1,2,3,4", help="sampling: comma-separated arithmetic levels of the problems")
    p.add_argument("--no-baseline", action="store_true",
                   help="sampling: skip the slow published sampler (batch-1 generate per proposal)")
    p.add_argument("--repeats", type=int, default=2,
                   help="sampling: runs of each batched job, taken in turn; rates are over all of them")
    p.add_argument("--span", type=int, default=4,
                   help="depth-sweep: the depths below the full one swept, stitched and naive (chapter 03's span)")
    p.add_argument("--rows", default="1000,4000,16000,64000",
                   help="rows: comma-separated run sizes in rows (SMC particles), each one engine run")
    p.add_argument("--particles", type=int, default=4,
                   help="sampling: SMC's particles per problem (its batch of n rows holds n // particles problems)")
    p.add_argument("--where", default="", help="sampling: comma-separated jobs (greedy, plain_sampling, "
                   "power_exact, power_reference, smc) to run once more at the largest batch under cProfile, to say "
                   "where their time goes")
    p.add_argument("--jobs", default="", help="sampling: comma-separated batched jobs to time (generate, greedy, "
                   "plain_sampling, power_exact, power_reference, smc; default all), e.g. power_reference alone at "
                   "two batch sizes")
    p.add_argument("--engine", default="slot",
                   help="sampling: slot, or slot,vllm to time vLLM beside it (run from the vLLM "
                        "environment: .venv-vllm/bin/python -m helpers bench sampling --engine slot,vllm)")
    _dtype_flag(p)
    p.set_defaults(func=_bench)

    p = sub.add_parser("glued-diff", help="compare the glued values of two builds (exit 1 when any moved)")
    p.add_argument("before", help="a glued_values.json, or a folder of executed chapters (e.g. book/chapters)")
    p.add_argument("after", help="the same, for the other build")
    p.add_argument("--rel", type=float, default=1e-9, help="relative tolerance for numbers (default 1e-9)")
    p.set_defaults(func=_glued_diff)

    p = sub.add_parser("install-models", help="install the wheels of a profile's embedded models")
    p.add_argument("--profile", default="default")
    p.set_defaults(func=_install_models)

    p = sub.add_parser("notebook-code", help="lines of code, definitions and loops in the chapter notebooks")
    p.add_argument("folder", nargs="?", default="notebooks")
    p.set_defaults(func=_notebook_code)

    p = sub.add_parser("release", help="the results release: add the local store's checked records, or show it")
    p.add_argument("action", choices=("add", "status", "drop-checkpoints"),
                   help="add: release the local store's records the release lacks, each checked (shape, key, "
                   "weights), as one new batch; status: what the release holds; drop-checkpoints: take the "
                   "checkpoints of the chains of the --run runs out of it (a configuration no profile computes any "
                   "more)")
    p.add_argument("--store", help="the local store to add from (default: SVD_RESULTS or results/)")
    p.add_argument("--release", help="the release folder (default: release/ in the checkout)")
    p.add_argument("--build", help="the folder of the build whose run_config.json says which chapter used which "
                   "records (default: the checkout)")
    p.add_argument("--commit", help="the commit that computed the records (default: HEAD)")
    p.add_argument("--chapter", help="count every record of this batch under this chapter (a step that ran one)")
    p.add_argument("--dry-run", action="store_true", help="check and count, write nothing")
    p.add_argument("--run", action="append", metavar="EXPERIMENT/CONFIG_HASH",
                   help="drop-checkpoints: a run whose checkpoints to drop (repeat for more)")
    p.set_defaults(func=_release)

    p = sub.add_parser("audit", help="compute released records again with the model on this machine")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--sample", type=int, default=20, metavar="K",
                       help="audit K random records of each kind: decodes, lens curves, ... (default 20)")
    which.add_argument("--all", action="store_true", help="audit every released record (of the chosen batches)")
    p.add_argument("--batch", action="append", metavar="NAME", help="audit only this batch's records (repeatable)")
    p.add_argument("--since", metavar="REF", help="audit only the batches the release gained since git commit REF "
                   "(what a push added)")
    p.add_argument("--seed", type=int, default=0, help="which K records --sample draws")
    p.add_argument("--release", help="the release folder (default: release/ in the checkout)")
    p.add_argument("--store", help="audit a local results store's records instead (e.g. results/, before adding them)")
    p.add_argument("--findings", metavar="FILE", help="write each record's finding (deviations, completion length, "
                   "problems) to FILE as a JSON line the moment it is audited")
    p.add_argument("--resume", action="store_true", help="go on from an audit that stopped: the records whose "
                   "findings in FILE (--findings) passed are not audited again; its failures are")
    p.set_defaults(func=_audit)
    return parser


def main(argv: list[str] | None = None) -> int:
    from helpers.data.problems import DataError
    from helpers.models.registry import ModelLoadError
    from helpers.results.release import ReleaseError
    from helpers.results.store import StoreError
    from helpers.runner.profiles import RunError

    args = build_parser().parse_args(argv)
    from helpers.core.quiet import quiet_host
    from helpers.results import origin

    quiet_host()  # the command line's own process: the known chatter of transformers and torch off

    origin.read_now()  # records stored by this command name the code it started with
    try:
        return args.func(args)
    except (RunError, ModelLoadError, DataError, StoreError, ReleaseError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted; finished records are kept in the results store and a re-run resumes", file=sys.stderr)
        return 130
