"""Audit stored decodes against the model: re-derive what a record claims, on the machine at hand.

A decode record (`helpers.evaluation.decodes`) says which tokens a method produced after which prompt, and what they
scored. The audit rebuilds the problem from its id (the arithmetic generator is deterministic), the prompt from the
record's settings, and the model (its weights must have the fingerprint the record names, truncated as the record
says), then teacher-forces prompt + tokens and checks (each distinct prompt is encoded once and its KV cache shared
by every record that follows it: a problem's records of every method and seed):

* the text, answer and grade follow from the tokens (a changed token changes them);
* the record's `sum_logp` equals the teacher-forced sum of log p(token) at T = 1, within its number format's
  `Tolerance.allowed` (a floor, or so much a token for long completions, whose every token adds its rounding);
* a greedy record's every token is the argmax, except where the top two logits are closer than `Tolerance.tie`
  (there float rounding of another batch or machine may pick either);
* its counts fit its settings: `n_tokens` is the tokens' length, within `max_new_tokens`; a completion ends at a stop
  token exactly when it says it stopped; plain decodes decoded each token once; an MH chain decoded at least its
  answer and its acceptance is a rate; SMC's particles are as many as its settings say and resampled at most once
  per block.

The tolerances are measured, per number format (the reproducibility page, "The results release"): decoding computes a
row's logits in a batch of other rows, and the audit in a batch of its own, so sums differ by rounding, which bfloat16
makes coarser.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from helpers.core.progress import bar
from helpers.data.arithmetic import arithmetic_problem
from helpers.data.prompts import build_prompt
from helpers.engines.kv_slots import cache_keyword
from helpers.engines.protocol import ends_with_stop
from helpers.evaluation.grading import extract_answer, is_equivalent
from helpers.models.handle import ModelHandle
from helpers.models.loading import load_model, stop_token_ids
from helpers.results.identity import key_problem, problem_key


@dataclass(frozen=True)
class Tolerance:
    """How far a decode may sit from this machine's teacher-forced pass in one number format."""

    logp: float  # nats on a record's sum of log-probabilities, whatever its length
    tie: float  # logits this close at the top may swap between batches and machines: not counted against greedy
    per_token: float = 0.0  # nats a token beyond that: each token's rounding adds to a long completion's sum

    def allowed(self, tokens: int) -> float:
        """How far the summed log-probability of a completion of `tokens` tokens may sit from the audit's."""
        return max(self.logp, self.per_token * tokens)

    def rule(self) -> str:
        """The sum's tolerance in words, for the audit's summary."""
        return f"{self.logp:g} nats, or {self.per_token:g} a token where more" if self.per_token else f"{self.logp:g} nats"


TOLERANCES = {  # measured: the reproducibility page, "The results release"
    # float32: the 1.5B's greedy decodes of 160 tokens sat up to 1.25e-4 nats a token (0.020 in all) from the audit's
    # pass, the smaller models' up to 0.014 in all: twice the worst a token, and never less than 0.02
    "float32": Tolerance(logp=0.02, tie=0.02, per_token=2.5e-4),
    # bfloat16 rounds a logit to 8 bits: the appendix's greedy decodes, computed where it is emulated and audited where
    # it is native, sat up to 1.64 nats from the teacher-forced sums (about 0.01 a token) and picked tokens up to 0.25
    # below the argmax (one step of bfloat16 at logits of 32-64)
    "bfloat16": Tolerance(logp=2.5, tie=0.375),
}


@dataclass
class Finding:
    """One record's audit: what was wrong with it (nothing: it passed), and its deviations."""

    where: str
    problems: list[str] = field(default_factory=list)
    logp_deviation: float = 0.0  # a decode's |sum_logp - teacher-forced|, in nats
    ties: int = 0  # greedy positions whose top two logits were within the tie tolerance
    swapped_gap: float = 0.0  # the widest top-two gap where a greedy token was not the argmax (0: none was)
    dtype: str = "float32"  # the number format its model ran in
    kind: str = "decode"  # the experiment its record belongs to
    deviation: float = 0.0  # a study's largest relative deviation (`helpers.evaluation.audit_studies`)
    tokens: int = 0  # a decode's completion length (its sum_logp deviation grows with it)

    def as_dict(self) -> dict:
        """The finding as one JSON-ready line (`audit --findings`)."""
        return {"where": self.where, "kind": self.kind, "dtype": self.dtype, "problems": self.problems,
                "logp_deviation": self.logp_deviation, "tokens": self.tokens, "ties": self.ties,
                "swapped_gap": self.swapped_gap, "deviation": self.deviation}


