"""Chapter 01's prose: the sentences, tables and glued values its page prints from each model's
`effective_depth.ModelStudy` and the linear maps (the numbers are computed in `helpers.chapters.effective_depth`,
which knows nothing of these words).
"""

from __future__ import annotations

from helpers.chapters.effective_depth import (
    CLEAR_DROP,
    ERASURE_THRESHOLD,
    RULES,
    LinearMaps,
    ModelStudy,
    contributions,
    depth_trend,
    erasure_reach,
    ig_early_share,
    kl_peak,
    map_gap,
    negative_cosines,
    next_layer_error,
)
from helpers.chapters.exercises import kl_below, layer_name, rerun_command
from helpers.core.numbers import counted, listed
from helpers.data.arithmetic import LEVELS
from helpers.data.published import PUBLISHED_TABLE1
from helpers.interp.depth import (
    effective_depths,
)


def cosine_values(r: ModelStudy) -> dict:
    """How many layers erase more than they add, and the cosine effective depth."""
    ed = r.ed["effective_depth"]["cosine"]
    sentence = ("The averaged cosine never turns from negative to non-negative, so the cosine rule finds no "
                "effective depth on this model." if ed is None else
                f"Its last turn from negative to non-negative comes after layer **{ed}**, the last negative layer before it "
                f"(ratio (ED+1)/L = "
                f"{r.ed['ratio']['cosine']:.2f}).")
    return {"n_negative": negative_cosines(r), "ed_cos": ed, "cos_sentence": sentence}


def ratio_phrase(ratios: dict[str, float | None]) -> str:
    """The three rules' ratios (ED+1)/L as one phrase, a rule that finds no layer said in words: '0.71 (cosine),
    0.85 (KL) and 0.92 (overlap)', or '0.85 (KL) and 0.92 (overlap); the cosine rule finds no layer'."""
    names = {"cosine": "cosine", "kl": "KL", "overlap": "overlap"}
    found = [f"{ratios[rule]:.2f} ({names[rule]})" for rule in RULES if ratios.get(rule) is not None]
    missing = [names[rule] for rule in RULES if ratios.get(rule) is None]
    text = ", ".join(found[:-1]) + (" and " if len(found) > 1 else "") + (found[-1] if found else "")
    if not missing:
        return text
    lack = f"the {' and '.join(missing)} rule{'s' if len(missing) > 1 else ''} find{'' if len(missing) > 1 else 's'} no layer"
    return f"{text}; {lack}" if found else f"not defined: {lack}"


def lens_values(r: ModelStudy) -> dict:
    """The lens section's numbers, and whether its KL rule is anchored on the embedding in this build (a peak at
    layer 0), said in the words the peak supports."""
    peak, height = kl_peak(r)
    hu = ("Hu et al. list an effective depth of 1 for R1-Distill-1.5B on GSM8K, which such a peak would explain "
          "(the reading is this book's, not theirs)")
    anchor = (f"With the peak at layer 0, the half-maximum rule is anchored on the embedding; {hu}. It makes the KL "
              "rule the least reliable of the three here." if peak == 0 else
              f"With the peak at layer {peak}, past the embedding, the half-maximum rule is not anchored on it here; "
              f"where the peak is at layer 0 it would be, and {hu}.")
    return {"ed_kl": r.ed["effective_depth"]["kl"], "ed_overlap": r.ed["effective_depth"]["overlap"],
            "ratio_kl": r.ed["ratio"]["kl"], "ratio_overlap": r.ed["ratio"]["overlap"],
            "kl_peak_layer": peak, "kl_peak": height, "kl_anchor": anchor}


def erasure_values(r: ModelStudy) -> dict:
    """The last boundary at which erasing a context token still moves the answer, per probe (`erasure_fact_said`:
    the fact probe's, said in words where it is −1, no boundary at all)."""
    last_use = erasure_reach(r)
    fact = last_use[-1]
    return {"erasure_arith": last_use[0], "erasure_fact": fact, "erasure_threshold": ERASURE_THRESHOLD,
            "erasure_fact_said": "none, not even the embedding (−1)" if fact == -1 else str(fact)}


def ig_values(r: ModelStudy, ig_steps: int, probe_stride: int) -> dict:
    """The share of the arithmetic probe's attribution (first component) that lies in the first half, and the
    sentence that says which rows the two probe figures leave blank, or that none is."""
    blank = ("Every boundary was computed, as in the papers." if probe_stride == 1 else
             f"Rows left blank in this figure and the erasure figure were not computed in this profile: it runs the "
             f"probes at one boundary in {probe_stride} (`probe_stride`).")
    return {"ig_early": ig_early_share(r), "ig_steps": ig_steps, "blank_rows": blank}


