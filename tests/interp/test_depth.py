"""Chapter 01's library: per-problem records, effective depths, depth scores, linear maps and the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from helpers.data.arithmetic import arithmetic_problems
from helpers.data.problems import interleaved
from helpers.data.sequences import analysis_sequence
from helpers.interp.depth import (
    analysis_run,
    answer_splits,
    combine,
    curves,
    depth_scores_by_level,
    effective_depths,
    profiles,
    skip_effects_over,
)
from helpers.interp.layer_maps import check_same_tokenizer, fit_maps, residual_states
from helpers.results.kinds import DEPTH_PROFILE, SKIP_EFFECTS


@pytest.fixture()
def problems():
    return arithmetic_problems(1, levels=[1, 2])


def test_analysis_sequence_marks_the_solution(smol, problems):
    tokenizer = smol.tokenizer
    ids, start = analysis_sequence(tokenizer, problems[0])
    assert 0 < start < len(ids)
    assert tokenizer.decode(ids[:start]).endswith("\nAnswer:")
    assert tokenizer.decode(ids[start:]).strip() == problems[0].solution


def test_profiles_resume_and_reduce(tiny, problems, tmp_path):
    model, info = tiny, tiny.info
    records = profiles(model, problems, root=tmp_path, progress=False)
    assert len(analysis_run(DEPTH_PROFILE, model, tmp_path)) == len(problems)
    again = profiles(model, problems, root=tmp_path, progress=False)
    assert records == again
    c = curves(records, "tokens")
    L = info.n_layers
    assert all(len(v) == L for v in c.values())
    assert (c["kl"] >= 0).all() and ((c["overlap"] >= 0) & (c["overlap"] <= 1)).all()
    report = effective_depths(c)
    assert report["n_layers"] == L
    for rule, ed in report["effective_depth"].items():
        assert ed is None or 0 <= ed <= L - 2
        assert report["ratio"][rule] is None or report["ratio"][rule] == pytest.approx((ed + 1) / L, abs=1e-3)


def test_effective_depth_rules_on_known_curves():
    L = 6
    c = {"kl": np.array([10, 9, 6, 4, 1, 0.1]), "overlap": np.array([0, 0.1, 0.2, 0.4, 0.8, 1]),
         "cos_mean": np.array([0.1, -0.2, 0.1, -0.1, 0.2, -0.3])}
    report = effective_depths(c)
    assert report["effective_depth"] == {"cosine": 3, "kl": 3, "overlap": 3}
    assert report["ratio"]["kl"] == pytest.approx(4 / L, abs=1e-3)
    stricter = effective_depths(c, kl_fraction=0.2, overlap_threshold=0.5)
    assert stricter["effective_depth"]["kl"] == 4 and stricter["effective_depth"]["overlap"] == 4
    c["cos_mean"] = np.ones(L)
    assert effective_depths(c)["effective_depth"]["cosine"] is None


def test_skip_effects_over_problems(tiny, problems, tmp_path):
    model, info = tiny, tiny.info
    future = skip_effects_over(model, problems, "layer", n_splits=2, root=tmp_path, progress=False)
    assert len(future) == len(problems) and all(len(e.splits) == 2 for e in future)
    matrix, output = combine(future)
    L = info.n_layers
    assert matrix.shape == (L, L) and output.shape == (L,)
    assert np.tril(matrix).max() == 0.0  # future effects: nothing on or below the skipped layer
    current = skip_effects_over(model, problems, "layer", None, root=tmp_path, progress=False)
    assert np.allclose(np.diag(combine(current)[0]), 1.0, atol=1e-5)


def test_depth_scores_by_level(tiny, tmp_path):
    model, info = tiny, tiny.info
    problems = arithmetic_problems(2, levels=[1, 5])
    scores = depth_scores_by_level(model, problems, n_splits=2, root=tmp_path, progress=False)
    assert sorted(scores) == [1, 5]
    for s in scores.values():
        assert s["n"] == 2 and 0 <= s["layer_score"] <= info.n_layers - 1
        assert s["layer_score_relative"] == pytest.approx(s["layer_score"] / (info.n_layers - 1))


def test_answer_splits_stay_in_the_solution():
    splits = answer_splits(20, 60, n=4, seed=0)
    assert len(splits) == 4 and all(20 <= t < 56 for t in splits) and splits == sorted(splits)


def test_interleaved_takes_levels_in_turn():
    problems = arithmetic_problems(2, levels=[1, 2, 3])
    assert [p.level for p in interleaved(problems, 4)] == [1, 2, 3, 1]


def test_linear_map_from_a_model_to_itself(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    generator = torch.Generator().manual_seed(0)  # training text that uses every token of the tiny vocabulary
    train_seqs = [torch.randint(len(tokenizer), (30,), generator=generator).tolist() for _ in range(20)]
    test_seqs = [tokenizer(p.question)["input_ids"] for p in arithmetic_problems(1)]
    train, test = residual_states(model, train_seqs), residual_states(model, test_seqs)
    errors = fit_maps(train, train, test, test, ridge=1e-8)
    L = model.config.num_hidden_layers
    assert errors.shape == (L + 1, L + 1)
    assert np.diag(errors).max() < 1e-3  # the identity is in reach of every same-layer map
    assert errors.max() <= 1.5


def test_maps_refuse_different_tokenizers(tiny):
    tokenizer = tiny.tokenizer
    from transformers import AutoTokenizer

    other = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    check_same_tokenizer(tokenizer, other)
    other.add_tokens(["zzz-new-token"])
    with pytest.raises(ValueError, match="share a tokenizer"):
        check_same_tokenizer(tokenizer, other)


def test_cli_prints_json(tiny_dir, tmp_path, monkeypatch, capsys):
    from helpers.cli import main

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    assert main(["effective-depth", "--model", str(tiny_dir), "--dataset", "arithmetic", "--n", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_layers"] == 4 and report["n_problems"] == 3
    assert set(report["effective_depth"]) == {"cosine", "kl", "overlap"}
    assert main(["effective-depth", "--model", str(tiny_dir), "--n", "0"]) == 2
    assert "--n" in capsys.readouterr().err
    assert torch.is_grad_enabled()  # the command line leaves the caller's autograd mode alone


def test_analysis_keys_follow_the_model_the_settings_and_the_text(tiny, problems, tmp_path):
    model = tiny
    base = analysis_run(SKIP_EFFECTS, model, tmp_path, part="layer", splits=2, seed=0).hash
    others = [analysis_run(SKIP_EFFECTS, model, tmp_path, part="attn", splits=2, seed=0).hash,
              analysis_run(SKIP_EFFECTS, model, tmp_path, part="layer", splits=3, seed=0).hash,
              analysis_run(SKIP_EFFECTS, model, tmp_path, part="layer", splits=2, seed=1).hash,
              analysis_run(SKIP_EFFECTS, model.truncated(2, "stitch"), tmp_path, part="layer", splits=2,
                           seed=0).hash]
    assert base not in others and len(set(others)) == len(others)
    # An edited problem with the same id is a new unit, not a stale record.
    profiles(tiny, problems[:1], root=tmp_path, progress=False)
    edited = dataclasses.replace(problems[0], solution=problems[0].solution + " so")
    profiles(tiny, [edited], root=tmp_path, progress=False)
    assert len(analysis_run(DEPTH_PROFILE, model, tmp_path)) == 2


@pytest.mark.parametrize("n_test", [3, 30])
def test_linear_map_errors_equal_those_of_explicitly_fitted_weights(n_test):
    """Whichever order fit_maps multiplies in (through the weights for many test tokens, through each token's reach
    for few), its errors equal those of the ridge weights solved outright."""
    from helpers.interp.layer_maps import weights_first

    assert weights_first(40, n_test, 7) == (n_test == 30)
    g = torch.Generator().manual_seed(0)
    src_train, src_test = torch.randn(3, 40, 6, generator=g), torch.randn(3, n_test, 6, generator=g)
    tgt_train, tgt_test = torch.randn(4, 40, 5, generator=g), torch.randn(4, n_test, 5, generator=g)
    ridge = 0.1
    errors = fit_maps(src_train, tgt_train, src_test, tgt_test, ridge=ridge)
    ones = torch.ones(40, 1, dtype=torch.float64)
    for i in range(3):
        x = torch.cat([src_train[i].double(), ones], 1)
        gram = x.T @ x
        lam = ridge * float(gram.diagonal().mean())
        x_test = torch.cat([src_test[i].double(), ones[:n_test]], 1)
        for j in range(4):
            weights = torch.linalg.lstsq(torch.cat([x, lam ** 0.5 * torch.eye(7, dtype=torch.float64)]),
                                         torch.cat([tgt_train[j].double(), torch.zeros(7, 5, dtype=torch.float64)])
                                         ).solution
            y = tgt_test[j].double()
            expected = ((x_test @ weights - y).norm(dim=-1) / y.norm(dim=-1)).mean()
            assert abs(errors[i, j] - float(expected)) < 1e-9
