"""The audit as a command runs it (`python -m helpers audit`): which records, sampled how, audited in what order, and
where each finding goes as soon as it exists. The audit itself is `helpers.evaluation.audit` (decodes, by teacher
forcing) and `helpers.evaluation.audit_studies` (studies, computed again); the records come from the release or a
store through `helpers.runner.publish`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from helpers.evaluation.audit import earlier_findings, record_label
from helpers.evaluation.audit_studies import audit_records, split_auditable
from helpers.results.release import ReleaseError
from helpers.runner import publish


def resume_findings(findings: Path, chosen: list[dict]) -> tuple[list, list[dict]]:
    """The findings an earlier audit of `chosen` left in `findings` that passed, and the records still to audit; the
    file is rewritten to hold just those findings (its failures are audited anew), replaced whole so that a stop
    here loses nothing."""
    labelled = [(record_label(r), r) for r in chosen]
    done = earlier_findings(findings.read_text().splitlines(), {label for label, _ in labelled})
    passed = {f.where for f in done}
    rest = [r for label, r in labelled if label not in passed]
    print(f"[audit] resuming: {len(done)} records passed in an earlier run ({findings}); {len(rest)} to audit",
          file=sys.stderr)
    kept = findings.with_suffix(".resumed")
    kept.write_text("".join(json.dumps(f.as_dict()) + "\n" for f in done))
    kept.replace(findings)
    return done, rest




def run_audit(*, store: str | None, release: str | None, since: str | None, batch: list[str] | None, sample: int,
              every: bool, seed: int, findings: str | None, resume: bool) -> int:
    """`python -m helpers audit`: choose the records (a local store's, or the release's, all or the batches added
    since a commit or named), sample each kind, audit decodes and studies together, write each finding at once to
    `findings` (and go on from an earlier run's with `resume`), and print the summary. Returns the exit status: 0
    all passed, 1 a record failed, 2 the arguments contradict each other."""
    root = Path(release) if release else None
    if store and (since or batch or release):
        print("audit: --store audits a local store's records; --since, --batch and --release choose the release's. "
              "Give one or the other.", file=sys.stderr)
        return 2
    if resume and not findings:
        print("audit: --resume goes on from the findings of an earlier run: name its file with --findings FILE.",
              file=sys.stderr)
        return 2
    batches = set(batch) if batch else None
    if since:
        batches = publish.batches_since(since, root)
        print(f"[audit] batches added since {since}: " + (", ".join(sorted(batches)) or "none") if batches is not None
              else f"[audit] {since} is not a commit here: every batch is audited")
        if batches == set():
            return 0
    records = publish.stored_records(Path(store)) if store else publish.released_records(root, batches)
    candidates, skipped = split_auditable(records)
    chosen = publish.sample_each_kind(candidates, None if every else sample, seed)
    # a study's sequences and accuracies are rebuilt from decodes, which may sit in other batches (or the release)
    decodes = [r for r in records if r.get("experiment") == "decode"]
    if store or batches is not None:
        with contextlib.suppress(ReleaseError):  # a local store audited where there is no release
            decodes += [r for r in publish.released_records(root) if r.get("experiment") == "decode"]
    done = []
    if resume and Path(findings).exists():
        try:
            done, chosen = resume_findings(Path(findings), chosen)
        except ValueError as err:
            print(f"audit: cannot resume from {findings}: {err}", file=sys.stderr)
            return 2
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(findings, "a" if resume else "w")) if findings else None

        def found(f) -> None:  # written at once: an audit stopped part-way keeps what it found
            if out:
                out.write(json.dumps(f.as_dict()) + "\n")
                out.flush()
            if f.problems:
                print(f"[audit] FAILED {f.where}: " + "; ".join(f.problems), file=sys.stderr, flush=True)

        report = audit_records(chosen, decodes, on_finding=found)
    report.findings[:0], report.resumed = done, len(done)
    report.skipped.update(skipped)
    print(report.summary())
    return 1 if report.failed else 0


