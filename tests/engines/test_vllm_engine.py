"""The vLLM engine, verified as the slot engine is: exact targets on an enumerable model, the published
algorithm's law, per-token log p and log q, and greedy decodes that agree with the slot engine.

These run where vLLM is installed (`make test-vllm`, an environment of its own: vLLM's CPU build pins its own
transformers); elsewhere they are skipped, unless SVD_REQUIRE_VLLM=1 makes a missing vLLM a failure.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.engines.slot import SlotEngine
from helpers.samplers.plain import decode
from helpers.samplers.power import PowerConfig, run_chains
from helpers.samplers.smc import SMCConfig, run_smc
from helpers.samplers.target import Target
from helpers.samplers.toy import draw_exact, empirical, noise_floor, sequence_logprob, tv_distance

pytestmark = pytest.mark.vllm

try:
    from helpers.engines.vllm import VLLMEngine, require_vllm

    VERSION = require_vllm()
except Exception as err:
    if os.environ.get("SVD_REQUIRE_VLLM") == "1":
        raise
    pytest.skip(f"vLLM is not usable here ({err})", allow_module_level=True)

ALPHA, T, N = 2.0, 3, 1000  # exponent, completion length, chains (or samples) per law
PROMPT = [0, 1]


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """A random Llama with a vocabulary of 6 whose 216 completions of 3 tokens can be enumerated, its exact
    laws, and a vLLM engine on its checkpoint."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from helpers.models.checkpoints import write_checkpoint

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=6, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=64,
                         bos_token_id=0, eos_token_id=5, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(40)  # peaked enough that p^α and T = 1/α sampling differ by 7x the noise
    folder = write_checkpoint(model, None, tmp_path_factory.mktemp("six") / "model")
    seqs = list(itertools.product(range(6), repeat=T))
    logp = torch.tensor([sequence_logprob(model, PROMPT, s) for s in seqs])
    low = torch.tensor([sequence_logprob(model, PROMPT, s, 1 / ALPHA) for s in seqs])
    laws = {"power": dict(zip(seqs, torch.softmax(ALPHA * logp, 0).tolist(), strict=True)),
            "low": dict(zip(seqs, low.exp().tolist(), strict=True))}
    engine = VLLMEngine(folder, dtype="float32", max_model_len=64)
    yield model, laws, engine
    VLLMEngine.shutdown()


def test_exact_power_sampling_on_vllm_reaches_p_alpha(six, record_property):
    _model, laws, engine = six
    target, cfg = Target(ALPHA, T), PowerConfig(block_size=1, mcmc_steps=10, mode="exact")
    chains = run_chains(engine, [PROMPT] * N, [], target, cfg, list(range(N)))
    tv = tv_distance(empirical(c.tokens for c in chains), laws["power"])
    noise, gap = noise_floor(laws["power"], N), tv_distance(laws["low"], laws["power"])
    record_property("tv_exact", tv), record_property("noise", noise), record_property("gap", gap)
    print(f"vLLM exact MH: TV {tv:.4f}, noise floor {noise:.4f}, low-temperature gap {gap:.4f}")
    assert gap > 5 * noise  # the test can tell the target from plain low-temperature sampling
    assert tv < 2 * noise


def test_smc_on_vllm_reaches_p_alpha(six):
    """Resampling at every token (threshold 1), so that rows are copied at every barrier."""
    _model, laws, engine = six
    target, cfg = Target(ALPHA, T), SMCConfig(particles=8, block_size=1, ess_threshold=1.0)
    out = run_smc(engine, [PROMPT] * N, [], target, cfg, list(range(N)))
    tv, noise = tv_distance(empirical(c.tokens for c in out), laws["power"]), noise_floor(laws["power"], N)
    print(f"vLLM SMC (K = 8): TV {tv:.4f}, noise floor {noise:.4f}")
    assert tv < 2 * noise and sum(c.resamples for c in out) > 0


def test_low_temperature_sampling_on_vllm_has_the_tempered_law(six):
    model, laws, engine = six
    out = decode(model, [PROMPT] * N, T, [], temperature=1 / ALPHA, seeds=list(range(N)), engine=engine)
    tv, noise = tv_distance(empirical(c.tokens for c in out), laws["low"]), noise_floor(laws["low"], N)
    print(f"vLLM T = 1/α: TV {tv:.4f}, noise floor {noise:.4f}")
    assert tv < 2 * noise


