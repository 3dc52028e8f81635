"""Every kind of record the book stores, described once: its name, the code that computes and stores it, where its
shape is declared, its code version, and how the audit checks it.

The store keys a run by the kind's name (each storing site names it through its `Kind`, never by a literal); the
release checks a record's shape by `shape` (`helpers.runner.publish.record_shape`); the code version and the
fingerprint's scope come from `version` and `stored_by` (`helpers.results.versions`); the audit takes its tolerance
from `tolerance` (`helpers.evaluation.audit_studies`; decodes are checked by teacher forcing, with tolerances per
number format in `helpers.evaluation.audit`). Adding a kind is one entry here; a test holds every storing site and
every consumer to this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One kind of stored record.

    `stored_by`: the modules that compute and store it (its fingerprint covers them and what they import).
    `shape`: 'module:NAME' of its shape (`helpers.results.shapes.conforms`), or of a function of the run's
    configuration that gives it. `version`: the version of the code that computes it (1 adds nothing to a key; bump
    it when a change can move a number). `audit`: 'decode' (teacher-forced, `helpers.evaluation.audit`) or 'study'
    (computed again, `helpers.evaluation.audit_studies`). `tolerance`, `bfloat16_tolerance`: the largest relative
    deviation a study's audit allows in float32 and in bfloat16 (None: not measured, so not audited).
    """

    name: str
    stored_by: tuple[str, ...]
    shape: str
    audit: str = "study"
    version: int = 1
    tolerance: float | None = None
    bfloat16_tolerance: float | None = None


DECODE = Kind("decode", ("helpers.evaluation.decodes",), "helpers.evaluation.decodes:record_shape", audit="decode")
LOGIT_LENS = Kind("logit_lens", ("helpers.interp.studies",), "helpers.interp.studies:LENS_SHAPE",
                  tolerance=2e-3,  # float32 passes, batched alike: rounding only
                  bfloat16_tolerance=0.03)  # the appendix's lens, computed where bfloat16 is emulated
AGREEMENT = Kind("agreement", ("helpers.interp.studies",), "helpers.interp.studies:AGREEMENT_SHAPE", tolerance=2e-3)
DEPTH_PROFILE = Kind("depth_profile", ("helpers.interp.depth",), "helpers.interp.depth:PROFILE_SHAPE", tolerance=2e-3)
SKIP_EFFECTS = Kind("skip_effects", ("helpers.interp.depth",), "helpers.interp.depth:SKIP_SHAPE", tolerance=2e-3)
DEPTH_SCORE = Kind("depth_score", ("helpers.interp.depth",), "helpers.interp.depth:SKIP_SHAPE", tolerance=2e-3)
ERASURE_IG = Kind("erasure_ig", ("helpers.chapters.effective_depth", "helpers.interp.probes"),
                  "helpers.chapters.effective_depth:ERASURE_SHAPE", tolerance=2e-3)
TOY_CONVERGENCE = Kind("toy_convergence", ("helpers.evaluation.toy_study",), "helpers.evaluation.toy_study:TOY_SHAPE",
                       tolerance=1e-6)  # the same seeded chains; the toy model's float32 rounds apart between CPUs
CRITICAL_DEPTH = Kind("critical_depth", ("helpers.evaluation.critical",), "helpers.evaluation.critical:CRITICAL_SHAPE",
                      tolerance=1e-9)  # counted from the decodes: exact

KINDS: dict[str, Kind] = {k.name: k for k in (DECODE, LOGIT_LENS, AGREEMENT, DEPTH_PROFILE, SKIP_EFFECTS, DEPTH_SCORE,
                                             ERASURE_IG, TOY_CONVERGENCE, CRITICAL_DEPTH)}
STUDIES: tuple[str, ...] = tuple(name for name, k in KINDS.items() if k.audit == "study")
