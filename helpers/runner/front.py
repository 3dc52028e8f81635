"""The front page's answer: the book's question answered with this build's own numbers (a lead, a row per model and
why), and which profile, commit and date built them (`book/intro.md` includes `chapters/answer.md`, which the runner writes)."""

from __future__ import annotations

from pathlib import Path

ANSWER = "answer.md"


def answer_markdown(rows: list[dict], profile: str, commit: str, date: str) -> str:
    """The answer from chapters 04 and 05's glued values (`glued.collect` rows): first what the search costs against
    what the truncation saves (chapter 05's `cost_lead`, the result no token cap moves), then chapter 04's lead (which
    every size this build ran supports, or a line per model, and what the token cap leaves provisional), its table
    with a row per model and why, from the decomposition; where the test can look (`answer_limit`: the depths searched
    and what they scored with one more block removed); the report's premise in a sentence, where a base model
    ran. A build whose chapter 04 ran no truncation gives its answer and headline instead; a chapter this build did
    not run is named as such."""
    values = {(r["chapter"], r["name"]): r["value"] for r in rows}
    built = f"*Built with the **{profile}** profile at commit `{commit}` on {date[:10]}.*"
    answer, headline = values.get(("04_power_sampling", "answer")), values.get(("04_power_sampling", "headline"))
    if not isinstance(answer, str):
        return ("This build did not run chapter 04 (power sampling on truncated models), so it states no answer; "
                "build the whole profile to see one. " + built + "\n")
    cost = next((v for v in (values.get(("05_cost", key)) for key in ("cost_lead", "cost_answer"))
                 if isinstance(v, str) and v), None)  # chapter 05's sentence, at each size it priced
    missing = "This build did not run chapter 05, which sets the search's cost against what truncation saves."
    lead, table, why = (values.get(("04_power_sampling", key)) for key in ("answer_lead", "answer_table", "answer_why"))
    limit = values.get(("04_power_sampling", "answer_limit"))
    limit = f"**Where the test can look.** {limit}\n\n" if isinstance(limit, str) and limit else ""
    premise = values.get(("04_power_sampling", "premise_summary")) or values.get(("04_power_sampling", "premise_sentence"))
    premise = f"**The premise.** {premise}\n\n" if premise and values.get(("04_power_sampling", "premise_base_models")) \
        else ""  # only where a base model ran
    if all(isinstance(v, str) and v for v in (lead, table, why)):
        short = _short(values.get(("05_cost", "cost_short")), values.get(("04_power_sampling", "answer_short")))
        first = short + (f"**What it costs.** {cost}\n\n" if cost else "")
        last = "" if cost else f"{missing}\n\n"
        return f"{first}{lead}\n\n{table}\n\n**Why.** {why}\n\n{limit}{premise}{last}{built}\n"
    first = f"**{answer}** {headline}".strip() if headline else f"**{answer}**"
    sizes = values.get(("04_power_sampling", "size_headline"))
    if isinstance(sizes, str) and sizes:
        first += f" {sizes}"
    return f"{first} {cost or missing}\n\n{built}\n"


def _short(cost: object, accuracy: object) -> str:
    """The answer in one line above its parts: does search buy back the cut's cost in compute, and in accuracy (chapter
    05's `cost_short`, chapter 04's `answer_short`); empty where either is missing."""
    if not (isinstance(cost, str) and cost and isinstance(accuracy, str) and accuracy):
        return ""
    return (f"**In short: in compute, {cost}; in accuracy, {accuracy}.** (Compute: do the blocks removed save what "
            "the search at the cut costs? Accuracy: does the search at the cut reach the full model's greedy accuracy? "
            "Below, each half with its numbers.)\n\n")


def write(chapters_dir: Path, rows: list[dict], profile: str, commit: str, date: str) -> Path:
    """Write `answer.md` beside the executed chapters."""
    path = Path(chapters_dir) / ANSWER
    path.write_text(answer_markdown(rows, profile, commit, date), encoding="utf-8")
    return path
