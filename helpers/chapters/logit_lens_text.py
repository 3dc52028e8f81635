"""Chapter 02's prose: the sentences, tables and glued values its page prints from a `logit_lens.LensStudy` and its
size contrast (the numbers are computed in `helpers.chapters.logit_lens`, which knows nothing of these words).
"""

from __future__ import annotations

from helpers.chapters.exercises import layer_name, rerun_command
from helpers.chapters.logit_lens import (
    LensStudy,
    SizeContrast,
)
from helpers.core.numbers import counted, listed
from helpers.evaluation.stats import percent_with_interval
from helpers.interp.lens import (
    lens_cut_points,
)
from helpers.models.registry import KNOWN_MODELS
from helpers.models.wheels import gguf_head


def result_values(study: LensStudy, n_problems: int) -> dict:
    """The numbers and the peak sentence the chapter's result paragraph glues (first model)."""
    first = study.summary[0]
    if first["kl_max_layer"] == 0:
        peak = ("The maximum sits at the embedding itself (layer 0)"
                + (", because this model ties its input and output embeddings: read through the unembedding, the "
                   "embedding of a token mostly predicts that same token again, which is far from the real next-token "
                   "distribution. " if first["tied"] else ". ")
                + "The half-maximum rule is therefore anchored on layer 0, the artefact that Hu et al. also report "
                  "for one of their models.")
    else:
        peak = f"The maximum sits at layer {first['kl_max_layer']}, inside the network."
    return {"model": first["model"], "n_layers": first["layers"], "n_problems_total": n_problems,
            "greedy_accuracy": 100 * first["accuracy"], "solution_tokens": first["solution_tokens"],
            "kl_max": first["kl_max"], "kl_max_layer": first["kl_max_layer"], "kl_last_tap": first["kl_last_tap"],
            "overlap_last_tap": first["overlap_last_tap"], "ed_kl": first["ed_kl"], "ed_overlap": first["ed_overlap"],
            "ratio_kl": first["ratio_kl"], "ratio_overlap": first["ratio_overlap"], "peak_sentence": peak,
            "cuts": ", ".join(str(c) for c in first["cuts"]) or "not defined (neither rule finds a layer)",
            "blocks_after_cut": first["layers"] - min(first["cuts"], default=first["layers"])}


EXERCISE_THRESHOLD = 0.5  # the overlap rule's threshold in exercise "a stricter overlap"


EXERCISE_FRACTION = 0.25  # the KL rule's fraction in the same exercise


def exercise_values(study: LensStudy, kl_fraction: float, overlap_threshold: float, profile: str) -> dict:
    """What the exercises' solutions quote (first model): the cut points under stricter rules, read from the
    chapter's curves as a re-run with those parameters would give them."""
    curves, first = study.curves[study.summary[0]["model"]], study.summary[0]
    ed_kl, ed_ov, _ = lens_cut_points(curves, EXERCISE_FRACTION, EXERCISE_THRESHOLD)
    return {"rerun_command": rerun_command(profile, "02_logit_lens", overlap_threshold=EXERCISE_THRESHOLD,
                                           kl_fraction=EXERCISE_FRACTION),
            "ex_threshold": EXERCISE_THRESHOLD, "ex_fraction": EXERCISE_FRACTION, "ex_ed_overlap": layer_name(ed_ov),
            "ex_ed_kl": layer_name(ed_kl), "ex_ed_overlap_chapter": layer_name(first["ed_overlap"]),
            "ex_ed_kl_chapter": layer_name(first["ed_kl"]),
            "ex_tied": tied_sentence(first["model"], first["tied"]) + " " + artefact_sentence(study)}


