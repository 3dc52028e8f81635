"""The dtype policy: bfloat16 only where the hardware computes it; float32 arithmetic for every statistic; the
dtype keys every stored run; the samplers stay exact with bfloat16 weights."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_problems

from helpers.engines.registry import make_engine
from helpers.evaluation.decodes import DecodeSettings, decode_run, solve
from helpers.models import precision
from helpers.models.loading import default_device
from helpers.samplers.power import PowerConfig, power_sample, run_chains
from helpers.samplers.target import Target
from helpers.samplers.toy import EOS, ToyLM, empirical, exact_distributions, tv_distance


@pytest.mark.parametrize("native, expected", [(True, torch.bfloat16), (False, torch.float32)])
def test_auto_takes_bfloat16_only_where_the_hardware_computes_it(monkeypatch, tmp_path, native, expected):
    monkeypatch.setenv("SVD_CACHE", str(tmp_path))
    monkeypatch.setattr(precision, "native_bfloat16", lambda device: native)
    precision.record_measurement("m", {"float32": 10.0, "bfloat16": 12.0})  # measured faster in bfloat16 here
    assert precision.resolve("auto", "cpu", "m") == expected
    assert precision.resolve("float32", "cpu") == torch.float32  # an explicit choice overrides the policy
    assert precision.resolve("bfloat16", "cpu") == torch.bfloat16


def test_auto_on_a_native_cpu_follows_the_measurement_and_is_float32_without_one(monkeypatch, tmp_path):
    """Native bfloat16 units do not make a decoding step faster by themselves: on a CPU, 'auto' takes bfloat16 only
    for a model measured faster in it on this machine; unmeasured, damaged or slower, float32. A GPU keeps bfloat16."""
    monkeypatch.setenv("SVD_CACHE", str(tmp_path))
    monkeypatch.setattr(precision, "native_bfloat16", lambda device: True)
    assert precision.resolve("auto", "cpu", "m") == torch.float32  # nothing measured
    assert "no measurement of m" in precision.describe("cpu", "m")
    assert "auto, per model" in precision.describe("cpu")  # a machine's line names no model's choice
    assert precision.record_measurement("m", {"float32": 12.0, "bfloat16": 9.0}) == "float32"
    assert precision.resolve("auto", "cpu", "m") == torch.float32
    assert precision.record_measurement("m", {"float32": 9.0, "bfloat16": 12.0}) == "bfloat16"
    assert precision.resolve("auto", "cpu", "m") == torch.bfloat16 and precision.resolve("auto", "cpu", "other") == torch.float32
    assert "measured decode 9.0 tokens/s in float32 and 12.0 in bfloat16 for m (auto = bfloat16)" in precision.describe("cpu", "m")
    assert precision.resolve("auto", "cuda", "unmeasured") == torch.bfloat16
    (tmp_path / precision.MEASURED_FILE).write_text('{"' + precision.machine_key() + '": {"m": {"float32": "fast"}}}')
    assert precision.resolve("auto", "cpu", "m") == torch.float32  # a damaged record is no measurement
    (tmp_path / precision.MEASURED_FILE).write_text("not json")
    assert precision.resolve("auto", "cpu", "m") == torch.float32
    assert precision.record_measurement("m", {"float32": 1.0, "bfloat16": 2.0}) == "bfloat16"  # and is replaced


def test_the_dtype_bench_measures_both_formats_and_auto_follows_the_faster(monkeypatch, tmp_path):
    from helpers.bench.dtype import bench_dtype
    from helpers.models.tiny import make_tiny

    monkeypatch.setenv("SVD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "native_bfloat16", lambda device: device.startswith("cpu"))
    model = str(make_tiny("qwen2", tmp_path / "tiny"))
    report = bench_dtype(model, rows=(2, 3), max_new_tokens=24, shots=0)
    rates = report["tokens_per_second"]
    assert set(rates) == {"float32", "bfloat16"} and all(r > 0 for r in rates.values())
    assert [r["rows"] for r in report["by_rows"]] == [2, 3]
    for row in report["by_rows"]:  # the prompt pass and the decode, each format, timed apart
        assert all(row[f"{k}_{d}"] > 0 for k in ("prompt_tokens_per_s", "decode_tokens_per_s") for d in rates)
        assert row["decode_bfloat16_vs_float32"] > 0 and row["prompt_bfloat16_vs_float32"] > 0
    with pytest.raises(ValueError, match="--problems must be row counts"):
        bench_dtype(model, rows=(0,), max_new_tokens=3)
    assert report["auto"] == ("bfloat16" if rates["bfloat16"] > rates["float32"] else "float32")
    assert precision.measured(model) is not None and report["auto"] in report["auto_means"]


def test_the_cpu_probe_agrees_with_torch(monkeypatch):
    cpu = torch.cpu
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    assert precision.native_bfloat16("cpu") == (cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported())
    assert precision.native_bfloat16("meta") is False


@pytest.mark.parametrize("name", ["ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"])
def test_a_cap_on_onednn_below_bfloat16_makes_the_cpu_emulate_it(monkeypatch, name):
    """With oneDNN held to AVX2 even a native-bfloat16 CPU emulates it (the way to measure as an AVX2 machine does):
    'auto' is float32 there whatever was measured, and a cap at a bfloat16 set changes nothing."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    hardware = precision.native_bfloat16("cpu")
    monkeypatch.setattr(precision, "measured", lambda model: {"float32": 1.0, "bfloat16": 2.0})
    for cap in ("AVX2", "avx512_core", " AVX2_VNNI "):
        monkeypatch.setenv(name, cap)
        assert precision.native_bfloat16("cpu") is False
        assert precision.auto_name("cpu", "m") == "float32" and "no native bfloat16" in precision.describe("cpu", "m")
        assert ("holds oneDNN to" in precision.describe("cpu", "m")) is hardware  # the cap named where it decided
    monkeypatch.setenv(name, "avx512_core_bf16")
    assert precision.native_bfloat16("cpu") is hardware


