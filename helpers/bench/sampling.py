"""The samplers' benchmark, printed as JSON (`python -m helpers bench sampling`): batched greedy, plain sampling,
power sampling in both modes and SMC beside `generate` and the published batch-1 sampler, ratios measured side by
side in one run against their targets, and the slot engine beside vLLM where asked."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from helpers.bench.common import inputs, machine
from helpers.samplers.target import MH_MODES

if TYPE_CHECKING:
    from helpers.samplers.settings import Searches

SAMPLING_TARGETS = {"power_vs_published": {16: 7.0, 32: 10.0}, "power_decode_vs_generate_decode": 1.0,
                    "power_vs_plain": 0.95}
# Power sampling's decoding rate on Qwen2.5-Coder-0.5B in float32 at the book's batch (64 rows or more): half of
# what the matrix unit of 2 Zen 3 cores allows that model (about 180 tokens/s).
DECODE_RATE_TARGET = {"model": "qwen2.5-coder-0.5b", "dtype": "float32", "min_rows": 64, "tokens_per_second": 90.0}
ENGINE_TARGET = {"vllm_power_vs_transformers_power": 1.5}  # decoded tokens per second, exact mode, same dtype
JOBS = ("greedy", "plain_sampling", "power_exact", "power_reference", "smc")  # the batched jobs, by name


def bench_sampling(models: tuple[str, ...] = ("smollm2-135m",), problems: tuple[int, ...] = (16,),
                   max_new_tokens: int = 48, block_size: int = 16, mcmc_steps: int = 2, alpha: float = 4.0,
                   shots: int = 2, seed: int = 0, levels: tuple[int, ...] = (1, 2, 3, 4),
                   baseline: bool = True, repeats: int = 2, engines: tuple[str, ...] = ("slot",),
                   particles: int = 4, where: tuple[str, ...] = (), jobs: tuple[str, ...] | None = None,
                   dtype: str = "auto") -> dict:
    """Power sampling beside the published sampler, batched `generate` and plain sampling, per model and batch.

    For each model and each problem count n (all n chains in one batch; the first n problems, levels taken in
    turn, the same whichever counts the run holds): the published algorithm as its code runs it
    (the "generate" engine, `helpers.engines.generate`, batch 1, timed per problem, so one run of the largest n serves every n); plain batched
    `generate` of the same prompts at batch n, sampling T = 1/α for exactly `max_new_tokens` tokens, its prefill
    and decoding timed apart by a streamer; plain sampling and power sampling (both modes) in this project's
    engine, whose prefill time is measured apart.
    The batched runs repeat `repeats` times in turn (generate, plain, exact, reference, then again), and each
    rate is taken over all its repeats: one run of a 20-second job varies by up to 20% on two busy cores, which
    moved a ratio across its target from one run to the next. Prints three ratios against `SAMPLING_TARGETS`.

    With `engines` naming 'vllm' too, each batch also runs greedy decoding and power sampling (both modes) on
    the slot engine and on vLLM, in turn, and prints vLLM's rates against the slot engine's
    (`ENGINE_TARGET`); the vLLM engine's start-up is timed apart.

    `where` names jobs (of `JOBS`) to run once more at the largest batch, after the timed runs, under cProfile:
    the report's `where` says what kinds of work their time went to (`helpers.bench.where`). `jobs` times only
    the named batched jobs ("generate" and those of `JOBS`; None: all), e.g. one job at two batch sizes: a ratio
    whose jobs did not run is left out.
    """
    from helpers.core.checks import is_count
    from helpers.models.loading import load_model
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.settings import Searches, check_engine
    from helpers.samplers.smc import SMCConfig
    from helpers.samplers.target import Target

    for n in problems:
        if not is_count(n, 1):
            raise ValueError(f"--problems must be integers of at least 1, got {n!r}")
    if not levels:
        raise ValueError("--levels needs at least one arithmetic level, e.g. 1,2,3")
    if not is_count(repeats, 1):
        raise ValueError(f"--repeats must be an integer of at least 1, got {repeats!r}")
    unknown = sorted(set(where) - set(JOBS))
    if unknown:
        raise ValueError(f"--where takes jobs of {', '.join(JOBS)}; got {', '.join(unknown)}")
    jobs = ("generate", *JOBS) if jobs is None else tuple(jobs)
    unknown = sorted(set(jobs) - {"generate", *JOBS})
    if unknown or not jobs:
        raise ValueError(f"--jobs takes one or more of generate, {', '.join(JOBS)}; got {', '.join(unknown) or 'none'}")
    if not engines or "slot" not in engines:
        raise ValueError(f"--engine must include transformers (the baseline of every ratio), got {engines!r}")
    for engine in engines:
        check_engine(engine)
    if "vllm" in engines:
        from helpers.engines.vllm import require_vllm

        require_vllm()  # before any model is loaded: says what to install

    target = Target(alpha, max_new_tokens)  # every setting checked before any model is loaded or decoded
    s = Searches(target, PowerConfig(block_size=block_size, mcmc_steps=mcmc_steps).validate(target),
                 SMCConfig(particles=particles, block_size=block_size).validate(target))
    report = {"settings": {"alpha": alpha, "block_size": block_size, "mcmc_steps": mcmc_steps,
                           "max_new_tokens": max_new_tokens, "shots": shots, "levels": list(levels),
                           "repeats": repeats, "smc_particles": particles},
              "machine": machine(),
              "targets": {k: ({str(n): t for n, t in v.items()} if isinstance(v, dict) else v)
                          for k, v in SAMPLING_TARGETS.items()},
              "models": {}}
    for name in models:
        handle = load_model(name, dtype=dtype)
        model, tokenizer, info = handle.module, handle.tokenizer, handle.info
        report["models"][info.name] = {"dtype": info.dtype, **_bench_model(model, tokenizer, s, problems, shots,
                                                                             seed, levels, baseline, repeats, where,
                                                                             jobs)}
        if info.name == DECODE_RATE_TARGET["model"] and info.dtype == DECODE_RATE_TARGET["dtype"]:
            report["models"][info.name]["decode_rate_target"] = _decode_rate_verdict(
                report["models"][info.name]["batches"])
        if "vllm" in engines:
            report["models"][info.name]["engines"] = _bench_engines(handle, s, problems, shots, seed, levels, repeats)
    if "vllm" in engines:
        report["targets"].update(ENGINE_TARGET)
    return report


def _bench_engines(handle, s: Searches, problems, shots, seed, levels, repeats) -> dict:
    """Greedy decoding and power sampling (both modes) on the slot engine and on vLLM, side by side, each
    job from an empty vLLM prefix cache; and power sampling on vLLM again with the prompts cached ('warm')."""
    from helpers.engines.registry import make_engine, release_engines
    from helpers.samplers.plain import decode

    model = handle.module
    stops, prompts, seeds = inputs(model, handle.tokenizer, levels, max(problems), shots, seed)
    start = time.perf_counter()
    vllm = make_engine("vllm", handle)
    out: dict = {"vllm_start_seconds": round(time.perf_counter() - start, 1), "batches": {}}
    make = {"slot": lambda: make_engine("slot", model), "vllm": lambda: vllm}
    decode(model, prompts[:2], 4, stops, temperature=s.target.temperature, seeds=seeds[:2], engine=vllm)  # warm-up
    for n in problems:
        runs: dict[str, list[tuple[int, float, float]]] = {}
        jobs = _engine_jobs(model, prompts[:n], stops, seeds[:n], s)
        for _ in range(repeats):
            for engine_name, engine_of in make.items():
                for job, run in jobs.items():
                    if engine_name == "vllm":
                        vllm.reset_prefix_cache()  # every job encodes its prompts, as the slot engine's do
                    _timed(runs, f"{engine_name}_{job}", engine_of(), run)
            # as in a chapter, where greedy decodes come first: vLLM's cache holds the prompts (untimed) when power
            # sampling starts; the slot engine has no cache that outlives a run
            vllm.reset_prefix_cache()
            jobs["greedy"](vllm)
            _timed(runs, "vllm_power_exact_warm", vllm, jobs["power_exact"])
        row = {name: {k: v for k, v in _rates(each).items() if not k.startswith(("prefill", "decode_"))}
               for name, each in runs.items()}
        row["ratios"] = {f"vllm_{job}_vs_transformers_{job}": round(
            row[f"vllm_{job}"]["tokens_per_second"] / row[f"transformers_{job}"]["tokens_per_second"], 2)
            for job in ("greedy", "power_exact", "power_reference")}
        row["ratios"]["vllm_power_exact_warm_vs_transformers_power_exact"] = round(
            row["vllm_power_exact_warm"]["tokens_per_second"] / row["transformers_power_exact"]["tokens_per_second"], 2)
        out["batches"][str(n)] = row
    release_engines()
    return out


def _engine_jobs(model, prompts, stops, seeds, s: Searches) -> dict:
    """The engine bench's jobs, by name: each decodes `prompts` on the engine it is given."""
    from dataclasses import replace

    from helpers.samplers.plain import decode
    from helpers.samplers.power import run_chains

    def power(mode: str):
        return lambda engine: run_chains(engine, prompts, stops, s.target, replace(s.power, mode=mode), seeds)

    return {"greedy": lambda engine: decode(model, prompts, s.target.length, stops, engine=engine),
            "power_exact": power("exact"), "power_reference": power("reference")}


