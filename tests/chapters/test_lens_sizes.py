"""Chapter 02's two-size contrast: which pair it compares, and a sentence that claims a direction only where the
paired interval over problems supports it."""

from __future__ import annotations

import numpy as np

from helpers.chapters.logit_lens import LensStudy, size_contrast, size_pair
from helpers.chapters.logit_lens_text import size_values


def _curve(n_layers: int, drop_at: float, width: float, n_problems: int, seed: int) -> np.ndarray:
    """KL curves that fall from 20 nats around relative depth `drop_at` over about `width` of the depth."""
    rng = np.random.default_rng(seed)
    x = np.arange(n_layers) / n_layers
    base = 20 / (1 + np.exp((x - drop_at) / width))
    return np.clip(base[None, :] + rng.normal(0, 0.3, (n_problems, n_layers)), 0, None)


def _study(curves: dict[str, np.ndarray], widths: dict[str, int], family: dict[str, str]) -> LensStudy:
    study = LensStudy()
    for name, kl in curves.items():
        study.curves[name] = {"kl": kl, "overlap": np.zeros_like(kl)}
        study.summary.append({"model": name, "width": widths[name], "size": float(widths[name]) ** 2 * kl.shape[1],
                              "family": family[name], "layers": kl.shape[1]})
    return study


def test_the_pair_is_two_widths_of_one_family():
    kl = _curve(24, 0.7, 0.02, 4, 0)
    study = _study({"small": kl, "other": kl, "large": kl}, {"small": 896, "other": 576, "large": 1536},
                   {"small": "qwen2", "other": "llama", "large": "qwen2"})
    assert size_pair(study) == ("small", "large")
    assert size_pair(_study({"a": kl, "b": kl}, {"a": 1, "b": 2}, {"a": "x", "b": "y"})) is None
    assert "one size of each model family" in size_values(None)["size_sentence"]


def test_a_later_smoother_drop_is_said_and_a_tie_is_not():
    study = _study({"small": _curve(24, 0.70, 0.01, 20, 1), "large": _curve(28, 0.82, 0.06, 20, 2)},
                   {"small": 896, "large": 1536}, {"small": "qwen2", "large": "qwen2"})
    contrast = size_contrast(study, 0.5, n_boot=300)
    assert contrast.drop[1] > contrast.drop[0] and contrast.steepest[1] < contrast.steepest[0]
    assert contrast.drop_interval[0] > 0 and contrast.steep_interval[1] < 0
    sentence = size_values(contrast)["size_sentence"]
    assert "drops later" in sentence and "smoother" in sentence and "as the report saw" in sentence
    (ls, ll), (ds, dl) = contrast.layers, contrast.drop  # one quantity per name: the ratio, and where the figure puts it
    assert f"(ED + 1) / L = {dl:.2f} against {ds:.2f}" in sentence
    assert f"on the figure's axis l / L the taps sit at {dl - 1 / ll:.2f} and {ds - 1 / ls:.2f}" in sentence
    same = _curve(24, 0.7, 0.03, 20, 3)
    tie = size_contrast(_study({"small": same, "large": same}, {"small": 1, "large": 2}, {"small": "q", "large": "q"}),
                        0.5, n_boot=300)
    text = size_values(tie)["size_sentence"]
    assert "cannot tell apart" in text and "cannot be told apart" in text and "later" not in text.split(":")[-1][:60]
