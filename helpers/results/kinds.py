"""Every kind of record the book stores, described once: its name, the code that computes and stores it, where its
shape is declared, its code version, the revisions of the algorithms its key carries, and how the audit checks it.

Every reader takes what it needs from the entry itself, and nothing copies it: a storing site opens its records as
`Run(KIND, config)` (`helpers.results.store`), which keys them by the kind's name and version and checks them by its
shape; the release checks a record's shape the same way (`Kind.shape_for`); the fingerprint's scope comes from
`stored_by` (`helpers.results.versions`); the audit computes a study again by its `recompute` and allows its
`tolerance` (`helpers.evaluation.audit_studies`; decodes are checked by teacher forcing, with tolerances per number
format in `helpers.evaluation.audit`). Adding a kind is one entry here.

Shapes and recomputations are named as 'module:NAME', read when first used, because they are declared beside the
code that computes them, in layers above this one.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def named(reference: str) -> Any:
    """The object a 'module:NAME' reference names."""
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Kind:
    """One kind of stored record.

    `stored_by`: the modules that compute and store it (its fingerprint covers them and what they import).
    `shape`: 'module:NAME' of its shape (`helpers.results.shapes.conforms`), or of a function of the run's
    configuration that gives it. `version`: the version of the code that computes it (1 adds nothing to a key; bump
    it when a change can move a number). `audit`: 'decode' (teacher-forced, `helpers.evaluation.audit`) or 'study'
    (computed again, `helpers.evaluation.audit_studies`), and for a study `recompute`: 'module:NAME' of how
    (`helpers.evaluation.audit_studies.Recompute`). `tolerance`, `bfloat16_tolerance`: the largest relative
    deviation a study's audit allows in float32 and in bfloat16 (None: not measured, so not audited).
    `revisions`: the revision of each algorithm whose numbers its records carry in their keys, by the name the key
    gives it (`revision`): a change to such an algorithm that moves numbers bumps its revision here, and only the
    records that used it are computed anew. `version` moves every record of the kind; a revision moves those whose
    key names it.
    """

    name: str
    stored_by: tuple[str, ...]
    shape: str
    audit: str = "study"
    version: int = 1
    tolerance: float | None = None
    bfloat16_tolerance: float | None = None
    recompute: str | None = None
    revisions: Mapping[str, Any] = field(default_factory=dict)

    def revision(self, name: str) -> Any:
        """The revision of the algorithm `name` that this kind's keys carry (`revisions`)."""
        if name not in self.revisions:
            raise KeyError(f"the kind {self.name!r} names no revision {name!r}; it names {sorted(self.revisions)}")
        return self.revisions[name]

    def shape_for(self, config: dict) -> Any:
        """The shape (`helpers.results.shapes.conforms`) its records have under `config`."""
        shape = named(self.shape)
        return shape(config) if callable(shape) and not isinstance(shape, type) else shape

    def tolerance_in(self, dtype: str) -> float | None:
        """The largest relative deviation its audit allows for a model run in `dtype` (None: none is measured)."""
        return self.tolerance if dtype in ("float32", "") else self.bfloat16_tolerance if dtype == "bfloat16" \
            else None


_AGAIN = "helpers.evaluation.audit_studies:"  # where the audit's ways to compute a study again are declared

# The samplers' algorithms, by the names store keys give them: how a sampled token is drawn from its distribution
# (`helpers.engines.categorical`), how the published MH grows its blocks (`helpers.samplers.power`), how SMC resamples
# (`helpers.samplers.smc`), and, per number format, how decoding attends on a CPU (`helpers.models.attention`: 2,
# bfloat16's scores in float32 on the one-query path; `helpers.samplers.settings.engine_key`).
_SAMPLERS = {"draw": "inverse-cdf", "schedule": "extend", "resampling": "systematic"}
DECODE = Kind("decode", ("helpers.evaluation.decodes",), "helpers.evaluation.decodes:record_shape", audit="decode",
              revisions={**_SAMPLERS, "attention": {"bfloat16": 2},
                         "at_cap": "ends"})  # a chain of a set block count ends a block at the length (power.py)
LOGIT_LENS = Kind("logit_lens", ("helpers.interp.studies",), "helpers.interp.studies:LENS_SHAPE",
                  tolerance=2e-3,  # float32 passes, batched alike: rounding only
                  bfloat16_tolerance=0.03,  # the appendix's lens, computed where bfloat16 is emulated
                  recompute=_AGAIN + "LENS_AGAIN")
LENS_TABLE = Kind("lens_table", ("helpers.interp.studies",), "helpers.interp.studies:TABLE_SHAPE",
                  tolerance=2e-3,  # as the lens curves: one sequence's forward pass, rounding only
                  recompute=_AGAIN + "TABLE_AGAIN")  # its top tokens may trade places where their probabilities tie
AGREEMENT = Kind("agreement", ("helpers.interp.studies",), "helpers.interp.studies:AGREEMENT_SHAPE", tolerance=2e-3,
                 recompute=_AGAIN + "AGREEMENT_AGAIN")
DEPTH_PROFILE = Kind("depth_profile", ("helpers.interp.depth",), "helpers.interp.depth:PROFILE_SHAPE", tolerance=2e-3,
                     recompute=_AGAIN + "GOLD_AGAIN")
SKIP_EFFECTS = Kind("skip_effects", ("helpers.interp.depth",), "helpers.interp.depth:SKIP_SHAPE", tolerance=2e-3,
                    recompute=_AGAIN + "GOLD_AGAIN")
DEPTH_SCORE = Kind("depth_score", ("helpers.interp.depth",), "helpers.interp.depth:SKIP_SHAPE", tolerance=2e-3,
                   recompute=_AGAIN + "GOLD_AGAIN")
ERASURE_IG = Kind("erasure_ig", ("helpers.chapters.effective_depth", "helpers.interp.probes"),
                  "helpers.chapters.effective_depth:ERASURE_SHAPE", tolerance=2e-3, recompute=_AGAIN + "PROBE_AGAIN")
TOY_CONVERGENCE = Kind("toy_convergence", ("helpers.evaluation.toy_study",), "helpers.evaluation.toy_study:toy_shape",
                       tolerance=1e-6,  # the same seeded chains; the toy model's float32 rounds apart between CPUs
                       recompute=_AGAIN + "TOY_AGAIN", revisions=_SAMPLERS)
LAYER_MAPS = Kind("layer_maps", ("helpers.chapters.effective_depth", "helpers.interp.layer_maps"),
                  "helpers.interp.layer_maps:MAPS_SHAPE",
                  tolerance=2e-3,  # float64 fits of float32 states, batched alike: rounding only
                  recompute=_AGAIN + "MAPS_AGAIN")
CRITICAL_DEPTH = Kind("critical_depth", ("helpers.evaluation.critical",), "helpers.evaluation.critical:CRITICAL_SHAPE",
                      tolerance=1e-9,  # counted from the decodes: exact
                      recompute=_AGAIN + "CRITICAL_AGAIN")  # counted from the decodes of its model

KINDS: dict[str, Kind] = {k.name: k for k in (DECODE, LOGIT_LENS, LENS_TABLE, AGREEMENT, DEPTH_PROFILE, SKIP_EFFECTS,
                                             DEPTH_SCORE, ERASURE_IG, LAYER_MAPS, TOY_CONVERGENCE, CRITICAL_DEPTH)}
STUDIES: tuple[str, ...] = tuple(name for name, k in KINDS.items() if k.audit == "study")