def contribution_values(r: ModelStudy) -> dict:
    """`contributions` with `rc_verdict`, the sentence that says whether the second half writes clearly less by the
    medians, and `rc_summary`, the same verdict as a clause for the chapter's summary."""
    values = contributions(r)
    ratio = values["rc_median_ratio"]
    clear = ratio >= CLEAR_DROP
    verdict = (f"By each half's median block, which one layer's spike cannot move, the ratio is {ratio:.2f}, so the "
               "second half writes clearly less here too." if clear else
               f"By each half's median block, which one layer's spike cannot move, the ratio is {ratio:.2f}: on this "
               "model the second half does not write clearly less, and the mean's ratio rests on a few early layers.")
    summary = ("and its median block clearly less too" if clear else
               f"but its median block only {ratio:.2f} times less, so a few early layers carry the mean")
    return {**values, "rc_verdict": verdict, "rc_summary": summary}


FLAT_SPREAD = 0.1  # the depth score varies less than this over the levels: flat, as Hu et al. report it


def depth_values(r: ModelStudy, n_problems: int) -> dict:
    """The trend of the depth score over difficulty levels, as a sentence, and as a clause for the summary."""
    trend = depth_trend(r)
    if trend is not None:
        slope, low, high, levels = trend
        sentence = (f"The score moves by {slope:+.3f} per level (least-squares slope), between "
                    f"{low:.2f} and {high:.2f} over levels {levels[0]}–{levels[-1]}.")
        summary = (f"harder problems use no clearly deeper computation: across levels {levels[0]}–{levels[-1]} the "
                   f"depth score stays within {high - low:.2f}" if high - low < FLAT_SPREAD else
                   f"the depth score spans {high - low:.2f} across levels {levels[0]}–{levels[-1]}")
    else:
        sentence = "Only one difficulty level was run, so there is no trend to read."
        summary = "one difficulty level ran, so difficulty says nothing here"
    return {"depth_trend": sentence, "depth_summary": summary, "depth_n": n_problems}



EXERCISE_FRACTIONS = (0.25, 0.75)  # the KL rule's fraction in exercise "other fractions"


EXERCISE_NATS = 1.0  # the absolute rule's threshold in exercise "a rule of your own"


def exercise_values(r: ModelStudy, kl_fraction: float, overlap_threshold: float, profile: str) -> dict:
    """What the exercises' solutions quote: the KL rule at other fractions (read from the chapter's curves, as
    a re-run with those parameters would) and the absolute rule of `helpers.chapters.exercises.kl_below`."""
    low, high = (effective_depths(r.curves, f, overlap_threshold)["effective_depth"]["kl"] for f in EXERCISE_FRACTIONS)
    return {"rerun_command": rerun_command(profile, "01_effective_depth", kl_fraction=EXERCISE_FRACTIONS[0]),
            "ex_fraction_low": EXERCISE_FRACTIONS[0], "ex_fraction_high": EXERCISE_FRACTIONS[1],
            "ex_ed_low": layer_name(low), "ex_ed_high": layer_name(high),
            "ex_ed_chapter": layer_name(r.ed["effective_depth"]["kl"]), "ex_fraction": kl_fraction,
            "ex_nats": EXERCISE_NATS, "ex_ed_nats": layer_name(kl_below(r.curves["kl"], EXERCISE_NATS))}


def _cell(report: dict, rule: str) -> str:
    ed, ratio = report["effective_depth"][rule], report["ratio"][rule]
    return "—" if ed is None else f"{ed} ({ratio:.2f})"


RULE_NAMES = {"cosine": "cosine", "kl": "KL", "overlap": "top-5 overlap"}


def effective_depth_line(results: dict[str, ModelStudy]) -> str:
    """Each model's three effective depths in a sentence (the study's first result, before the sections explain it):
    'qwen2.5-coder-0.5b (24 blocks): cosine 13, KL 19, top-5 overlap 21.'"""
    return ("Effective depth by each rule (a layer counted from 0, as Hu et al. count it: for the cosine rule the "
            "last block whose update still opposes the residual before the mean cosine turns non-negative for good, "
            "for the two lens rules the residual stream entering block l, which l blocks "
            "produce, so chapter 02's cut points keep that same number of blocks): ") + "; ".join(
        f"{name} ({r.n_layers} blocks): " + ", ".join(
            f"{RULE_NAMES[k]} {'not reached' if r.ed['effective_depth'][k] is None else r.ed['effective_depth'][k]}"
            for k in RULES) for name, r in results.items()) + "."