@pytest.mark.parametrize("bad", ["fp16", "float16", "", None, 32, "AUTO"])
def test_unknown_dtypes_are_refused_with_the_choices(bad):
    with pytest.raises(ValueError, match="auto, float32, bfloat16"):
        precision.resolve(bad, "cpu")
    with pytest.raises(ValueError):
        precision.resolve(torch.float16, "cpu")


def test_a_loaded_model_runs_in_the_dtype_asked_for(tiny_dir):
    from helpers.models.loading import load_model

    model = load_model(str(tiny_dir), device="cpu", dtype="bfloat16")
    assert model.info.dtype == "bfloat16" and all(p.dtype == torch.bfloat16 for p in model.module.parameters())
    assert model.dtype == torch.bfloat16
    model = load_model(str(tiny_dir), device="cpu", dtype="float32")
    assert model.info.dtype == "float32" and model.dtype == torch.float32


PROBLEMS = tiny_problems()


def test_records_of_one_dtype_are_never_reused_for_the_other(tiny, tiny_dir, tmp_path):
    from helpers.models.loading import load_model

    model32 = tiny
    model16 = load_model(str(tiny_dir), device="cpu", dtype="bfloat16")
    assert model16.identity()["dtype"] == "bfloat16" and model32.identity()["dtype"] == "float32"
    settings = DecodeSettings("greedy", max_new_tokens=6)
    assert decode_run(model16, settings, root=tmp_path).hash != decode_run(model32, settings, root=tmp_path).hash
    solve(model32, PROBLEMS, max_new_tokens=6, root=tmp_path, progress=False)
    assert len(decode_run(model16, settings, root=tmp_path)) == 0  # nothing stored for bfloat16 yet
    solve(model16, PROBLEMS, max_new_tokens=6, root=tmp_path, progress=False)
    assert len(decode_run(model16, settings, root=tmp_path)) == 2
    assert len(decode_run(model32, settings, root=tmp_path)) == 2


