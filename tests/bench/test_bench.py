"""The benchmark's memory probe finds child processes and reads their peak resident memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from helpers.bench.memory import descendants, peak_rss_kib


def test_descendants_and_peak_memory_of_a_child():
    code = "x = bytearray(b'1') * (64 * 2**20); print('allocated', flush=True); import time; time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "allocated"  # every page written, however loaded the machine
        assert child.pid in descendants(os.getpid())
        assert peak_rss_kib(child.pid) > 60 * 1024  # the 64 MiB it allocated
    finally:
        child.kill()
        child.wait()
    assert peak_rss_kib(child.pid) == 0  # gone


def test_throughput_bench_decodes_the_same_work_as_generate(tiny_dir):
    from helpers.bench.throughput import bench_throughput

    report = bench_throughput(str(tiny_dir), batch_sizes=(1, 3), max_new_tokens=4, shots=0)
    assert [row["batch"] for row in report["batches"]] == [1, 3]
    for row in report["batches"]:
        assert row["new_tokens"] == row["batch"] * 4
        assert row["decode_tokens_per_second"] > 0 and row["generate_tokens_per_second"] > 0
    assert torch.is_grad_enabled()  # the bench turns autograd off for its own run only


def test_the_published_sampler_reads_its_log_probabilities_from_generate(tiny):
    """Its log p and log q per token equal those of the re-encoded sequence under the proposal it states."""
    import torch

    from helpers.engines.generate import GenerateEngine
    from helpers.samplers.power import PowerConfig, run_chains
    from helpers.samplers.target import Target

    model, tokenizer = tiny.module, tiny.tokenizer
    prompt = tokenizer("Ada has 3 apples .")["input_ids"]
    target, cfg = Target(2.0, 8), PowerConfig(block_size=4, mcmc_steps=2, mode="reference", top_k=5)
    (chain,) = run_chains(GenerateEngine(model), [prompt], [tokenizer.eos_token_id], target, cfg, [3])
    assert chain.tokens and chain.decoded_tokens >= len(chain.tokens) and len(chain.moves) == 4
    with torch.no_grad():
        logits = model(torch.tensor([prompt + chain.tokens])).logits[0, len(prompt) - 1:-1].float()
    ids = torch.tensor(chain.tokens)[:, None]
    scaled = logits / target.temperature
    scaled = scaled.masked_fill(scaled < torch.topk(scaled, 5, -1).values[:, -1:], float("-inf"))
    assert torch.allclose(torch.tensor(chain.logp), torch.log_softmax(logits, -1).gather(-1, ids)[:, 0], atol=1e-4)
    assert torch.allclose(torch.tensor(chain.logq), torch.log_softmax(scaled, -1).gather(-1, ids)[:, 0], atol=1e-4)


def test_sampling_bench_reports_every_ratio_beside_its_target(tiny_dir):
    from helpers.bench.sampling import SAMPLING_TARGETS, bench_sampling

    report = bench_sampling((str(tiny_dir),), (2, 3), max_new_tokens=8, block_size=4, mcmc_steps=1, shots=0,
                            repeats=2)
    (model,) = report["models"].values()
    assert set(model["batches"]) == set(model["ratios"]) == {"2", "3"}
    for n, row in model["batches"].items():
        assert row["generate"]["new_tokens"] == int(n) * 8
        assert row["published_batch1_generate"]["decoded_tokens"] > 0
        assert set(model["ratios"][n]) == set(SAMPLING_TARGETS)
        assert all(v > 0 for v in model["ratios"][n]["power_vs_plain"].values())
        for job in ("generate", "greedy", "plain_sampling", "power_exact", "power_reference", "smc"):
            each = row[job]["seconds_each"]
            assert len(each) == 2 and row[job]["seconds"] == pytest.approx(sum(each) / 2, abs=0.011)
    assert report["targets"]["power_vs_published"] == {"16": 7.0, "32": 10.0}
    assert report["settings"]["repeats"] == 2


def test_the_sampling_bench_times_only_the_jobs_it_is_given(tiny_dir):
    """One job at two batch sizes (what a batch-size choice needs): the others, and the ratios that need them, are
    left out; an unknown job is refused before any model loads."""
    from helpers.bench.sampling import bench_sampling

    report = bench_sampling((str(tiny_dir),), (2, 3), max_new_tokens=8, block_size=4, mcmc_steps=1, shots=0,
                            repeats=1, baseline=False, jobs=("power_reference",))
    (model,) = report["models"].values()
    for row in model["batches"].values():
        assert set(row) == {"power_reference"} and row["power_reference"]["decode_tokens_per_second"] > 0
    assert model["ratios"] == {"2": {}, "3": {}}
    both = bench_sampling((str(tiny_dir),), (2,), max_new_tokens=8, block_size=4, mcmc_steps=1, shots=0, repeats=1,
                          baseline=False, jobs=("plain_sampling", "power_exact"))
    (model,) = both["models"].values()
    assert set(model["ratios"]["2"]) == {"power_vs_plain"} and set(model["ratios"]["2"]["power_vs_plain"]) == {"exact"}
    with pytest.raises(ValueError, match="--jobs takes"):
        bench_sampling(("no-such-model",), (2,), jobs=("beam",))


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True])
def test_sampling_bench_refuses_a_repeat_count_below_one(tiny_dir, repeats):
    from helpers.bench.sampling import bench_sampling

    with pytest.raises(ValueError, match="--repeats"):
        bench_sampling((str(tiny_dir),), (2,), repeats=repeats)


def test_the_benchs_first_problems_mix_every_level_and_do_not_depend_on_the_largest_batch():
    from helpers.bench.common import bench_problems

    most = bench_problems((1, 2, 3, 4), 32, seed=0)
    assert [p.id for p in bench_problems((1, 2, 3, 4), 16, seed=0)] == [p.id for p in most[:16]]
    levels = [int(p.level) for p in most[:16]]
    assert sorted(set(levels)) == [1, 2, 3, 4] and all(levels.count(k) == 4 for k in (1, 2, 3, 4))


def test_depth_sweep_bench_times_both_ways_over_the_same_rows(tiny_dir):
    from helpers.bench.depth_sweep import bench_depth_sweep

    report = bench_depth_sweep(str(tiny_dir), problems=2, span=2, max_new_tokens=4, shots=0, levels=(1,))
    assert report["truncations"] == ["stitch 4", "stitch 2", "stitch 3", "naive 2", "naive 3"]
    assert report["rows"] == 10
    separate, mixed = report["one_run_per_truncation"], report["one_mixed_run"]
    assert separate["decoded_tokens"] == mixed["decoded_tokens"] > 0
    assert report["rows_with_equal_tokens"] == 1.0  # tiny models in float32: no ties to part them
    assert 0 < report["blocks_run_beyond_the_truncation"] < 1 and report["speedup"] > 0
    with pytest.raises(ValueError, match="--span"):
        bench_depth_sweep(str(tiny_dir), span=0)


def test_the_barrier_bench_times_the_three_settings_side_by_side(tiny_dir):
    from helpers.bench.barriers import bench_barriers
    from helpers.engines.slot import SlotEngine

    before = SlotEngine.gather_above, SlotEngine.pack
    report = bench_barriers(str(tiny_dir), groups=2, particles=4, max_new_tokens=12, block_size=3, shots=0, repeats=1)
    assert set(report["decode_tokens_per_second"]) == {"ride_along", "gathered", "packed"} and report["rows"] == 8
    assert all(len(v) == 1 and v[0] > 0 for v in report["decode_tokens_per_second"].values())
    assert report["ratio_packed_vs_gathered"] > 0 and report["ratio_gathered_vs_ride_along"] > 0
    assert (SlotEngine.gather_above, SlotEngine.pack) == before  # the class's settings untouched
    with pytest.raises(ValueError, match="--particles"):
        bench_barriers(str(tiny_dir), groups=2, particles=0, max_new_tokens=12, block_size=3, shots=0)


def test_the_rows_bench_runs_whole_problems_at_each_size_and_refuses_bad_sizes():
    from helpers.bench.rows import bench_rows

    report = bench_rows(rows=(8, 20), particles=4, max_new_tokens=3, block_size=2)
    sizes = report["engines"]["slot"]
    assert {n: (s["rows"], s["decoded_tokens"]) for n, s in sizes.items()} == {"8": (8, 24), "20": (20, 60)}
    assert report["growth_per_row"]["slot"] > 0 and all(s["ms_per_row"] > 0 for s in sizes.values())
    with pytest.raises(ValueError, match="at least one problem"):
        bench_rows(rows=(2,), particles=4)
    with pytest.raises(ValueError, match="--particles"):
        bench_rows(rows=(8,), particles=0)


def test_where_sorts_cprofile_entries_into_kinds_of_work():
    from helpers.bench.where import OTHER_TORCH, PYTHON, kind_of, operator_name

    assert operator_name(("~", 0, "<built-in method torch._C._nn.linear>")) == "linear"
    assert operator_name(("~", 0, "<method 'copy_' of 'torch._C.TensorBase' objects>")) == "copy_"
    assert operator_name(("~", 0, "<built-in method builtins.len>")) is None  # a built-in, not a torch operator
    assert operator_name(("/x/engines/slot.py", 10, "linear")) is None  # a Python function that shares a name
    assert kind_of(("~", 0, "<built-in method torch._C._nn.linear>")) == "weight matmuls"
    assert kind_of(("~", 0, "<built-in method torch._C._nn.scaled_dot_product_attention>")) == "attention"
    assert kind_of(("~", 0, "<built-in method torch.multinomial>")) == "sampling and scoring"
    assert kind_of(("~", 0, "<method 'index_copy_' of 'torch._C.TensorBase' objects>")) == "KV cache and row moves"
    assert kind_of(("~", 0, "<built-in method torch.rsqrt>")) == OTHER_TORCH
    assert kind_of(("/x/engines/slot.py", 10, "step")) == PYTHON


def test_where_returns_the_jobs_result_and_accounts_for_its_time(tiny):
    from helpers.bench.where import where_time_goes
    from helpers.samplers.plain import decode

    model = tiny.module
    prompts = [[1, 2, 3], [4, 5]]
    done, split = where_time_goes(lambda: decode(model, prompts, 6, []))
    assert [c.tokens for c in done] == [c.tokens for c in decode(model, prompts, 6, [])]  # profiling changes nothing
    assert sum(k["share"] for k in split["kinds"].values()) == pytest.approx(1.0, abs=0.01)
    assert split["kinds"]["weight matmuls"]["seconds"] > 0  # the model's linear layers ran and were counted
    assert 0 < split["profiled_seconds"] <= split["wall_seconds"] * 1.05
    assert split["top"] == sorted(split["top"], key=lambda f: -f["seconds"])


def test_the_sampling_bench_says_where_a_jobs_time_goes_and_refuses_an_unknown_job(tiny_dir):
    from helpers.bench.sampling import JOBS, _batch_jobs, bench_sampling

    with pytest.raises(ValueError, match="--where takes jobs of greedy"):
        bench_sampling((str(tiny_dir),), (2,), where=("greedy", "beam"))
    report = bench_sampling((str(tiny_dir),), (2, 3), max_new_tokens=8, block_size=4, mcmc_steps=1, shots=0,
                            repeats=1, baseline=False, where=("greedy", "power_exact"))
    (model,) = report["models"].values()
    assert model["where"]["rows"] == 3 and set(model["where"]) == {"rows", "greedy", "power_exact"}
    assert model["where"]["power_exact"]["decoded_tokens"] > model["where"]["greedy"]["decoded_tokens"] > 0
    assert tuple(_batch_jobs(None, [[1]], [], [0], _searches())) == JOBS


def _searches():
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.settings import Searches
    from helpers.samplers.smc import SMCConfig
    from helpers.samplers.target import Target

    target = Target(2.0, 8)
    return Searches(target, PowerConfig(block_size=4, mcmc_steps=1), SMCConfig(particles=2, block_size=4))