def test_reference_mode_on_vllm_has_the_published_algorithms_law(six):
    """No closed form: vLLM's samples against the slot engine's, at the two-sample noise floor."""
    model, _laws, engine = six
    target, cfg = Target(ALPHA, T), PowerConfig(block_size=1, mcmc_steps=4, mode="reference")
    ours = empirical(c.tokens for c in run_chains(engine, [PROMPT] * N, [], target, cfg, list(range(N))))
    theirs = empirical(c.tokens for c in run_chains(SlotEngine(model), [PROMPT] * N, [], target, cfg,
                                                    list(range(N))))
    floor = float(np.mean([tv_distance(empirical(draw_exact(theirs, N, np.random.default_rng(seed))),
                                       empirical(draw_exact(theirs, N, np.random.default_rng(seed + 99))))
                           for seed in range(10)]))
    tv = tv_distance(ours, theirs)
    print(f"vLLM reference mode against the slot engine: TV {tv:.4f}, two-sample floor {floor:.4f}")
    assert tv < 2 * floor


def test_two_data_parallel_engine_cores_give_the_single_engines_chains_and_particles(six):
    """vLLM's data parallelism (two engine cores, processes of their own, as on two GPUs): every core samples, its
    log-normaliser's records reach this process, and each MH chain and SMC sample is the one-process engine's, move
    for move (vLLM seeds each request; whose core runs it does not matter), so the exactness shown above holds
    there too. The SMC groups' rows start on alternate cores, so resampling copies rows across cores."""
    _model, _laws, single = six
    target = Target(ALPHA, T)
    power = PowerConfig(block_size=1, mcmc_steps=10, mode="exact")
    smc = SMCConfig(particles=8, block_size=1, ess_threshold=1.0)
    n = N // 5
    engine = VLLMEngine(single.folder, dtype="float32", max_model_len=64, data_parallel_size=2, kv_cache_gib=1)
    try:
        chains = run_chains(engine, [PROMPT] * n, [], target, power, list(range(n)))
        particles = run_smc(engine, [PROMPT] * (n // 4), [], target, smc, list(range(n // 4)))
        writers = {path.stem for path in Path(engine._records.name).glob("*.logz")}
    finally:
        engine.close()
    assert len(writers) == 2 and str(os.getpid()) not in writers  # both cores sampled, neither in this process
    theirs = run_chains(single, [PROMPT] * n, [], target, power, list(range(n)))
    assert [c.tokens for c in chains] == [c.tokens for c in theirs]
    assert [c.moves for c in chains] == [c.moves for c in theirs]  # every MH decision alike
    assert np.allclose([c.logq for c in chains], [c.logq for c in theirs], atol=1e-5)
    theirs = run_smc(single, [PROMPT] * (n // 4), [], target, smc, list(range(n // 4)))
    assert [c.tokens for c in particles] == [c.tokens for c in theirs]
    assert [c.resamples for c in particles] == [c.resamples for c in theirs] and sum(c.resamples for c in theirs)


def test_rows_that_share_a_prompt_encode_it_once(six):
    """Rows admitted together would each encode their shared prompt (vLLM's prefix cache shares only blocks of
    earlier steps): the engine encodes it once first, so four rows cost one prompt plus their partial blocks."""
    model, _, engine = six
    prompt = [0] + [1, 2, 3, 4] * 10  # 41 tokens: one full KV block of 32 and 9 more
    engine.reset_prefix_cache()
    before = engine.prefill
    out = decode(model, [prompt] * 4, 3, [], temperature=1.0, seeds=[1, 2, 3, 4], engine=engine)
    assert engine.prefill - before == 40 + 4 * 8  # the warm-up's 40, then each row's 8 past the cached block
    assert sum(c.prefill_tokens for c in out) == engine.prefill - before


def test_every_token_carries_the_models_log_p_and_the_proposals_log_q(six):
    model, _, engine = six
    out = decode(model, [PROMPT, [0, 2, 3], [0, 4]], 6, [], temperature=0.7, top_k=3, seeds=[1, 2, 3], engine=engine)
    for prompt, c in zip([PROMPT, [0, 2, 3], [0, 4]], out, strict=True):
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + c.tokens])).logits[0, len(prompt) - 1:-1].float()
        tokens = torch.tensor(c.tokens)[:, None]
        scaled = logits / 0.7
        scaled = scaled.masked_fill(scaled < torch.topk(scaled, 3, -1).values[:, -1:], float("-inf"))
        logp = torch.log_softmax(logits, -1).gather(-1, tokens)[:, 0]
        logq = torch.log_softmax(scaled, -1).gather(-1, tokens)[:, 0]
        assert torch.allclose(torch.tensor(c.logp), logp, atol=1e-4)
        assert torch.allclose(torch.tensor(c.logq), logq, atol=1e-4)


def test_greedy_and_stop_tokens_agree_with_the_transformers_engine(six):
    model, _, engine = six
    prompts = [PROMPT, [0, 2, 3], [0, 4]]
    ours, theirs = decode(model, prompts, 8, [], engine=engine), decode(model, prompts, 8, [])
    assert [c.tokens for c in ours] == [c.tokens for c in theirs]
    stop = {ours[0].tokens[2]}  # a token the first decode emits: it ends there, and is kept
    ours, theirs = decode(model, prompts, 8, stop, engine=engine), decode(model, prompts, 8, stop)
    assert [c.tokens for c in ours] == [c.tokens for c in theirs] and ours[0].stopped and ours[0].tokens[-1] in stop


def _near_tie(model, prompt: list[int], tokens: list[int], at: int, margin: float = 1e-3) -> bool:
    """Whether the two best logits at position `at` of a greedy decode are within `margin` of each other."""
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + tokens[:at]])).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1]) < margin * max(1.0, float(top[0].abs()))