def test_the_lens_computes_in_float32_from_bfloat16_weights(tiny, tiny_dir):
    from helpers.interp.lens import logit_lens
    from helpers.models.loading import load_model

    model32, tokenizer = tiny.module, tiny.tokenizer
    model16 = load_model(str(tiny_dir), device="cpu", dtype="bfloat16").module
    ids = tokenizer("Ada has 3 apples . Then Ada receives 4 more apples .")["input_ids"]
    full, half = logit_lens(model32, ids, include_output=True), logit_lens(model16, ids, include_output=True)
    assert half.kl.dtype == full.kl.dtype == "float32"
    assert (half.kl >= -1e-6).all() and abs(half.kl[-1]).max() < 1e-3  # the last row reads the model's own output
    assert abs(half.kl - full.kl).max() < 0.1 * max(1.0, full.kl.max())


@pytest.mark.toy
def test_power_sampling_converges_to_the_bfloat16_models_own_target():
    """With the model's numbers rounded to bfloat16, the exact sampler targets p^α of the rounded model: its
    log-probabilities are computed in float32 from those logits."""
    model = ToyLM(vocab=3, seed=0).to(torch.bfloat16)
    assert model.table.dtype == torch.bfloat16
    target = exact_distributions(model, [1], 4, 4.0)["power"]

    def tv(steps: int, n: int = 1000) -> float:
        cfg = PowerConfig(block_size=2, mcmc_steps=steps, mode="exact")
        chains = run_chains(make_engine("reencode", model), [[1]] * n, [EOS], Target(4.0, 4), cfg, list(range(n)))
        return tv_distance(empirical(c.tokens for c in chains), target)

    # 1,000 chains leave about 0.04 of sampling noise; the proposal alone (no MH step) is 0.4 away.
    assert tv(10) < 0.06 and tv(0) > 0.3


def test_the_sampler_records_the_bfloat16_models_own_log_probabilities(tiny_dir):
    """MH ratios use the engine's numbers: re-encoding the chain's tokens through the same bfloat16 model gives
    the log p it recorded (to bfloat16's resolution), and every recorded number is a float32 log-probability."""
    from helpers.models.loading import load_model

    loaded = load_model(str(tiny_dir), device="cpu", dtype="bfloat16")
    model, tokenizer = loaded.module, loaded.tokenizer
    prompt = tokenizer("Ada has 3 apples .")["input_ids"]
    target, cfg = Target(2.0, 12), PowerConfig(block_size=4, mcmc_steps=2, mode="exact")
    chain = power_sample(model, prompt, [tokenizer.eos_token_id], target, cfg, seed=3)
    ids = torch.tensor([prompt + chain.tokens])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
    again = torch.log_softmax(logits, -1).gather(-1, torch.tensor(chain.tokens)[:, None])[:, 0]
    assert all(lp <= 0 and lq <= 0 for lp, lq in zip(chain.logp, chain.logq, strict=True))
    assert max(abs(a - b) for a, b in zip(chain.logp, again.tolist(), strict=True)) < 0.1


def test_a_profile_or_flag_sets_every_chapters_dtype():
    from helpers.runner.planning import plan

    assert all(job.parameters["dtype"] == "float32" for job in plan("smoke") if "dtype" in job.parameters)
    jobs = plan("smoke", {"dtype": "bfloat16"})  # what `run --dtype bfloat16` passes
    chapters = [job for job in jobs if job.stem != "06_precision"]  # the appendix runs both
    assert len(chapters) == 5 and all(job.parameters["dtype"] == "bfloat16" for job in chapters)


def test_first_divergence():
    from helpers.chapters.precision import first_divergence

    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # one stopped earlier
    assert first_divergence([], []) is None


