"""The audit computes every kind of stored study again: honest records pass, an edited one fails with its deviation,
and a record that cannot be audited here is counted with the reason."""

from __future__ import annotations

import copy

import pytest

from helpers.evaluation.audit_studies import STUDIES, audit_records, reason
from helpers.results.kinds import KINDS
from helpers.runner.publish import sample_each_kind, stored_records

# The audit's own logic, the same under every transformers: one run. Every kind is computed and then computed again,
# the suite's longest unit test, so `make test` leaves this module to `make check` (CI), refusals included.
pytestmark = [pytest.mark.once, pytest.mark.studies_audit]


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """SmolLM2's stored studies of two problems, as chapters 01-04 store them: greedy solutions, the lens over them and
    the lens explorer's table of one, a stitched truncation's agreement, a gold text's profile, skip effects and depth score, the probes' erasure and
    integrated gradients, the critical depth of a two-depth sweep, and the toy curves; every record of the store."""
    from helpers.chapters.effective_depth import _probes, linear_maps  # chapter 01's probes and maps
    from helpers.chapters.power_sampling import toy_convergence
    from helpers.data.sources import load_problems
    from helpers.evaluation.critical import SweepSettings, store_critical
    from helpers.evaluation.decodes import DecodeSettings, sample_at_depths
    from helpers.evaluation.solutions import solutions_and_lens
    from helpers.interp.depth import depth_scores_by_level, profiles, skip_effects_over
    from helpers.interp.studies import agreement_over, lens_explorer_table
    from helpers.models.loading import load_model

    store = tmp_path_factory.mktemp("studies")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SVD_RESULTS", str(store))
        mp.setenv("SVD_RELEASE", "off")
        model = load_model("smollm2-135m", device="cpu", dtype="float32")
        L = model.n_layers
        settings = dict(dataset="arithmetic", n_problems=1, levels=[1, 2], seed=0, shots=2, max_new_tokens=12,
                        depths=[L, L - 1], span=None, depth_step=1, kl_fraction=0.5, overlap_threshold=0.3,
                        collapse_fraction=0.5)
        problems = load_problems("arithmetic", n=1, levels=[1, 2], seed=0)
        solved = solutions_and_lens(model, problems, max_new_tokens=12, shots=2, batch_size=4)
        agreement_over(model, {("stitch", L - 1): model.at_depth(L - 1)}, solved.items)
        lens_explorer_table(model, solved.items[0], n_positions=6)
        profiles(model, problems[:1], progress=False)
        skip_effects_over(model, problems[:1], "layer", 2, progress=False)
        depth_scores_by_level(model, problems[:1], n_splits=2, progress=False)
        _probes(model, problems, ig_steps=2, ig_components=["layer"], probe_stride=10)
        swept = sample_at_depths(model, problems, {"greedy": DecodeSettings("greedy", 12, 2)},
                                 [("stitch", L), ("stitch", L - 1)], n_seeds=1, batch_size=4, progress=False)
        accuracy = {d: sum(r[0]["correct"] for r in by["greedy"]) / len(problems) for (_, d), by in swept.items()}
        store_critical(model, SweepSettings.from_parameters(settings), accuracy, len(problems))
        toy_convergence(2.0, [0, 1], 60, particles=[1, 2])
        linear_maps(["smollm2-135m"], "smollm2-135m", problems, map_tokens=40)  # the model mapped onto itself
    return stored_records(store)


@pytest.fixture(scope="module")
def shared():
    """One load of each model for every audit of this module (the audit's default loads anew each call)."""
    from helpers.evaluation.audit import fresh_model

    cache: dict[tuple, tuple] = {}

    def load(name: str, dtype: str) -> tuple:
        if (name, dtype) not in cache:
            cache[(name, dtype)] = fresh_model(name, dtype)
        return cache[(name, dtype)]

    return load


def _audit(records, load):
    decodes = [r for r in records if r["experiment"] == "decode"]
    return audit_records(sample_each_kind(records, None), decodes, progress=False, load=load)


def test_every_kind_of_honest_study_passes(studies, shared):
    kinds = {r["experiment"] for r in studies}
    assert set(STUDIES) <= kinds, kinds
    report = _audit(studies, shared)
    assert not report.failed, report.summary()
    audited = report.by_kind()
    assert set(audited) == set(STUDIES)
    assert all(largest <= KINDS[kind].tolerance_in("float32") for kind, (_, largest) in audited.items()), report.summary()
    assert "logit_lens: " in report.summary()