@pytest.mark.parametrize("depth", [None, 20])
def test_greedy_decodes_of_smollm2_agree_with_the_transformers_engine(depth, tmp_path):
    """SmolLM2 in float32, whole and stitched to 20 blocks (a truncated checkpoint vLLM loads as a plain Llama),
    through `helpers.evaluation.decodes.sample`: token for token, or diverging only at a near-tie of the two best logits."""
    from helpers.data.sources import load_problems
    from helpers.evaluation.decodes import DecodeSettings, sample
    from helpers.models.loading import load_model

    handle = load_model("smollm2-135m", device="cpu", dtype="float32")
    handle = handle if depth is None else handle.at_depth(depth, "stitch")
    model, tokenizer = handle.module, handle.tokenizer
    problems = load_problems("arithmetic", n=1, levels=[1, 2, 3, 4], seed=0)
    settings = DecodeSettings("greedy", max_new_tokens=48, shots=2)
    ours = sample(handle, problems, settings, engine="vllm", root=tmp_path, progress=False)
    theirs = sample(handle, problems, settings, root=tmp_path, progress=False)
    from helpers.data.prompts import build_prompt

    for problem, a, b in zip(problems, ours, theirs, strict=True):
        a, b = a[0]["tokens"], b[0]["tokens"]
        if a != b:
            at = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
            assert _near_tie(model, build_prompt(tokenizer, problem.question, shots=2), b, at), (problem.id, at)
    assert len(list((tmp_path / "decode").glob("*.jsonl"))) == 2  # the two engines' records are keyed apart


def test_the_paper_profile_runs_end_to_end_on_vllm_with_a_tiny_local_model(tmp_path, monkeypatch):
    """Chapter 04's decodes under the `paper` profile's settings (engine vllm, alpha 2, N = 10, B = 192, reference
    mode, SMC with K = 16), with a tiny local model, one arithmetic problem and one block of 192 tokens in place of
    the hub models, MATH500 and 3,072 tokens."""
    from helpers.chapters.power_sampling import compare_methods
    from helpers.data.sources import load_problems
    from helpers.models.tiny import make_tiny
    from helpers.runner.planning import plan
    from helpers.samplers.settings import Searches

    folder = make_tiny("qwen2", tmp_path / "tiny", n_layers=4, hidden_size=128)
    small = {"models": [str(folder)], "dataset": "arithmetic", "levels": [1], "n_problems": 1, "n_seeds": 1,
             "max_new_tokens": 192, "depths": [3], "dtype": "float32"}
    (job,) = plan("paper", small, only="04_power_sampling")
    p = job.parameters
    assert (p["engine"], p["alpha"], p["mcmc_steps"], p["block_size"], p["power_mode"], p["smc_particles"]) == (
        "vllm", 2.0, 10, 192, "reference", 16)
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path / "results"))
    problems = load_problems(p["dataset"], n=p["n_problems"], levels=p["levels"], seed=p["seed"])
    searches = Searches.from_parameters({"smc_bridge_tokens": 0, "mh_blocks": 0, **p})  # the notebook's default where the profile
    # sets none
    rows = compare_methods(p["models"], problems, p["depths"], searches, n_seeds=p["n_seeds"],
                           max_new_tokens=p["max_new_tokens"], shots=p["shots"], seed=p["seed"],
                           batch_size=p["batch_size"], engine=p["engine"], dtype=p["dtype"])  # as the notebook
    assert [r.depth for r in rows] == [4, 3]
    assert all(r.tokens_power > r.tokens_greedy and r.tokens_smc >= p["smc_particles"] for r in rows)
    from helpers.evaluation.decodes import decode_run
    from helpers.models.loading import load_model
    from helpers.samplers.settings import chapter_settings

    model = load_model(str(folder), dtype=p["dtype"])  # the dtype the chapter used
    settings = chapter_settings(searches, max_new_tokens=p["max_new_tokens"], shots=p["shots"], seed=p["seed"])
    for s in settings.values():  # every decode stored under vLLM's key, none under the slot engine's
        assert decode_run(model, s, engine="vllm").path.is_file() and not decode_run(model, s).path.exists()
    assert len(list((tmp_path / "results" / "decode").glob("*.jsonl"))) == 10  # five decodes at two depths