def effective_depth_table(results: dict[str, ModelStudy], dataset: str) -> str:
    """Every model's three effective depths, overall and per level, beside Hu et al.'s Table 1 (Markdown)."""
    rows = ["| model | L | text | cosine | KL | top-5 overlap |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        rows.append(f"| **{name}** | {r.n_layers} | {dataset}, all levels | "
                    + " | ".join(_cell(r.ed, k) for k in RULES) + " |")
        for lvl, rep in r.ed_by_level.items():
            rows.append(f"| {name} | {r.n_layers} | level {lvl} | " + " | ".join(_cell(rep, k) for k in RULES) + " |")
    for name, pub in PUBLISHED_TABLE1.items():
        for data in ("gsm8k", "aime24"):
            rows.append(f"| {name} (Hu et al.) | {pub['layers']} | {data} | "
                        + " | ".join(f"{e} ({(e + 1) / pub['layers']:.2f})" for e in pub[data]) + " |")
    return "\n".join(rows)


def published_values(r: ModelStudy) -> dict:
    """The published ratio ranges per rule, this model's spread over levels and its cosine ratio."""
    values = {}
    for i, rule in enumerate(RULES):
        ratios = [(p[d][i] + 1) / p["layers"] for p in PUBLISHED_TABLE1.values() for d in ("gsm8k", "aime24")]
        values[f"pub_{rule}_lo"], values[f"pub_{rule}_hi"] = min(ratios), max(ratios)
    spread = {rule: [rep["ratio"][rule] for rep in r.ed_by_level.values() if rep["ratio"][rule] is not None]
              for rule in RULES}
    values["level_spread"] = ", ".join(f"{rule} {min(v):.2f}–{max(v):.2f}" for rule, v in spread.items() if v) \
        or "not defined"
    values["our_ratios"] = ratio_phrase(r.ed["ratio"])
    return values


def map_values(maps: LinearMaps) -> dict:
    """How far from equal relative depth each source layer's best target lies, and the sentence saying so."""
    pair, gap, lt = maps.pair, map_gap(maps), maps.errors.shape[1] - 1
    if maps.self_map:
        next_error = next_layer_error(maps)
        sentence = (f"No pair of models was named (`map_models`), so the map runs from {pair[0]} to itself. The "
                    "diagonal is then zero up to the ridge term, which checks the fit; the rest of the matrix says "
                    "how well each layer predicts the others. Even the map from one boundary to the next leaves a "
                    f"relative error of {next_error:.2f} on held-out tokens. With {maps.train_tokens} training tokens "
                    f"for {maps.input_dims} input dimensions, part of that error is the small sample. To run the paper's experiment, name a shallow and a "
                    "deep model with one tokenizer, for example `-p 'map_models=[Qwen/Qwen2.5-1.5B, "
                    "Qwen/Qwen2.5-3B]'` (28 and 36 blocks); the `paper` profile does this.")
    else:
        sentence = (f"Each source layer of {pair[0]} is best predicted by the target layer of {pair[1]} at a "
                    f"relative depth {gap:.2f} away from its own, on average (0 = exactly equal relative depth; one "
                    f"block of {pair[1]} is {1 / lt:.3f} of its depth), from {maps.train_tokens} training tokens for "
                    f"{maps.input_dims} input dimensions.")
        blocks = gap * lt
        sentence += (f" That is about {blocks:.0f} blocks of {pair[1]}, " + (
            "close to the equal-relative-depth diagonal Csordás et al. find across sizes." if blocks <= 2 else
            "off the equal-relative-depth diagonal Csordás et al. find across sizes. This build cannot tell whether "
            f"these models differ or the fit is too small a sample: {maps.train_tokens / maps.input_dims:.1f} training "
            "tokens per input dimension (`map_tokens` raises it)."))
    return {"map_tokens_train": maps.train_tokens, "map_gap": gap, "map_sentence": sentence}


def skip_scope(problems) -> str:
    """Which problems the layer-skip heat-maps take their maximum over, and, for generated arithmetic, how many operations each
    answer takes: on single-step problems the future effects cannot show how a multi-step computation is spread."""
    text = f"The skip figures take the maximum over {counted(len(problems), 'problem')} ({listed([p.id for p in problems])})"
    if not problems or not all(p.id.startswith("arith-") and p.level in LEVELS for p in problems):
        return text + "."
    steps = sorted({LEVELS[p.level].n_ops for p in problems})
    text += f", whose answers take {listed([str(s) for s in steps])} operation{'s' if steps != [1] else ''}"
    if max(steps) <= 1:
        return text + (": single-step problems, so these figures show how a skip moves a one-step computation, not "
                       "how a multi-step one is spread over the depth, as the papers' problems can.")
    return text + "."