def test_the_appendix_compares_both_dtypes_on_the_same_problems(tiny_dir, tmp_path, monkeypatch):
    import numpy as np

    from helpers.chapters import precision as appendix
    from helpers.chapters import precision_text

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    # the tiny gemma3's local window (64) is shorter than a timed row (a 62-token prompt and 32 tokens): its speed is
    # not measured, which the next test covers
    windowed = "gemma3" in str(tiny_dir)
    c = appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS[:1], max_new_tokens=6, shots=0, batch_size=2,
                                n_lens=1, span=1, speed_rows=None if windowed else 16)
    assert set(c.correct) == set(c.sweep) == set(c.kl) == {"float32", "bfloat16"}
    assert c.n_problems == 2 and sorted(c.sweep["float32"]) == [c.n_layers - 1, c.n_layers]
    assert c.kl["float32"].shape == c.kl["bfloat16"].shape == (1, c.n_layers)
    values = precision_text.comparison_values(c)
    assert values["dtype_n_problems"] == 2 and 0 <= values["dtype_identical"] <= 2
    assert np.isclose(values["dtype_kl_max_gap"],
                      np.abs(c.kl["bfloat16"].mean(0) - c.kl["float32"].mean(0)).max())
    assert "float32" in values["dtype_sentence"] and "bfloat16" in values["dtype_sentence"]
    all_same = values["dtype_identical"] == 2  # no decode differs: no "first differing token at position 0"
    assert ("identical token for token on all 2 problems" in values["dtype_sentence"]) == all_same
    assert ("(median)" in values["dtype_sentence"]) == (values["dtype_identical"] == 0)  # a median of two or more
    assert values["dtype_summary"].startswith("On 2 problems of ") and values["dtype_summary"] not in \
        values["dtype_sentence"]  # the summary in words of its own
    assert "| blocks | float32 | bfloat16 |" in precision_text.sweep_table(c)
    if windowed:
        return
    # each format's speed is timed by a decode that ran (the records above were just stored; the timing reads none)
    (rows, speeds), = c.speed.by_rows.items()
    assert rows == 16 and set(speeds) == {"float32", "bfloat16"}
    assert all(s.prompt_tokens_per_s > 0 and s.tokens_per_s > 0 for s in speeds.values())
    assert values["dtype_prompt_float32"] == speeds["float32"].prompt_tokens_per_s
    assert values["dtype_auto"] == c.auto == precision.auto_name(default_device(), str(tiny_dir))
    assert f"`dtype: auto` takes {c.auto}" in values["dtype_speed_sentence"] and c.auto_reason in values[
        "dtype_speed_sentence"]
    assert f"read 16 prompts at {speeds['float32'].prompt_tokens_per_s:.0f} prompt tokens/s" in values[
        "dtype_speed_sentence"]
    capped = appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS[:1], max_new_tokens=6, shots=0, batch_size=2,
                                     n_lens=1, span=1, native=False, emulated_problems=1)
    assert list(capped.speed.by_rows) == [1]  # a cap that cuts the comparison cuts its timing too
    assert ("read 1 prompt (not the 16 that `speed_rows` asks for: the timing reads at most the 1 problem that the "
            "profile's cap leaves the comparison) at") in precision_text.comparison_values(capped)["dtype_speed_sentence"]
    assert "(not the" not in values["dtype_speed_sentence"]  # uncut: 16 asked, 16 read


def test_the_appendix_without_a_speed_measurement_says_so(tiny_dir, tmp_path, monkeypatch):
    from helpers.chapters import precision as appendix
    from helpers.chapters import precision_text

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    common = dict(max_new_tokens=4, shots=0, batch_size=2, n_lens=1, span=1)
    with pytest.raises(ValueError, match="speed_rows must be a whole number"):
        appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS[:1], speed_rows=0, **common)
    c = appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS[:1], speed_rows=None, **common)
    values = precision_text.comparison_values(c)
    assert c.speed is None and "did not time the two formats" in values["dtype_speed_sentence"]
    assert values["dtype_speed_summary"].startswith(f"`auto` takes {c.auto} here")


