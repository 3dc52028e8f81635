"""Why an answer comes out as it does: the headline (a search on the cut model against greedy decoding on the full
one) split into what the cut costs and what the search recovers, and the search's gain at the full depth set
beside its gain at the cut. Each term is a paired difference over the problems both of its methods ran on.

With scores per problem g (greedy) and s (the search), at the full depth F and the cut C:

    headline   = s_C − g_F  =  (g_C − g_F)  +  (s_C − g_C)  =  cut cost + recovery
    mechanism  = (s_C − g_C) − (s_F − g_F)  =  recovery − gain at full depth

so the report's mechanism, "search helps more where depth was removed", is one paired number: positive when the
search wins back more on the cut model than it adds to the full one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.evaluation.stats import PairedDifference, paired_difference, paired_prefix

SEARCHES = (("power", "power sampling (MH)"), ("low", "low temperature"))  # the searches the chapters take apart
TERMS = ("cut_cost", "recovery", "full_gain", "mechanism", "headline")  # their words: chapters.power_sampling


@dataclass(frozen=True)
class Decomposition:
    """One search's decomposition on one model: each of `TERMS` as a paired difference, and how many problems the
    headline set holds (a term paired over fewer ran on a subset, and says so)."""

    search: str  # the method key of the search (power, low, ...)
    n_problems: int
    terms: dict[str, PairedDifference]

    def on_subset(self, term: str) -> bool:
        """Whether `term` was paired over fewer problems than the headline set (to be marked where it is shown)."""
        return self.terms[term].n < self.n_problems


def decompose(greedy_full: Sequence[float], greedy_cut: Sequence[float], search_full: Sequence[float],
              search_cut: Sequence[float], *, search: str, n_problems: int | None = None) -> Decomposition:
    """The five terms from per-problem scores kept in one problem order, where a method run on a subset ran on its
    first k problems (`helpers.evaluation.comparison.search_order`): each term pairs the first min(k) problems of
    its operands, so the identities above hold exactly where every operand ran on every problem."""
    gF, gC, sF, sC = (np.asarray(x, dtype=float) for x in (greedy_full, greedy_cut, search_full, search_cut))
    if not all(len(x) for x in (gF, gC, sF, sC)):
        raise ValueError("decompose needs scores of every method on at least one problem")

    n = min(len(gF), len(gC), len(sF), len(sC))
    terms = {"cut_cost": paired_prefix(gC, gF), "recovery": paired_prefix(sC, gC), "full_gain": paired_prefix(sF, gF),
             "mechanism": paired_difference(sC[:n] - gC[:n], sF[:n] - gF[:n]), "headline": paired_prefix(sC, gF)}
    return Decomposition(search, n_problems if n_problems is not None else max(len(gF), len(gC)), terms)
