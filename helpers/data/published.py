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