class DecodeDeviations(NamedTuple):
    """A number format's decodes in an audit: how many, their largest |sum_logp - teacher-forced| in nats, the
    largest share of its own tolerance a record used, the widest top-two gap where a greedy token was not the
    argmax, and the near-tie positions left unchecked."""

    n: int
    logp: float
    used: float
    gap: float
    ties: int


@dataclass
class AuditReport:
    """Every audited record's finding, and what the audit could not check (with why)."""

    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    resumed: int = 0  # findings of an earlier run that stopped, read back (`earlier_findings`), not audited again

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.problems]

    @property
    def max_logp_deviation(self) -> float:
        return max((f.logp_deviation for f in self.findings), default=0.0)

    def by_dtype(self) -> dict[str, DecodeDeviations]:
        """Per number format of the decodes: how far they sat from the audit's passes (`DecodeDeviations`)."""
        out: dict[str, DecodeDeviations] = {}
        for f in self.findings:
            if f.kind == "decode":
                d = out.get(f.dtype, DecodeDeviations(0, 0.0, 0.0, 0.0, 0))
                used = f.logp_deviation / TOLERANCES[f.dtype].allowed(f.tokens)
                out[f.dtype] = DecodeDeviations(d.n + 1, max(d.logp, f.logp_deviation), max(d.used, used),
                                                max(d.gap, f.swapped_gap), d.ties + f.ties)
        return out

    def by_kind(self) -> dict[str, tuple[int, float]]:
        """Per kind of record other than decodes: how many were audited, and their largest relative deviation."""
        kinds: dict[str, tuple[int, float]] = {}
        for f in self.findings:
            if f.kind != "decode":
                n, largest = kinds.get(f.kind, (0, 0.0))
                kinds[f.kind] = (n + 1, max(largest, f.deviation))
        return kinds

    def summary(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        decodes = sum(f.kind == "decode" for f in self.findings)
        timed = (f"{len(self.findings)} records in {self.seconds:.0f} s" if not self.resumed else
                 f"{len(self.findings)} records ({self.resumed} by an earlier run, read from its findings; this "
                 f"run's {len(self.findings) - self.resumed} in {self.seconds:.0f} s)")
        lines = [f"audited {timed}: {len(self.failed)} failed; {decodes} decodes; not audited: {skipped}"]
        lines += [f"  {dtype} decodes: {d.n}, largest |sum_logp - teacher-forced| {d.logp:.2e} nats (tolerance "
                  f"{TOLERANCES[dtype].rule()}; no record used more than {d.used:.0%} of its own), widest top-two gap "
                  f"where greedy was not the argmax {d.gap:.3f} (tie tolerance {TOLERANCES[dtype].tie}), near-ties "
                  f"skipped: {d.ties} positions"
                  for dtype, d in sorted(self.by_dtype().items())]
        lines += [f"  {kind}: {n} records, largest relative deviation {largest:.2e}"
                  for kind, (n, largest) in sorted(self.by_kind().items())]
        lines += [f"  FAILED {f.where}: " + "; ".join(f.problems) for f in self.failed]
        return "\n".join(lines)


def record_label(record: dict) -> str:
    """How an audit names a record in its findings: its experiment, config hash and key, and a decode's method."""
    label = f"{record['experiment']}/{record['config_hash']} {record['key']}"
    return f"{label} ({record['config'].get('method')})" if record["experiment"] == "decode" else label


def earlier_findings(lines: list[str], labels: set[str]) -> list[Finding]:
    """The findings an earlier audit of these records wrote before it stopped (`audit --resume`), which this one
    need not repeat: the passed ones. A failure is dropped, so its record is audited again (to confirm it), and so is
    a last line cut short by the interruption; any other line that is not a finding, or a finding of a record this
    audit does not hold (the file of another audit), is a ValueError that says which."""
    fields = set(Finding("").as_dict())
    kept: dict[str, Finding] = {}
    for n, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or set(entry) != fields:
                raise ValueError
            f = Finding(**entry)
            numbers = (f.logp_deviation, f.tokens, f.ties, f.swapped_gap, f.deviation)
            if not (isinstance(f.where, str) and isinstance(f.problems, list) and f.dtype in TOLERANCES
                    and isinstance(f.kind, str) and all(isinstance(x, float | int) for x in numbers)):
                raise ValueError
        except (ValueError, TypeError):
            if n == len(lines):  # the line being written when the audit stopped
                break
            raise ValueError(f"line {n} is not an audit finding: {line[:80]!r}") from None
        if f.where not in labels:
            raise ValueError(f"line {n} is the finding of {f.where}, which this audit does not hold: were the "
                             "findings written by an audit of other batches?")
        if not f.problems and all(math.isfinite(x) and x >= 0 for x in numbers):
            kept[f.where] = f
    return list(kept.values())


def problem_from_id(problem_id: str):
    """The arithmetic problem behind an id `arith-L<level>-<seed>-<index>` (None for other data sets)."""
    parts = problem_id.split("-")
    if len(parts) != 4 or parts[0] != "arith":
        return None
    try:
        return arithmetic_problem(int(parts[1].removeprefix("L")), int(parts[3]), int(parts[2]))
    except (ValueError, KeyError):
        return None


def auditable(record: dict) -> str | None:
    """Why a stored record cannot be audited here, or None."""
    config = record.get("config", {})
    if record.get("experiment") != "decode":
        return f"{record.get('experiment')} records (the audit re-derives decodes)"
    if config.get("engine") is not None:  # the slot engine's keys name none
        return f"{config.get('engine')} decodes (their engine's own numbers)"
    if not str(config.get("source", "")).startswith("embedded:"):
        return "decodes of models that are not embedded"
    if problem_from_id(str(record.get("result", {}).get("id", ""))) is None:
        return "decodes of problems other than the arithmetic benchmark"
    if config.get("dtype") not in TOLERANCES:
        return f"{config.get('dtype')} decodes (no tolerance is measured for them)"
    return None


def fresh_model(name: str, dtype: str) -> ModelHandle:
    """`name` in `dtype`, loaded anew: the audit's default, which holds one model at a time."""
    return load_model(name, dtype=dtype)


def audit(records: Iterable[dict], batch_size: int = 8, progress: bool = True,
          on_finding: Callable[[Finding], None] | None = None,
          load: Callable[[str, str], ModelHandle] = fresh_model) -> AuditReport:
    """Audit stored decode records (whole store lines: key, config, result); models load once per identity, and
    a model's records are taken prompt by prompt (`batch_size` completions of one prompt at most per pass). A
    progress bar (records done, failures so far, the largest deviation) shows where a long audit stands, and
    `on_finding` receives each finding as soon as it exists (so an audit stopped part-way keeps what it found).
    `load(name, dtype)` gives a model's handle (a caller that audits many small sets may share them)."""
    start = time.perf_counter()
    report = AuditReport()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for record in records:
        why = auditable(record)
        if why:
            report.skipped[why] = report.skipped.get(why, 0) + 1
            continue
        c = record["config"]
        groups[(c["model"], c["dtype"], c["depth"], c.get("truncation"))].append(record)
    loaded: dict[tuple, ModelHandle] = {}
    failed, largest = 0, 0.0  # running tallies for the bar, so it need not rescan every finding each batch
    with bar(total=sum(map(len, groups.values())), desc="audit", unit="record", progress=progress) as shown:
        for (name, dtype, depth, method), group in sorted(groups.items(), key=lambda kv: str(kv[0])):
            if (name, dtype) not in loaded:
                loaded.clear()  # one model in memory at a time
                loaded[(name, dtype)] = load(name, dtype)
            model = loaded[(name, dtype)]
            m = model.at_depth(depth, method or "stitch")
            identity, tokenizer = m.identity(), model.tokenizer
            stops = set(stop_token_ids(model.module, tokenizer))
            by_prompt: dict[tuple, list[dict]] = defaultdict(list)
            for record in group:
                by_prompt[(record["result"].get("id"), record["config"].get("shots"))].append(record)
            for same in by_prompt.values():
                found = _audit_batch(m.module, tokenizer, identity, stops, same, batch_size)
                report.findings += found
                if on_finding:
                    for f in found:
                        on_finding(f)
                failed += sum(bool(f.problems) for f in found)
                largest = max([largest, *(f.logp_deviation for f in found)])
                shown.update(len(same))
                shown.set_postfix(failed=failed, largest=f"{largest:.1e}")
    report.seconds = time.perf_counter() - start
    return report


def _audit_batch(model, tokenizer, identity: dict, stops: set[int], records: list[dict], batch_size: int
                 ) -> list[Finding]:
    """The findings of records that share one problem (so, mostly, one prompt)."""
    findings, prompts = [], []
    for record in records:
        c, r = record["config"], record["result"]
        f = Finding(record_label(record), dtype=c["dtype"])
        findings.append(f)
        for k in ("weights", "depth", "truncation", "dtype"):
            if c.get(k) != identity.get(k):
                f.problems.append(f"its {k} is {c.get(k)!r}, the model here has {identity.get(k)!r}")
        problem = problem_from_id(r["id"])
        if problem_key(problem) != key_problem(record["key"]) or r.get("gold") != problem.answer:
            f.problems.append("its key or gold answer does not match the problem its id names")
        prompt = build_prompt(tokenizer, problem.question, shots=c["shots"])
        if r.get("prompt_tokens") != len(prompt):
            f.problems.append(f"prompt of {r.get('prompt_tokens')} tokens, rebuilt {len(prompt)}")
        f.problems += _counts(r, c, stops)
        text = tokenizer.decode(r["tokens"], skip_special_tokens=True)
        if text != r["text"]:
            f.problems.append("its text is not its tokens' text")
        predicted = extract_answer(text)
        if predicted != r["predicted"] or is_equivalent(predicted, problem.answer) != r["correct"]:
            f.problems.append("its answer or grade does not follow from its tokens")
        prompts.append(prompt)
    logits = _teacher_forced(model, prompts, [list(r["result"]["tokens"]) for r in records], batch_size)
    for f, record, window in zip(findings, records, logits, strict=True):
        r = record["result"]
        if not r["tokens"]:
            continue
        tokens = torch.tensor(r["tokens"])
        f.tokens = len(r["tokens"])
        logp = torch.log_softmax(window, -1).gather(-1, tokens[:, None])[:, 0]
        tolerance = TOLERANCES[f.dtype]
        f.logp_deviation = abs(float(logp.sum()) - float(r["sum_logp"]))
        if not f.logp_deviation <= tolerance.allowed(f.tokens):
            f.problems.append(f"sum_logp {r['sum_logp']:.4f}, teacher-forced {float(logp.sum()):.4f} (tolerance "
                              f"{tolerance.allowed(f.tokens):.3g} for {f.tokens} tokens)")
        if record["config"].get("method") == "greedy":
            top2 = window.topk(2, dim=-1)
            best = top2.indices[:, 0]
            gap = top2.values[:, 0] - top2.values[:, 1]
            ties = gap < tolerance.tie
            f.ties = int(ties.sum())
            f.swapped_gap = float(gap[best != tokens].max()) if bool((best != tokens).any()) else 0.0
            wrong = ((best != tokens) & ~ties).nonzero()[:, 0].tolist()
            if wrong:
                f.problems.append(f"greedy token {wrong[0]} is not the argmax ({len(wrong)} positions)")
    return findings


@torch.inference_mode()
def _teacher_forced(model, prompts: list[list[int]], completions: list[list[int]], batch_size: int = 8
                    ) -> list[torch.Tensor]:
    """float32 logits that predicted each completion's tokens after its prompt.

    Each distinct prompt is encoded once (its last position predicts a completion's first token), and its KV cache
    is copied to the completions that follow it, which run `batch_size` at a time, right-padded: a pad comes after
    every real token of its row, so no real token attends to one."""
    out: list[torch.Tensor | None] = [None] * len(prompts)
    device = next(model.parameters()).device
    keyword = cache_keyword(model)
    by_prompt: dict[tuple, list[int]] = defaultdict(list)
    for i, prompt in enumerate(prompts):
        by_prompt[tuple(prompt)].append(i)
    for prompt, rows in by_prompt.items():
        rows = [i for i in rows if completions[i]]
        for i in set(by_prompt[prompt]) - set(rows):
            out[i] = torch.zeros(0, model.config.vocab_size)
        for lo in range(0, len(rows), batch_size):
            batch = rows[lo:lo + batch_size]
            encoded = model(input_ids=torch.tensor([prompt], device=device), use_cache=True, logits_to_keep=1)
            first = encoded.logits[0, -1:].float().cpu()  # predicts every completion's first token
            width = max(len(completions[i]) for i in batch) - 1  # a completion's last token predicts nothing needed
            if width == 0:
                for i in batch:
                    out[i] = first
                continue
            ids = torch.zeros(len(batch), width, dtype=torch.long)
            mask = torch.zeros(len(batch), len(prompt) + width, dtype=torch.long)
            mask[:, :len(prompt)] = 1
            for j, i in enumerate(batch):
                n = len(completions[i]) - 1
                ids[j, :n] = torch.tensor(completions[i][:-1])
                mask[j, len(prompt):len(prompt) + n] = 1
            cache = getattr(encoded, keyword)  # `cache` from transformers 5.24, `past_key_values` before
            cache.batch_repeat_interleave(len(batch))
            positions = (len(prompt) + torch.arange(width)).expand(len(batch), -1)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                           use_cache=True, **{keyword: cache}).logits.float().cpu()
            for j, i in enumerate(batch):
                out[i] = torch.cat([first, logits[j, :len(completions[i]) - 1]])
    return out  # type: ignore[return-value]: every row was filled


