"""Numbers typed into the prose: found where a reader reads them, and none of them a number a build computes."""

from __future__ import annotations

import json

from helpers.core.env import REPO
from helpers.runner.typed_numbers import book_pages, collisions, pages_of, typed_numbers

PUBLISHED = REPO / "release" / "glued_values.full.json"  # the glued values of the last published `full` build


def test_only_prose_is_read_and_citing_sentences_are_told_apart():
    page = ("The chapters took 97 minutes in all. Run `python -m helpers run --budget 150m` first.\n\n"
            "```python\nx = 1234.5\n```\n\n"
            "Qwen2.5-Coder-0.5B scored {glue:text}`acc:.1f`% with $N = 10$. The report gains 14.5 points at 26 of 28 "
            "layers. See [the page](https://example.org/123.456) and {cite:p}`karan2025reasoning`.")
    found = {t.text: t for t in typed_numbers("p", page)}
    assert set(found) == {"97", "14.5", "26", "28"}  # no code, glued value, math, model name or link
    assert found["14.5"].cited and not found["97"].cited
    assert [t.text for t in typed_numbers("p", page) if t.checked] == []  # 97 and 26 are small whole numbers


def test_a_typed_number_that_equals_a_glued_value_at_its_precision_is_a_collision():
    page = ("One block of Gemma saves 2.32% of its FLOPs. The unembedding is 28% of the 0.5B's. Exactly 1,933 tokens "
            "a chain, 14.87 times greedy's. It gets 0.5 of the mass. Every accuracy carries its 95% interval.")
    glued = [{"chapter": "05", "name": "per_block", "value": 0.02321}, {"chapter": "05", "name": "share", "value": 0.2831},
             {"chapter": "04", "name": "tokens", "value": 1933.4}, {"chapter": "04", "name": "half", "value": 0.5},
             {"chapter": "05", "name": "times", "value": 14.871}, {"chapter": "04", "name": "flag", "value": True}]
    found = {t.text: names for t, names in collisions(typed_numbers("05_cost", page), glued)}
    assert found == {"2.32%": ["05/per_block"], "1,933": ["04/tokens"], "14.87": ["05/times"]}  # 28%, 0.5: too coarse
    assert collisions(typed_numbers("05_cost", "The chain took 1,934 tokens."), glued) == []
    assert collisions(typed_numbers("performance", page), glued) == []  # a measurement log, each with its command


def test_a_number_typed_with_a_unit_of_what_a_build_measures_of_itself_is_one_it_computes():
    page = ("| a laptop (2 cores, 8 GiB) | chapters 01–05 take 65–85 minutes; about 5.3 GiB at the peak |\n"
            "| Binder (2 GiB) | a few minutes |\n\nBinder's 2 GiB holds the smoke profile. The report ran 8 hours.")
    found = [t.text for t, _ in collisions(typed_numbers("teaching", page), [])]
    assert found == ["85", "5.3"]  # not the machines' sizes, nor the report's figure
    assert collisions(typed_numbers("performance", page), []) == []  # a measurement log, each with its command


def test_no_page_types_a_number_the_published_full_build_computes():
    """Every number of the last published `full` build that the pages quote is glued, not typed: a typed one would
    stay behind when the next build moves it. The build writes the same check beside its glued values
    (typed_numbers.md) for its own values."""
    glued = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    typed = book_pages(*pages_of(REPO / "notebooks", REPO / "book"))
    assert len(typed) > 500 and len(glued) > 250
    found = collisions(typed, glued)
    assert not found, "\n".join(f"{t.page}: {t.text} = {names[:3]}: {t.sentence[:120]}" for t, names in found)