def _timed(runs: dict, name: str, engine, job) -> None:
    """Run `job` on `engine`; add (decoded tokens, seconds, 0) to `runs[name]`."""
    from helpers.engines.protocol import total

    begin = time.perf_counter()
    done = job(engine)
    runs.setdefault(name, []).append((total(done, "decoded_tokens"), time.perf_counter() - begin, 0.0))


def _decode_rate_verdict(batches: dict) -> dict:
    """Power sampling's decoding rate (both modes) at each batch of `DECODE_RATE_TARGET['min_rows']` rows or more,
    against its target."""
    target = DECODE_RATE_TARGET["tokens_per_second"]
    rates = {n: {mode: row[f"power_{mode}"]["decode_tokens_per_second"] for mode in MH_MODES if f"power_{mode}" in row}
             for n, row in batches.items() if int(n) >= DECODE_RATE_TARGET["min_rows"]}
    rates = {n: row for n, row in rates.items() if row}
    return {**DECODE_RATE_TARGET, "rates": rates,
            "met": bool(rates) and all(rate >= target for row in rates.values() for rate in row.values())}


def _bench_model(model, tokenizer, s, problems, shots, seed, levels, baseline, repeats, where: tuple[str, ...],
                 chosen: tuple[str, ...]) -> dict:
    from dataclasses import replace

    from helpers.engines.protocol import total
    from helpers.engines.registry import make_engine
    from helpers.samplers.plain import decode
    from helpers.samplers.power import run_chains

    stops, prompts, seeds = inputs(model, tokenizer, levels, max(problems), shots, seed)
    temperature, length = s.target.temperature, s.target.length
    decode(model, prompts[:2], 4, stops, temperature=temperature, seeds=seeds[:2])  # warm-up, untimed
    _generate(model, tokenizer, prompts[:2], 2, temperature)
    out: dict = {"layers": model.config.num_hidden_layers, "batches": {}}
    for n in problems:
        runs: dict[str, list[tuple[int, float, float]]] = {}  # per job: (tokens, seconds, prefill seconds) per run
        acceptance: dict[str, float] = {}
        jobs = {name: job for name, job in _batch_jobs(model, prompts[:n], stops, seeds[:n], s).items()
                if name in chosen}
        for _ in range(repeats):
            if "generate" in chosen:
                prefill, decoding = _generate(model, tokenizer, prompts[:n], length, temperature)
                runs.setdefault("generate", []).append((n * (length - 1), prefill + decoding, prefill))
            for name, job in jobs.items():
                engine = make_engine("slot", model)
                start = time.perf_counter()
                done = job(engine)
                runs.setdefault(name, []).append(
                    (total(done, "decoded_tokens"), time.perf_counter() - start, engine.prefill_seconds))
                if name.startswith("power_"):
                    acceptance[name] = round(sum(sum(c.acceptance) / max(1, len(c.acceptance)) for c in done) / n, 3)
        row: dict = {name: _rates(each) for name, each in runs.items()}
        if "generate" in row:
            row["generate"] = {"new_tokens": n * length, **{key: row["generate"][key] for key in (
                "prefill_seconds", "seconds", "seconds_each", "decode_tokens_per_second")}}
        for name, value in acceptance.items():
            row[name]["mean_acceptance"] = value
        out["batches"][str(n)] = row
    if baseline:
        per_problem = []
        published = replace(s.power, mode="reference")
        for prompt, seed_ in zip(prompts, seeds, strict=True):
            start = time.perf_counter()
            (chain,) = run_chains(make_engine("generate", model), [prompt], stops, s.target, published, [seed_])
            per_problem.append((time.perf_counter() - start, chain.decoded_tokens))
        for n in problems:
            seconds = sum(t for t, _ in per_problem[:n])
            out["batches"][str(n)]["published_batch1_generate"] = {
                "decoded_tokens": sum(k for _, k in per_problem[:n]), "seconds": round(seconds, 2)}
    if where:
        from helpers.bench.where import where_time_goes

        n = max(problems)
        jobs = _batch_jobs(model, prompts[:n], stops, seeds[:n], s)
        out["where"] = {"rows": n}
        for name in where:
            engine = make_engine("slot", model)
            done, split = where_time_goes(lambda job=jobs[name], engine=engine: job(engine))
            out["where"][name] = {"decoded_tokens": total(done, "decoded_tokens"),
                                  "prefill_seconds": round(engine.prefill_seconds, 2), **split}
    out["ratios"] = _ratios(out["batches"])
    return out