def artefact_sentence(study: LensStudy) -> str:
    """What this build shows of the layer-0 artefact: how often the explorer's lens at layer 0 (the first model's, as
    the token figure draws it) predicts the current token, where that model's KL curve peaks, and which models' curves
    peak at the embedding, the only ones whose KL rule the artefact sets."""
    peaks = {s["model"]: s["kl_max_layer"] for s in study.summary}
    first = study.summary[0]["model"]
    at_embedding = [m for m, layer in peaks.items() if layer == 0]
    text = ""
    ex = study.explorer
    if ex is not None and ex.get("top_tokens"):
        reads = sum(top[0] == token for token, top in zip(ex["tokens"], ex["top_tokens"][0], strict=True))
        text = (f"In the token figure ({first}), the lens at layer 0 predicts the current token at {reads} of "
                f"{counted(len(ex['tokens']), 'position')}. ")
    text += f"The KL curve of {first} peaks at layer {peaks[first]}"
    text += (", so there the artefact sets its KL rule." if peaks[first] == 0 else
             ", inside the network, where the middle layers' KL is larger still, so there the artefact does not set "
             "its KL rule.")
    others = [m for m in at_embedding if m != first]
    if others:
        text += f" It does where a curve peaks at the embedding: {listed(others)}."
    elif peaks[first] != 0:
        text += " No model's curve in this build peaks at the embedding."
    return text


def tied_sentence(name: str, tied: bool) -> str:
    """Whether the weights this build runs tie the embeddings, and, for an embedded model, why its GGUF file makes
    them differ from the published checkpoint's (an output matrix stored and quantized on its own)."""
    entry, head = KNOWN_MODELS.get(name), gguf_head(name)
    runs = f"The weights of {name} this build runs {'tie' if tied else 'do not tie'} their embeddings"
    if entry is None or head is None or tied or not head["separate"]:
        return runs + "."
    upstream = "The published checkpoint ties them, but its" if entry.tied_upstream else "Its"
    return (f"{runs}. {upstream} GGUF file stores the output matrix as a tensor of its own, quantized to "
            f"{head['output']} where the token embedding is {head['embedding']}, so the two differ by their rounding "
            "and the loader keeps both. They are two roundings of one matrix, so the argument above holds up to that "
            "rounding.")


def level_table(study: LensStudy) -> str:
    """Greedy accuracy per level and model with 95% intervals, and how many solutions hit the token limit."""
    levels = sorted({lv for s in study.summary for lv in s["by_level"]})
    head = "| model | " + " | ".join(f"level {lv}" for lv in levels) + " | cut off at the token limit |"
    rows = [head, "|---" * (len(levels) + 2) + "|"]
    for s in study.summary:
        cells = [percent_with_interval(c / n, n) if (c, n) != (0, 0) else "–"
                 for c, n in (s["by_level"].get(lv, (0, 0)) for lv in levels)]
        rows.append(f"| {s['model']} | " + " | ".join(cells) + f" | {s['cut_off']} of {s['n_problems']} |")
    return "\n".join(rows)


def summary_table(study: LensStudy) -> str:
    """One Markdown row per model: blocks, width, both effective depths, cut points, greedy accuracy."""
    rows = [f"| {s['model']} | {s['layers']} | {s['width']} | {s['ed_kl']} ({s['ratio_kl']:.2f}) | "
            f"{s['ed_overlap']} ({s['ratio_overlap']:.2f}) | {', '.join(map(str, s['cuts']))} | "
            f"{100 * s['accuracy']:.0f}% |" for s in study.summary]
    return "\n".join(["| model | blocks | width | KL ED (ratio) | overlap ED (ratio) | cut points | greedy accuracy |",
                      "|---|---|---|---|---|---|---|", *rows])


def gold_comparison(study: LensStudy, kl_fraction: float, overlap_threshold: float) -> tuple[dict, dict]:
    """(curves of both texts by label, {'gold_sentence': the sentence comparing their effective depths,
    'gold_summary': the same in a clause for the summary}) for the first model."""
    if not study.gold_curves:
        none = "This problem set has no gold solutions, so only generated text was read."
        return {}, {"gold_sentence": none, "gold_summary": none}
    both = {}
    for name, gold in study.gold_curves.items():
        both[f"{name} · generated"] = study.curves[name]
        both[f"{name} · gold"] = gold
    first = study.summary[0]
    ed_kl, ed_ov, _ = lens_cut_points(study.gold_curves[first["model"]], kl_fraction, overlap_threshold)
    sentence = (f"On the gold solutions the effective depths are layer {ed_kl} (KL) and layer {ed_ov} (overlap), "
                f"against {first['ed_kl']} and {first['ed_overlap']} on the model's own solutions. Chapter 01's "
                "lens reads gold text too, but over every position, prompt included, of fewer problems, so its "
                "effective depth on gold text need not equal this one, read over the solutions' positions only.")
    same = (ed_kl, ed_ov) == (first["ed_kl"], first["ed_overlap"])
    summary = ("Read on the gold solutions instead, both rules land on the same layers." if same else
               f"Read on the gold solutions instead, the rules land on layers {ed_kl} and {ed_ov}.")
    return both, {"gold_sentence": sentence, "gold_summary": summary}


