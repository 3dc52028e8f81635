"""Numbers from the papers the book compares with, kept as data with their source."""

from __future__ import annotations

# Hu et al. (2025), Table 1: effective depth (cosine, KL, top-5 overlap; 0-based layers) of Qwen2.5 models.
PUBLISHED_TABLE1: dict[str, dict] = {
    "Qwen2.5-1.5B-Instruct": {"layers": 28, "gsm8k": (20, 22, 23), "aime24": (19, 23, 23), "hellaswag": (16, 21, 23)},
    "Qwen2.5-Math-1.5B": {"layers": 28, "gsm8k": (16, 22, 23), "aime24": (16, 23, 23), "hellaswag": (16, 20, 23)},
    "Qwen2.5-7B-Instruct": {"layers": 28, "gsm8k": (20, 25, 26), "aime24": (18, 25, 26), "hellaswag": (17, 25, 26)},
    "Qwen2.5-Math-7B": {"layers": 28, "gsm8k": (11, 23, 24), "aime24": (16, 23, 24), "hellaswag": (16, 23, 24)},
    "Qwen2.5-14B-Instruct": {"layers": 48, "gsm8k": (32, 41, 45), "aime24": (30, 42, 45), "hellaswag": (27, 40, 45)},
    "Qwen2.5-14B": {"layers": 48, "gsm8k": (30, 40, 45), "aime24": (30, 42, 45), "hellaswag": (27, 40, 45)},
    "Qwen2.5-32B-Instruct": {"layers": 64, "gsm8k": (46, 58, 60), "aime24": (43, 58, 60), "hellaswag": (43, 60, 61)},
    "Qwen2.5-32B": {"layers": 64, "gsm8k": (46, 57, 59), "aime24": (46, 59, 60), "hellaswag": (43, 60, 61)},
}

# The report (seeds/000, §4.2): accuracy on "a subset of the MATH500 benchmark" (its size is not given) of power sampling (α = 2, N = 10, B = 192) on each
# model stitched to 26 of its 28 layers, against the full model's greedy decoding.
REPORT_HEADLINE: dict[str, dict] = {
    "Qwen2.5-Math-1.5B": {"layers": 28, "depth": 26, "power_truncated": 0.65, "greedy_full": 0.61},
    "Qwen2.5-Math-7B": {"layers": 28, "depth": 26, "power_truncated": 0.79, "greedy_full": 0.71},
}
REPORT_SUBSET = "a subset of MATH500 whose size the report does not give"
REPORT_IF_PROBLEMS = 100  # a size to derive an interval from, said as "if it were": a 95% interval is then about ±9 points

# The report's §4.2.4 settings: α, MH steps per block N, block size B and the mean answer length T it quotes.
REPORT_SETTINGS: dict[str, float] = {"alpha": 2.0, "mcmc_steps": 10, "block_size": 192, "length": 679}

# Karan and Du's published sampler (`mcmc_power_samp`, `block_num=16`, `max_new_tokens=3072`): the blocks an MH chain
# may run and the new tokens they hold, 16 of 192.
REFERENCE_LOOP: dict[str, int] = {"blocks": 16, "max_new_tokens": 3072}