def _batch_jobs(model, prompts, stops, seeds, s: Searches) -> dict:
    """The jobs of one batch of `len(prompts)` rows on the slot engine, by name: greedy decoding, plain sampling at
    T = 1/α, power sampling in both modes (a chain per prompt) and SMC (K particles for each of the first n // K
    prompts, so that it too decodes n rows at once)."""
    from dataclasses import replace

    from helpers.samplers.plain import decode
    from helpers.samplers.power import run_chains
    from helpers.samplers.smc import run_smc

    n, length = len(prompts), s.target.length
    groups = max(1, n // s.smc.particles)
    return {"greedy": lambda engine: decode(model, prompts, length, stops, engine=engine),
            "plain_sampling": lambda engine: decode(model, prompts, length, stops, temperature=s.target.temperature,
                                                    seeds=seeds, engine=engine),
            "power_exact": lambda engine: run_chains(engine, prompts, stops, s.target, replace(s.power, mode="exact"), seeds),
            "power_reference": lambda engine: run_chains(engine, prompts, stops, s.target, replace(s.power, mode="reference"),
                                                         seeds),
            "smc": lambda engine: run_smc(engine, prompts[:groups], stops, s.target, s.smc, seeds[:groups])}


def _generate(model, tokenizer, prompts, new_tokens: int, temperature: float) -> tuple[float, float]:
    """(prefill, decode) seconds of batched `generate` sampling exactly `new_tokens` tokens per left-padded prompt.

    A streamer stamps the moment the first new tokens arrive: before it is the prefill (and the first token),
    after it the decoding of the other `new_tokens` - 1 tokens per row.
    """
    from transformers.generation.streamers import BaseStreamer

    class Clock(BaseStreamer):
        def __init__(self):
            self.stamps = []

        def put(self, value):
            self.stamps.append(time.perf_counter())

        def end(self):
            self.stamps.append(time.perf_counter())

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    clock = Clock()
    start = time.perf_counter()
    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                   do_sample=True, temperature=temperature, top_k=0, top_p=1.0, pad_token_id=pad, streamer=clock)
    first_token = clock.stamps[1]  # stamps: the prompt, then each step's new tokens, then the end
    return first_token - start, clock.stamps[-1] - first_token