def report_comparison(study: LensStudy) -> str:
    """Where the first model's KL rule settles, set beside the report's and Hu et al.'s Qwen2.5-Math numbers."""
    s = study.summary[0]
    ratio = s["ratio_kl"]
    low, high = (21 + 1) / 28, (25 + 1) / 28  # the report's layers 21-25 of 28, in Hu et al.'s (l + 1) / L
    relation = ("earlier in relative depth than" if ratio < low else "at a similar relative depth to" if ratio <= high
                else "later in relative depth than")
    return (f"For {s['model']} the KL rule settles at ratio (ED + 1) / L = {ratio:.2f}, {relation} the Qwen2.5-Math "
            f"models (0.82 and 0.86 in Hu et al.; the report's drop at layers 21–25 of 28 is {low:.2f}–{high:.2f} in "
            f"the same convention, 0.75–0.89 as l / L); the overlap rule gives {s['ratio_overlap']:.2f} against 0.86 "
            "and 0.89.")


def size_values(contrast: SizeContrast | None) -> dict:
    """The glued numbers and sentence of the two-size section: which model drops later and which more smoothly, said
    only where the paired interval excludes zero, and set beside the report's 7B against 1.5B."""
    if contrast is None:
        return {"size_sentence": "This build runs one size of each model family, so it has no two curves of one "
                                 "family to set side by side; the `full` profile runs Qwen2.5-Coder at 0.5B and 1.5B."}
    c = contrast
    (ds, dl), (ss, sl) = c.drop, c.steepest

    def direction(lo: float, hi: float, more: str, less: str) -> str | None:
        return more if lo > 0 else less if hi < 0 else None

    later = direction(*c.drop_interval, "later", "earlier")
    smoother = direction(*c.steep_interval, "more abrupt", "smoother")
    drop = (f"the larger model's KL drops {later} in relative depth" if later else
            "the two drops sit at relative depths these problems cannot tell apart")
    shape = (f"and the larger model's curve is {smoother}" if smoother else
             "and their steepness cannot be told apart")
    agrees = [later == "later", smoother == "smoother"]
    verdict = ("as the report saw for Qwen2.5-Math-7B against 1.5B" if all(agrees) else
               "partly as the report saw for Qwen2.5-Math-7B against 1.5B (a later, smoother drop)" if any(agrees) else
               "where the report saw a later, smoother drop for Qwen2.5-Math-7B against 1.5B")
    ls, ll = c.layers  # the figure's axis is l / L, the tap's own place; Hu et al.'s ratio counts the block it feeds
    sentence = (f"On the same {c.n_problems} problems, {c.large}'s KL falls below half its maximum at depth ratio "
                f"(ED + 1) / L = {dl:.2f} against {ds:.2f} for {c.small} (Hu et al.'s ratio; on the figure's axis l / L "
                f"the taps sit at {dl - 1 / ll:.2f} and {ds - 1 / ls:.2f}; paired 95% interval of the difference "
                f"[{c.drop_interval[0]:+.2f}, {c.drop_interval[1]:+.2f}]), and its steepest fall across one block is "
                f"{100 * sl:.0f}% of its whole fall against {100 * ss:.0f}% (interval "
                f"[{100 * c.steep_interval[0]:+.0f}, {100 * c.steep_interval[1]:+.0f}] points): {drop}, {shape}, "
                f"{verdict}.")
    return {"size_small": c.small, "size_large": c.large, "size_drop_small": ds, "size_drop_large": dl,
            "size_steep_small": 100 * ss, "size_steep_large": 100 * sl, "size_sentence": sentence}
