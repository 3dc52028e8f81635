"""A chapter that runs several models (or one model in two formats) holds one of them in memory at a time.

A sweep that kept the first model alive, through its truncations, while the second one loaded and decoded would
need both models' memory at once, which a laptop's 8 GiB does not hold for the default book.
"""

from __future__ import annotations

import gc
import weakref

import pytest
from conftest import tiny_problems

from helpers.models.tiny import make_tiny

PROBLEMS = tiny_problems()

pytestmark = pytest.mark.once  # what holds a model is this project's code, the same under every transformers


@pytest.fixture
def two_models(tmp_path_factory) -> list[str]:
    return [str(make_tiny(kind, tmp_path_factory.mktemp(f"two-{kind}"))) for kind in ("llama", "qwen2")]


def _one_at_a_time(module, monkeypatch) -> list[str]:
    """Make `module.load_model` fail if a model it handed out earlier is still alive when the next one loads."""
    real = module.load_model
    alive: list[tuple[str, weakref.ref]] = []
    loaded: list[str] = []

    def load_model(name, *args, **kwargs):
        gc.collect()
        held = [earlier for earlier, ref in alive if ref() is not None]
        assert not held, f"{held} still in memory while {name} loads"
        model = real(name, *args, **kwargs)
        alive.append((name, weakref.ref(model.module)))  # its weights: what a second model beside it would double
        loaded.append(name)
        return model

    monkeypatch.setattr(module, "load_model", load_model)
    return loaded


def test_the_depth_sweep_holds_one_model_at_a_time(two_models, tmp_path, monkeypatch):
    from helpers.chapters import stitch

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    loaded = _one_at_a_time(stitch, monkeypatch)
    settings = stitch.SweepSettings(dataset="arithmetic", n_problems=len(PROBLEMS), levels=None, seed=0, shots=0,
                                    max_new_tokens=4, depths=None, span=1, depth_step=1, kl_fraction=0.5,
                                    overlap_threshold=0.3, collapse_fraction=0.5)
    sweeps = stitch.sweep(two_models, PROBLEMS, settings, methods=["stitch", "naive"], n_agreement=1, batch_size=4)
    assert loaded == two_models and set(sweeps) == set(two_models)


def test_the_lens_study_holds_one_model_at_a_time(two_models, tmp_path, monkeypatch):
    from helpers.chapters import logit_lens

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    loaded = _one_at_a_time(logit_lens, monkeypatch)
    study = logit_lens.lens_study(two_models, PROBLEMS, max_new_tokens=4, shots=0, batch_size=4, kl_fraction=0.5,
                                  overlap_threshold=0.3, explorer_positions=2)
    assert loaded == two_models and len(study.summary) == 2


def test_the_appendix_holds_one_format_at_a_time(two_models, tmp_path, monkeypatch):
    from helpers.chapters import precision

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    loaded = _one_at_a_time(precision, monkeypatch)
    precision.compare_dtypes(two_models[0], PROBLEMS, PROBLEMS[:1], max_new_tokens=4, shots=0, batch_size=2,
                             n_lens=1, span=1)
    assert loaded == [two_models[0]] * 2


@pytest.mark.parametrize("sampler", ["power", "smc"])
def test_a_finished_run_leaves_no_reference_to_its_kv_buffer(tiny, monkeypatch, sampler):
    """With the collector off, the slot engine's KV buffer (GBs at a full batch) is freed when its run returns: the
    loop calls the engine and the engine never calls back, so no reference cycle keeps the buffer alive."""
    from helpers.engines import slot
    from helpers.engines.registry import make_engine
    from helpers.samplers.power import PowerConfig, run_chains
    from helpers.samplers.smc import SMCConfig, run_smc
    from helpers.samplers.target import Target

    model, tokenizer = tiny.module, tiny.tokenizer
    caches, steps = [], []
    init, step = slot.SlotCache.__init__, slot.SlotEngine.step

    def watched_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        caches.append(weakref.ref(self))

    def watched_step(self):
        steps.append(1)
        return step(self)

    monkeypatch.setattr(slot.SlotCache, "__init__", watched_init)
    monkeypatch.setattr(slot.SlotEngine, "step", watched_step)
    prompts = [tokenizer(t)["input_ids"] for t in ["Ada has 3 apples .", "0 1 2"]]
    engine = make_engine("slot", model)
    gc.disable()
    try:
        if sampler == "power":
            done = run_chains(engine, prompts, [tokenizer.eos_token_id], Target(2.0, 8),
                              PowerConfig(block_size=4, mcmc_steps=2), [1, 2])
        else:
            done = run_smc(engine, prompts, [tokenizer.eos_token_id], Target(2.0, 8),
                           SMCConfig(particles=2, block_size=4, ess_threshold=1.0), [1, 2])
        assert len(done) == 2 and caches and steps
        assert [ref() for ref in caches] == [None] * len(caches)  # freed by reference counting alone
    finally:
        gc.enable()