def _rates(runs: list[tuple[int, float, float]]) -> dict:
    """Mean seconds per run and rates over all runs, from (tokens, seconds, prefill seconds) of each run.

    A decode rate counts the time after the prefill; for `generate` the tokens are those decoded after the first.
    """
    tokens, seconds, prefill = (sum(column) for column in zip(*runs, strict=True))
    return {"decoded_tokens": runs[0][0], "seconds": round(seconds / len(runs), 2),
            "seconds_each": [round(s, 2) for _, s, _ in runs], "prefill_seconds": round(prefill / len(runs), 2),
            "tokens_per_second": round(tokens / seconds, 1),
            "decode_tokens_per_second": round(tokens / (seconds - prefill), 1)}


def _ratios(batches: dict) -> dict:
    """The three ratios of `SAMPLING_TARGETS` per batch size, each beside its target, those whose jobs ran."""
    out = {}
    for n, row in batches.items():
        ratios: dict = {}
        for name, other, key in (("power_decode_vs_generate_decode", "generate", "decode_tokens_per_second"),
                                 ("power_vs_plain", "plain_sampling", "tokens_per_second")):
            modes = {mode: round(row[f"power_{mode}"][key] / row[other][key], 2)
                     for mode in MH_MODES if f"power_{mode}" in row and other in row}
            if modes:
                ratios[name] = modes
        if "published_batch1_generate" in row and "power_reference" in row:
            ratios["power_vs_published"] = round(row["published_batch1_generate"]["seconds"]
                                                 / row["power_reference"]["seconds"], 2)
        out[n] = ratios
    return out