@pytest.mark.parametrize("kind, edit", [
    ("logit_lens", lambda r: r["kl"].__setitem__(3, r["kl"][3] + 0.05)),
    ("lens_table", lambda r: r["top_probs"][5][2].__setitem__(0, r["top_probs"][5][2][0] - 0.01)),
    ("lens_table", lambda r: r["top_tokens"][5][2].__setitem__(1, "not-a-token")),
    ("agreement", lambda r: r.__setitem__("nll", r["nll"] + 0.05)),
    ("depth_profile", lambda r: r["norm_h"]["max"].__setitem__(2, r["norm_h"]["max"][2] * 1.01)),
    ("skip_effects", lambda r: r["output"][0].__setitem__(2, r["output"][0][2] + 0.01)),
    ("erasure_ig", lambda r: r[0].__setitem__(1, r[0][1] + 0.01)),
    ("critical_depth", lambda r: r.__setitem__("depth", (r["depth"] or 0) + 1)),
    ("toy_convergence", lambda r: r["tv"]["exact"].__setitem__(0, r["tv"]["exact"][0] + 1e-4)),
    ("layer_maps", lambda r: r["errors"][1].__setitem__(2, r["errors"][1][2] + 0.01)),
])
def test_an_edited_study_fails_with_its_deviation(studies, shared, kind, edit):
    """The edited record alone is audited (with the decodes it is rebuilt from): the honest test above audits every
    kind, and auditing them all again for each edit cost the suite minutes."""
    records = copy.deepcopy(studies)
    target = next(r for r in records if r["experiment"] == kind)
    edit(target["result"])
    report = audit_records([target], [r for r in records if r["experiment"] == "decode"], progress=False, load=shared)
    assert [f.kind for f in report.failed] == [kind], report.summary()
    assert "deviate" in " ".join(report.failed[0].problems)


def test_top_tokens_may_trade_places_only_where_their_probabilities_tie():
    """The explorer's audit takes one rank more than stored: tokens whose recomputed probabilities tie may trade
    places, across the last stored rank too; a token the model no longer ranks there, a swap of tokens that do not
    tie, a token stored twice, NaN probabilities or a table of another shape fail."""
    from helpers.evaluation.audit_studies import _ranked_deviation

    def table(tokens, probs=None):
        return {"top_tokens": [[tokens]], "top_probs": [[probs or [0.0] * len(tokens)]]}

    again = table(["a", "b", "c"], [0.5, 0.25, 0.25 - 1e-6])
    assert _ranked_deviation(table(["a", "b"]), again) == 0.0
    assert _ranked_deviation(table(["a", "c"]), again) == 0.0  # c tied with b across the last stored rank
    assert _ranked_deviation(table(["a", "b"]), table(["a", "c", "b"], [0.5, 0.25, 0.25])) == 0.0  # tied, swapped
    assert _ranked_deviation(table(["b", "a"]), again) == float("inf")  # a swap of tokens that do not tie
    assert _ranked_deviation(table(["a", "d"]), again) == float("inf")  # not among the recomputed ranks
    assert _ranked_deviation(table(["b", "b"]), table(["a", "b", "c"], [0.3, 0.3, 0.3])) == float("inf")  # twice
    assert _ranked_deviation(table(["b", "a"]), table(["a", "b", "c"], [float("nan")] * 3)) == float("inf")
    assert _ranked_deviation(table(["a", "b", "c"]), again) == float("inf")  # as many ranks as recomputed
    assert _ranked_deviation({"top_tokens": [[["a"]], [["a"]]]}, again) == float("inf")


def test_a_lens_record_whose_sequence_no_decode_gives_fails(studies):
    records = [r for r in copy.deepcopy(studies) if r["experiment"] in ("logit_lens",)]
    report = audit_records(records, [], progress=False)  # no decodes to rebuild the sequence from
    assert report.failed and all("no released greedy solution" in f.problems[0] for f in report.failed)


def test_what_cannot_be_audited_says_why():
    bf16 = {"source": "embedded:m.gguf", "dtype": "bfloat16"}
    assert reason({"experiment": "logit_lens", "key": "arith-L1-0-0@x", "config": bf16}) is None  # the appendix's
    assert reason({"experiment": "agreement", "key": "arith-L1-0-0@x", "config": {"full": bf16, "truncated": bf16}}) \
        == "bfloat16 agreement studies (no tolerance is measured for them)"
    assert reason({"experiment": "logit_lens", "key": "math-1@x", "config": {"source": "embedded:m.gguf",
                                                                           "dtype": "float32"}}) == \
        "studies of problems other than the arithmetic benchmark"
    assert reason({"experiment": "unknown_kind", "key": "k", "config": {}}).startswith("unknown_kind records")