def test_where_bfloat16_is_emulated_both_formats_run_the_subset_and_the_page_says_so(tiny_dir, tmp_path, monkeypatch):
    from helpers.chapters import precision as appendix
    from helpers.chapters import precision_text

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    common = dict(max_new_tokens=4, shots=0, batch_size=2, n_lens=2, span=1, emulated_problems=1, speed_rows=None)
    cut = appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS, native=False, **common)
    assert cut.n_problems == 1 and cut.n_sweep == 1 and cut.planned == (2, 2) and not cut.native
    assert all(len(v) == 1 for v in cut.correct.values()) and cut.kl["float32"].shape[0] == 1  # n_lens cut too
    sentence = precision_text.comparison_values(cut)["dtype_sentence"]
    assert sentence.startswith("This machine only emulates bfloat16") and "on 1 of the 2 planned problems" in sentence
    whole = appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS, native=True, **common)
    assert whole.n_problems == 2 and whole.native  # where bfloat16 is native, nothing is cut
    assert not precision_text.comparison_values(whole)["dtype_sentence"].startswith("This machine")
    with pytest.raises(ValueError, match="emulated_problems must be a whole number of at least 1"):
        appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS, native=False, **{**common, "emulated_problems": 0})
    capped = appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS, native=True, native_problems=1, **common)
    assert capped.n_problems == 1 and capped.native  # a released build caps native machines alike
    assert capped.tokens == cut.tokens  # the same problems, hence the same released records, on every machine
    said = precision_text.comparison_values(capped)["dtype_sentence"]
    assert "on 1 of the 2 planned problems" in said and "`native_problems`" in said


def test_the_appendix_rejects_an_empty_selection(tiny_dir):
    from helpers.chapters import precision as appendix

    with pytest.raises(ValueError, match="at least one problem"):
        appendix.compare_dtypes(str(tiny_dir), [], PROBLEMS, max_new_tokens=4, shots=0, batch_size=2, n_lens=1, span=1)
    with pytest.raises(ValueError, match="n_lens"):
        appendix.compare_dtypes(str(tiny_dir), PROBLEMS, PROBLEMS, max_new_tokens=4, shots=0, batch_size=2, n_lens=3,
                                span=1)


def test_differing_critical_depths_are_explained_by_their_counts():
    import numpy as np

    from helpers.chapters.precision import DtypeComparison
    from helpers.chapters.precision_text import comparison_values

    sweep = {"float32": {22: 1 / 16, 23: 5 / 16, 24: 10 / 16}, "bfloat16": {22: 2 / 16, 23: 4 / 16, 24: 10 / 16}}
    c = DtypeComparison("m", 24, {"float32": [True, False], "bfloat16": [True, False]},
                        {"float32": [[1, 2], [3]], "bfloat16": [[1, 2], [4]]},
                        {d: np.zeros((1, 24)) for d in ("float32", "bfloat16")}, sweep, 16, 0.5)
    values = comparison_values(c)
    assert (values["dtype_critical_float32"], values["dtype_critical_bfloat16"]) == (23, 24)
    assert "solves 5 of 16 problems in float32 and 4 in bfloat16" in values["dtype_sentence"]
    assert "differ by 1 problem(s)" in values["dtype_sentence"] and values["dtype_identical"] == 1


def test_the_appendix_sets_its_critical_depth_beside_chapter_03s_where_that_is_stored():
    from types import SimpleNamespace

    from helpers.chapters import precision_text

    c = SimpleNamespace(model="m", chapter03=(23, 16), n_sweep=8)
    assert precision_text._chapter03_clause(c, {"float32": 24, "bfloat16": 24}) == (
        "Chapter 03 reads 23 for m on its own 16 problems, this sweep 24 on 8: the two disagree because one problem "
        "can move a depth across the rule's line, and a depth named by the critical depth is that fragile.")
    assert precision_text._chapter03_clause(c, {"float32": 23, "bfloat16": 24}).startswith(
        "Chapter 03 reads the same critical depth, 23, on its own 16 problems.")
    c.chapter03 = None
    assert "need not agree" in precision_text._chapter03_clause(c, {"float32": 23, "bfloat16": 23})
