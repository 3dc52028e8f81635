"""Subcommands of `python -m helpers` beyond `run`; each registers its own parser."""

from __future__ import annotations

import argparse


def _truncate(args: argparse.Namespace) -> int:
    from helpers.data import DataError
    from helpers.decoding import decode
    from helpers.models import load_model, stop_token_ids
    from helpers.truncation import truncate

    if not args.prompt or not args.prompt.strip():
        raise DataError("--prompt must not be empty")
    model, tokenizer, info = load_model(args.model)
    shallow = truncate(model, args.depth, args.method)
    if info.chat and not args.raw:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}], add_generation_prompt=True,
                                            tokenize=True)
        ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
    else:
        ids = tokenizer(args.prompt)["input_ids"]
    (completion,), stats = decode(shallow, [ids], args.max_new_tokens, stop_token_ids(model, tokenizer))
    kept = shallow.config.truncation["kept_blocks"]
    print(f"# {info.name}: {args.method} truncation to depth {args.depth} of {info.n_layers} "
          f"(blocks {kept[0]}..{kept[-2] if len(kept) > 1 else kept[0]}"
          f"{', ' + str(kept[-1]) if args.method == 'stitch' else ''}); {stats.decoded_tokens} tokens in "
          f"{stats.seconds:.1f} s")
    print(tokenizer.decode(completion.tokens, skip_special_tokens=True))
    return 0


def register_truncate(sub) -> None:
    p = sub.add_parser("truncate", help="greedy continuation of a truncated model")
    p.add_argument("--model", default="smollm2-135m", help="known name, hub id or local directory")
    p.add_argument("--depth", type=int, required=True, help="number of blocks the model runs")
    p.add_argument("--method", choices=("stitch", "naive"), default="stitch")
    p.add_argument("--prompt", required=True, help="the user message (chat models) or raw text")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--raw", action="store_true", help="do not apply the chat template")
    p.set_defaults(func=_truncate)


def register_bench(sub) -> None:
    from helpers.bench import register_bench as register

    register(sub)


def register_effective_depth(sub) -> None:
    from helpers.depth import register_cli

    register_cli(sub)


def _glued_rows(where: str) -> list[dict]:
    import json
    from pathlib import Path

    from helpers.data import DataError
    from helpers.glued import collect
    from helpers.run import toc_chapters

    path = Path(where)
    if path.is_dir():
        return collect(path, toc_chapters())
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    raise DataError(f"{where} is neither a glued_values.json file nor a folder of executed chapters "
                    "(book/chapters after `python -m helpers run`)")


def _glued_diff(args: argparse.Namespace) -> int:
    import json

    from helpers.glued import diff

    before, after = _glued_rows(args.before), _glued_rows(args.after)
    moved = diff(before, after, rel=args.rel)
    print(json.dumps({"compared": len(before), **moved}, indent=1, ensure_ascii=False, default=str))
    return 1 if any(moved.values()) else 0


def register_glued(sub) -> None:
    p = sub.add_parser("glued-diff", help="compare the glued values of two builds (exit 1 when any moved)")
    p.add_argument("before", help="a glued_values.json, or a folder of executed chapters (e.g. book/chapters)")
    p.add_argument("after", help="the same, for the other build")
    p.add_argument("--rel", type=float, default=1e-9, help="relative tolerance for numbers (default 1e-9)")
    p.set_defaults(func=_glued_diff)


REGISTRY: list = [register_truncate, register_bench, register_effective_depth, register_glued]