def test_a_budgeted_run_on_vllm_checkpoints_stops_and_reports_progress_as_on_the_slot_engine(six, tmp_path,
                                                                                                monkeypatch):
    """The decode loop owns the budget, the checkpoints and the pulse for every engine: vLLM's MH chains hand on
    a checkpoint after each block; past the deadline the run stops with the finished rows delivered and the rest
    aborted (the engine serves the next run); the pulse log counts vLLM's tokens."""
    import json

    from helpers.core import budget, env, pulse
    from helpers.samplers.plain import decode_work
    from helpers.samplers.power import chain_work
    from helpers.samplers.work import run_together

    _model, _laws, engine = six
    log = tmp_path / "pulse.jsonl"
    monkeypatch.setenv(env.PULSE, str(log))
    monkeypatch.setattr(pulse, "INTERVAL", 0.0)
    done = []

    def works():
        return [chain_work([PROMPT] * 2, set(), Target(ALPHA, T), PowerConfig(block_size=1, mcmc_steps=2), [0, 1]),
                decode_work([PROMPT] * 3, T, set(), 1.0, 0, [0, 1, 2])]

    saved = []
    run_together(engine, works(), set(), batch_size=8, on_done=lambda w, i, c: done.append((w, i)),
                 on_checkpoint=lambda w, i, state, spent: saved.append((w, i, state["block"], state["step"],
                                                                       state["grown"])), pulse=pulse.Pulse.from_env())
    assert sorted(done) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    assert sorted(s[:3] for s in saved if not s[4]) == [(0, i, b) for i in (0, 1) for b in range(1, T)]  # each
    # chain, after each block but its last; within each block, after its growth and after its first move
    assert sorted(s for s in saved if s[4]) == [(0, i, b, step, True) for i in (0, 1) for b in range(T)
                                                for step in (0, 1)]
    assert json.loads(log.read_text().splitlines()[-1])["tokens"] >= 3 * T
    monkeypatch.setattr(budget, "deadline", lambda: 0.0)  # spent: the first step's beat stops the run
    done.clear()
    with pytest.raises(budget.BudgetSpent, match="budget"):
        run_together(engine, works(), set(), batch_size=8, on_done=lambda w, i, c: done.append((w, i)))
    assert engine._run is None  # the run let go of its requests
    monkeypatch.setattr(budget, "deadline", lambda: None)
    (again,) = run_together(engine, [decode_work([PROMPT], T, set())], set())
    assert len(again[0].tokens) == T


def test_the_normalisers_logsumexp_is_torchs_where_logits_spread_widely():
    """The log-normaliser's faster logsumexp (no subnormal exps) gives torch's, masked (-inf) tokens included."""
    from helpers.engines.vllm_logz import logsumexp

    generator = torch.Generator().manual_seed(0)
    for spread in (1.0, 20.0, 400.0):
        x = torch.randn(4, 5000, generator=generator) * spread
        x[1, 100:] = float("-inf")  # a top-k row
        assert torch.allclose(logsumexp(x), torch.logsumexp(x, -1), rtol=1e-6, atol=1e-6)
