"""SMC's particles waiting at a barrier: do the slot engine's passes run faster when the waiting slots are left out
than when they ride along, and is it faster to leave them out by gathering the busy rows' keys and values in every
pass or by moving the busy rows into the lowest slots once? The three settings side by side, in turn."""

from __future__ import annotations

import time


def bench_barriers(model_name: str, groups: int, particles: int, max_new_tokens: int, block_size: int,
                   shots: int, repeats: int = 2, gather_above: float = 0.125, dtype: str = "auto") -> dict:
    """SMC on `groups` problems × `particles` particles (one batch), resampling checks every `block_size` tokens:
    decoded tokens/s with waiting slots riding along (`gather_above` = 1, never left out), and left out of the pass
    past the engine's `gather_above` by gathering (`pack` off) or by packing (`pack` on, the engine's way); the same
    seeds, so all three decode the same tokens up to rounding."""
    from helpers.bench.common import inputs, machine
    from helpers.core.checks import is_count
    from helpers.engines.registry import make_engine
    from helpers.models.loading import load_model
    from helpers.samplers.smc import SMCConfig, run_smc
    from helpers.samplers.target import Target

    for name, value in (("--groups", groups), ("--particles", particles), ("--repeats", repeats)):
        if not is_count(value, 1):
            raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")
    target, cfg = Target(2.0, max_new_tokens), SMCConfig(particles=particles, block_size=block_size).validate()
    handle = load_model(model_name, dtype=dtype)
    model, tokenizer, info = handle.module, handle.tokenizer, handle.info
    stops, prompts, seeds = inputs(model, tokenizer, (3, 4), groups, shots, 0)
    run_smc(make_engine("slot", model), prompts[:1], stops, Target(2.0, 4), SMCConfig(particles=2, block_size=2),
            [0])  # first-call costs stay out
    settings = {"ride_along": (1.0, True), "gathered": (gather_above, False), "packed": (gather_above, True)}
    rates: dict[str, list[float]] = {label: [] for label in settings}
    busy: dict[str, list[float]] = {label: [] for label in settings}
    for _ in range(repeats):
        for label, (share, pack) in settings.items():
            engine = make_engine("slot", model)
            engine.gather_above, engine.pack = share, pack  # this engine's settings (the class keeps the book's)
            start = time.perf_counter()
            done = run_smc(engine, prompts, stops, target, cfg, seeds)
            seconds = time.perf_counter() - start - engine.prefill_seconds
            tokens = sum(c.decoded_tokens for c in done)
            rates[label].append(tokens / seconds)
            busy[label].append(tokens / engine.passes)
    mean = {k: sum(v) / len(v) for k, v in rates.items()}
    return {"machine": machine(), "model": info.name, "rows": groups * particles, "max_new_tokens": max_new_tokens,
            "block_size": block_size, "gather_above": gather_above,
            "decode_tokens_per_second": {k: [round(x, 1) for x in v] for k, v in rates.items()},
            "busy_rows_per_pass": round(sum(busy["ride_along"]) / len(busy["ride_along"]), 1),
            "ratio_gathered_vs_ride_along": round(mean["gathered"] / mean["ride_along"], 3),
            "ratio_packed_vs_ride_along": round(mean["packed"] / mean["ride_along"], 3),
            "ratio_packed_vs_gathered": round(mean["packed"] / mean["gathered"], 3)}