def _counts(r: dict, c: dict, stops: set[int]) -> list[str]:
    """What is wrong with the counts a record carries, given its settings."""
    wrong = []
    tokens, limit = r["tokens"], c["max_new_tokens"]
    if r["n_tokens"] != len(tokens) or len(tokens) > limit:
        wrong.append(f"n_tokens {r['n_tokens']} for {len(tokens)} tokens (at most {limit})")
    ends = ends_with_stop(tokens, stops)
    if r["stopped"] != ends or any(t in stops for t in tokens[:-1]):
        wrong.append("it says it stopped where its tokens do not end at a stop token (or run past one)")
    if not r["stopped"] and c.get("method") in ("greedy", "temperature", "low_temperature") and len(tokens) != limit:
        wrong.append(f"an unstopped plain decode of {len(tokens)} tokens, not {limit}")
    method = c.get("method")
    if method in ("greedy", "temperature", "low_temperature") and r["decoded_tokens"] != len(tokens):
        wrong.append(f"a plain decode that decoded {r['decoded_tokens']} tokens for {len(tokens)}")
    if method == "power":
        if r["decoded_tokens"] < len(tokens):
            wrong.append(f"an MH chain that decoded {r['decoded_tokens']} tokens, fewer than its {len(tokens)}")
        rate = r.get("acceptance")
        if (c.get("mcmc_steps") == 0) != (rate is None) or (rate is not None and not 0 <= rate <= 1):
            wrong.append(f"acceptance {rate!r} with {c.get('mcmc_steps')} MH steps per block")
    if method == "smc":
        blocks = math.ceil(limit / c["block_size"])
        particles = r.get("particles", [])
        if len(particles) != c.get("particles") or not 0 <= r.get("chosen", -1) < len(particles):
            wrong.append(f"{len(particles)} particles (settings: {c.get('particles')}), chosen {r.get('chosen')}")
        if not 0 <= r.get("resamples", -1) <= blocks:
            wrong.append(f"{r.get('resamples')} resamples in at most {blocks} blocks")
        if any(p["n_tokens"] > limit for p in particles):
            wrong.append("a particle longer than max_new_tokens")
    return wrong
