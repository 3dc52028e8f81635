"""The results release: records are checked before they are released, read before the local store, never
rewritten, refused when their file no longer matches the manifest; and the audit re-derives released decodes."""

from __future__ import annotations

import gzip
import json

import pytest

import helpers.evaluation.decodes as decodes
from helpers.core import env
from helpers.data.arithmetic import arithmetic_problems
from helpers.evaluation.audit import TOLERANCES, audit
from helpers.evaluation.decodes import DecodeSettings, decode_run, sample
from helpers.results.release import ReleaseError, add_batch, read_manifest
from helpers.runner.publish import RecordCheck, released_records
from helpers.samplers.power import PowerConfig
from helpers.samplers.target import Target

# The store, the release and the budget are the library's own logic, the same under every transformers: one run.
pytestmark = pytest.mark.once

GREEDY = DecodeSettings("greedy", max_new_tokens=10)
POWER = DecodeSettings("power", max_new_tokens=10, target=Target(2.0),
                       power=PowerConfig(block_size=5, mcmc_steps=1, mode="reference"))


def _decode(model, problems, settings, store, n_seeds=1):
    return sample(model, problems, settings, n_seeds=n_seeds, batch_size=4, root=store, progress=False)


@pytest.fixture
def released(tmp_path, tiny, monkeypatch):
    """A local store of tiny-model decodes, released into a release of its own; SVD_RELEASE points at it."""
    from conftest import tiny_problems

    model = tiny
    store, root = tmp_path / "store", tmp_path / "release"
    root.mkdir()
    _decode(model, tiny_problems(), GREEDY, store)
    batch = add_batch(store, root, commit="abc1234", check=RecordCheck())
    assert not batch.refused and sum(batch.added.values()) == 2 and batch.name.startswith("b")
    monkeypatch.setenv(env.RELEASE, str(root))
    return model, model.tokenizer, store, root


def test_released_records_are_read_first_and_nothing_released_is_computed(released, tmp_path, monkeypatch):
    from conftest import tiny_problems

    model, _tokenizer, store, _root = released
    empty = tmp_path / "empty"
    run = decode_run(model, GREEDY, root=empty)
    assert len(run) == 2 and run.released == set(run.results())

    def no_decoding(*args, **kwargs):
        raise AssertionError("a released record was computed again")

    monkeypatch.setattr(decodes, "decode_work", no_decoding)
    again = _decode(model, tiny_problems(), GREEDY, empty)
    first = _decode(model, tiny_problems(), GREEDY, store)
    assert [r[0]["tokens"] for r in again] == [r[0]["tokens"] for r in first]
    assert not (empty / "decode").exists() or not any((empty / "decode").glob("*.jsonl"))


def test_a_batch_only_adds_files_and_the_manifest_says_what_computed_them(released):
    from conftest import tiny_problems

    model, _tokenizer, store, root = released
    manifest = read_manifest(root)
    first = {rel: (root / rel).read_bytes() for rel in manifest.files}
    (first_name,) = manifest.batches
    from helpers.results.origin import origin

    computed = origin()["commit"] + ("+changes" if origin()["dirty"] else "")  # the records' own, not the adder's
    assert manifest.batches[first_name]["commit"] == computed and manifest.batches[first_name]["machine"]["cores"]
    assert manifest.records() == 2
    again = add_batch(store, root, commit="def5678", check=RecordCheck())  # nothing new
    assert again.already == 2 and not again.added and len(read_manifest(root).batches) == 1
    _decode(model, tiny_problems(), POWER, store)  # new records: a second batch of new files
    second = add_batch(store, root, commit="def5678", check=RecordCheck())
    manifest = read_manifest(root)
    assert second.name not in (first_name, "") and sum(second.added.values()) == 2 and manifest.records() == 4
    assert all((root / rel).read_bytes() == blob for rel, blob in first.items())  # never rewritten
    assert {e["batch"] for e in manifest.files.values()} == {first_name, second.name}


def test_an_interrupted_add_leaves_the_release_as_it_was(released, monkeypatch):
    """Files first, the manifest last and in one step: an add stopped before the manifest changes nothing a reader
    or `release status` sees, and the same add afterwards succeeds."""
    import os

    from conftest import tiny_problems

    import helpers.results.release as release
    from helpers.runner.publish import status

    model, _tokenizer, store, root = released
    before, said = (root / "manifest.json").read_bytes(), status(root)
    _decode(model, tiny_problems(), POWER, store)
    real = os.replace

    def interrupted(src, dst):
        if str(dst).endswith("manifest.json"):
            raise KeyboardInterrupt  # the moment after every file is in place, before the manifest names them
        return real(src, dst)

    monkeypatch.setattr(release.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        add_batch(store, root, commit="def5678", check=RecordCheck())
    monkeypatch.setattr(release.os, "replace", real)
    assert (root / "manifest.json").read_bytes() == before
    assert status(root).splitlines()[:2] == said.splitlines()[:2] and "does not list" in status(root)
    again = add_batch(store, root, commit="def5678", check=RecordCheck())
    assert sum(again.added.values()) == 2 and read_manifest(root).records() == 4
    assert all(rel in read_manifest(root).files for rel in again.files)


def test_an_add_whose_manifest_would_not_read_back_adds_nothing(released, monkeypatch):
    """The add checks its new manifest as reading will: one that reading would refuse (here a date that is not a
    date) is never written, and no file of the refused batch stays behind."""
    from conftest import tiny_problems

    import helpers.results.release as release

    model, _tokenizer, store, root = released
    before, files = (root / "manifest.json").read_bytes(), sorted(root.rglob("*"))
    _decode(model, tiny_problems(), POWER, store)
    monkeypatch.setattr(release.time, "strftime", lambda *a: "yesterday")
    with pytest.raises(ReleaseError, match=r"would not read back .*a date added that is not a date.*nothing was added"):
        add_batch(store, root, commit="def5678", check=RecordCheck())
    assert (root / "manifest.json").read_bytes() == before and sorted(root.rglob("*")) == files


def test_a_batch_counts_each_record_under_the_chapter_that_computed_it(tiny, tmp_path, monkeypatch):
    """A later chapter reads an earlier one's runs (chapter 05 adds samples to chapter 04's): a record computed in a
    chapter's kernel names that chapter; one that names none belongs to the first chapter in book order that used
    its run, whatever order the build's run configuration lists the chapters in."""
    from conftest import tiny_problems

    model = tiny
    store, root = tmp_path / "store", tmp_path / "release"
    root.mkdir()
    _decode(model, tiny_problems(), GREEDY, store)  # outside the runner: no chapter said
    monkeypatch.setenv(env.CHAPTER, "05_cost")
    _decode(model, tiny_problems(), POWER, store)
    runs = {("decode", decode_run(model, s, root=store).hash) for s in (GREEDY, POWER)}
    chapters = {"05_cost": runs, "04_power_sampling": runs}
    batch = add_batch(store, root, commit="x", check=RecordCheck(), chapters=chapters, runs=runs)
    assert read_manifest(root).batches[batch.name]["records_by_chapter"] == {"04_power_sampling": 2, "05_cost": 2}


def test_batch_names_come_from_their_content_so_two_branches_do_not_collide(tiny, tmp_path):
    """Two stores that each add different records to the same release name their batches apart."""
    from conftest import tiny_problems

    model = tiny
    names = []
    for settings in (GREEDY, POWER):
        store, root = tmp_path / settings.method / "store", tmp_path / settings.method / "release"
        root.mkdir(parents=True)
        _decode(model, tiny_problems(), settings, store)
        names.append(add_batch(store, root, commit="x", check=RecordCheck(), dry_run=True).name)
    assert names[0] != names[1] and all(n.startswith("b") for n in names)


def test_a_record_whose_key_lies_about_its_settings_is_refused_and_nothing_is_released(released, tmp_path):
    _model, _tokenizer, store, root = released
    path = next((store / "decode").glob("*.jsonl"))
    record = json.loads(path.read_text().splitlines()[0])
    record["config"]["max_new_tokens"] = 99  # another configuration under this file's hash
    record["key"] = "p9@0000000000#0"
    path.write_text(path.read_text() + json.dumps(record) + "\n")
    batch = add_batch(store, root, commit="x", check=RecordCheck())
    assert len(batch.refused) == 1 and "does not hash" in batch.refused[0]
    assert not batch.files and len(read_manifest(root).batches) == 1


def test_a_result_of_the_wrong_shape_is_refused(released):
    _model, _tokenizer, store, root = released
    path = next((store / "decode").glob("*.jsonl"))
    record = json.loads(path.read_text().splitlines()[0])
    record["key"], record["result"]["tokens"] = "p8@0000000000#0", "not a list"
    path.write_text(path.read_text() + json.dumps(record) + "\n")
    batch = add_batch(store, root, commit="x", check=RecordCheck())
    assert len(batch.refused) == 1 and "shape" in batch.refused[0]


def test_a_changed_released_file_is_refused_with_what_to_do(released, tmp_path):
    model, _tokenizer, _store, root = released
    rel = next(iter(read_manifest(root).files))
    lines = gzip.decompress((root / rel).read_bytes()).decode().splitlines()
    record = json.loads(lines[0])
    record["result"]["correct"] = not record["result"]["correct"]
    (root / rel).write_bytes(gzip.compress(("\n".join([json.dumps(record), *lines[1:]]) + "\n").encode()))
    with pytest.raises(ReleaseError, match=r"sha256.*git checkout release/"):
        decode_run(model, GREEDY, root=tmp_path / "empty")


def test_a_damaged_manifest_is_a_clear_error(released, tmp_path):
    model, _tokenizer, _store, root = released
    (root / "manifest.json").write_text('{"format": 1, "files": {"../../etc/passwd": {}}, "batches": {}}')
    with pytest.raises(ReleaseError, match="not a release manifest"):
        decode_run(model, GREEDY, root=tmp_path / "empty")


@pytest.mark.parametrize("change, fragment", [
    ({"records": "1"}, "without one of"), ({"records": True}, "record counts that are not counts"),
    ({"records": 2, "records_by_chapter": {"04_power_sampling": 2}}, "2 records, 2 by chapter and 1 in its files"),
    ({"records_by_chapter": {"04_power_sampling": 2, "05_cost": -1}}, "record counts that are not counts"),
    ({"compute_seconds_by_chapter": {"04_power_sampling": "an hour"}}, "compute seconds that are not seconds"),
    ({"added": "yesterday"}, "a date added that is not a date"), ({"weights": [3]}, "weights that are not text"),
    ({"machine": {"cpu": "EPYC", "flags": "avx512f"}}, "a machine that is not a cpu and its flags"),
    ({"computed_on": [None]}, "a machine that is not a cpu and its flags"), ({"machine": None}, "without one of"),
])
def test_a_batch_entry_that_does_not_add_up_is_named(tmp_path, change, fragment):
    """The manifest's batches are checked on reading, as its files are: each field of its type, the counts agreeing
    with each other and with the records the batch's files hold."""
    batch = {"added": "2026-12-04T01:52:48+0000", "machine": {"cpu": "AMD EPYC", "flags": ["avx2"]}, "records": 1,
             "records_by_chapter": {"04_power_sampling": 1}, "compute_seconds_by_chapter": {"04_power_sampling": 2.5},
             "weights": ["m: 0123"], "computed_on": [{"cpu": "AMD EPYC", "flags": ["avx2"]}]}
    files = {"records/decode/abc.b1.jsonl.gz": {"sha256": "0" * 64, "records": 1, "experiment": "decode",
                                                "config_hash": "abc", "batch": "b1"}}
    (tmp_path / "manifest.json").write_text(json.dumps({"format": 1, "files": files, "batches": {"b1": batch}}))
    assert read_manifest(tmp_path).batches["b1"]["records"] == 1  # the honest entry reads
    (tmp_path / "manifest.json").write_text(json.dumps({"format": 1, "files": files, "batches": {"b1": batch | change}}))
    with pytest.raises(ReleaseError, match=f"not a release manifest \\(batch 'b1' has .*{fragment}.*git checkout release/"):
        read_manifest(tmp_path)


def test_release_off_computes_from_the_local_store_alone(released, tmp_path, monkeypatch):
    model, _tokenizer, _store, _root = released
    monkeypatch.setenv(env.RELEASE, "off")
    assert len(decode_run(model, GREEDY, root=tmp_path / "empty")) == 0


# --------------------------------------------------------------------------------------------------
# The audit, on the embedded model (the audit re-derives decodes of embedded models on the arithmetic benchmark)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol_release(tmp_path_factory):
    from helpers.models.loading import load_model

    model = load_model("smollm2-135m", device="cpu", dtype="float32")
    base = tmp_path_factory.mktemp("audit")
    store, root = base / "store", base / "release"
    root.mkdir()
    problems = arithmetic_problems(1, levels=[1, 2])
    for settings in (GREEDY, POWER, DecodeSettings("temperature", max_new_tokens=10)):
        _decode(model, problems, settings, store, n_seeds=2)
    batch = add_batch(store, root, commit="abc1234", check=RecordCheck())
    assert not batch.refused and sum(batch.added.values()) == 10
    return root


def _tampered(root, tmp_path, edit):
    """A copy of the release whose first greedy record `edit` changed, with the manifest updated to match (as a
    tamperer would): the audit, not the checksum, must catch it."""
    import hashlib
    import shutil

    copy = tmp_path / "tampered"
    shutil.copytree(root, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    rel = next(r for r in sorted(manifest["files"]) if "decode" in r and any(
        json.loads(line)["config"]["method"] == "greedy"
        for line in gzip.decompress((copy / r).read_bytes()).decode().splitlines()))
    lines = [json.loads(line) for line in gzip.decompress((copy / rel).read_bytes()).decode().splitlines()]
    edit(lines[0]["result"])
    blob = gzip.compress("".join(json.dumps(r) + "\n" for r in lines).encode(), mtime=0)
    (copy / rel).write_bytes(blob)
    manifest["files"][rel]["sha256"] = hashlib.sha256(blob).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_the_audit_passes_honest_records(smol_release, capsys, monkeypatch):
    monkeypatch.delenv("SVD_PROGRESS", raising=False)
    report = audit(released_records(smol_release))
    assert len(report.findings) == 10 and not report.failed, report.summary()
    assert report.max_logp_deviation < TOLERANCES["float32"].logp
    assert set(report.by_dtype()) == {"float32"} and "float32 decodes: 10" in report.summary()
    assert "10/10" in capsys.readouterr().err  # a long audit says where it stands


def test_the_audits_shared_prompt_passes_give_each_row_its_own_logits(tiny):
    """Teacher forcing prompt by prompt (each prompt encoded once, its cache copied to the completions after it, in
    batches smaller than the group, right-padded) gives the logits of one plain pass over prompt + completion."""
    import torch

    from helpers.evaluation.audit import _teacher_forced

    model = tiny.module
    prompts = [[3, 4, 5], [3, 4, 5], [6, 7], [3, 4, 5], [3, 4, 5]]
    completions = [[8, 9, 10, 11], [12], [13, 14, 15], [], [16, 17]]
    got = _teacher_forced(model, prompts, completions, batch_size=2)
    for prompt, completion, logits in zip(prompts, completions, got, strict=True):
        with torch.inference_mode():
            whole = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
        assert logits.shape == (len(completion), whole.shape[-1])
        torch.testing.assert_close(logits, whole[len(prompt) - 1:len(prompt) + len(completion) - 1], atol=1e-4,
                                   rtol=1e-4)


def test_the_audit_fails_a_record_with_one_token_changed(smol_release, tmp_path):
    def change(result):
        result["tokens"][1] = (result["tokens"][1] + 1) % 1000

    report = audit(released_records(_tampered(smol_release, tmp_path, change)))
    assert len(report.failed) == 1, report.summary()
    problems = " ".join(report.failed[0].problems)
    assert "sum_logp" in problems and "argmax" in problems


def test_the_audit_command_names_each_finding_as_it_is_audited(smol_release, tmp_path, capsys):
    """`audit --findings FILE` writes every record's finding (deviation, completion length, problems) as a line when it
    is audited, and a failure is named on stderr at once: an audit stopped part-way keeps what it found."""
    from helpers.cli import main

    def change(result):
        result["sum_logp"] += 0.5

    findings = tmp_path / "findings.jsonl"
    assert main(["audit", "--all", "--release", str(_tampered(smol_release, tmp_path, change)),
                 "--findings", str(findings)]) == 1
    lines = [json.loads(line) for line in findings.read_text().splitlines()]
    assert len(lines) == 10 and all(line["kind"] == "decode" and line["tokens"] > 0 for line in lines)
    failed = [line for line in lines if line["problems"]]
    assert len(failed) == 1 and 0.49 < failed[0]["logp_deviation"] < 0.51
    assert max(line["logp_deviation"] for line in lines if not line["problems"]) < TOLERANCES["float32"].logp
    assert f"[audit] FAILED {failed[0]['where']}: sum_logp" in capsys.readouterr().err


def test_a_stopped_audit_goes_on_from_its_findings(smol_release, tmp_path, capsys):
    """`audit --resume` does not audit again the records whose findings passed before the audit stopped; a failure
    and the line cut short by the stop are audited anew, and the file ends with one finding per record."""
    from helpers.cli import main

    def change(result):
        result["sum_logp"] += 0.5

    release, findings = str(_tampered(smol_release, tmp_path, change)), tmp_path / "findings.jsonl"
    assert main(["audit", "--all", "--release", release, "--findings", str(findings)]) == 1
    lines = findings.read_text().splitlines()
    cut = max(i for i, line in enumerate(lines) if not json.loads(line)["problems"])
    findings.write_text("\n".join(lines[:cut] + lines[cut + 1:] + [lines[cut][:40]]))  # stopped mid-line
    capsys.readouterr()
    assert main(["audit", "--all", "--release", release, "--findings", str(findings), "--resume"]) == 1
    out, err = capsys.readouterr()
    assert "resuming: 8 records passed in an earlier run" in err and "; 2 to audit" in err
    assert "audited 10 records (8 by an earlier run, read from its findings; this run's 2 in" in out
    assert "1 failed" in out
    again = [json.loads(line) for line in findings.read_text().splitlines()]
    assert sorted(f["where"] for f in again) == sorted(json.loads(line)["where"] for line in lines)
    assert sum(bool(f["problems"]) for f in again) == 1


def test_an_audit_refuses_to_resume_from_findings_it_did_not_write(smol_release, tmp_path, capsys):
    """Findings of records this audit does not hold, or a line that is not a finding, stop the audit before any
    work, with a message that names the line; the file is left as it was."""
    from helpers.cli import main
    from helpers.evaluation.audit import Finding

    findings = tmp_path / "findings.jsonl"
    assert main(["audit", "--all", "--release", str(smol_release), "--resume"]) == 2
    assert "--findings FILE" in capsys.readouterr().err
    for text, why in ((json.dumps(Finding("decode/0123 another-batch (greedy)").as_dict()) + "\n",
                       "line 1 is the finding of decode/0123 another-batch (greedy), which this audit does not hold"),
                      ('{"where": "x"}\n{}\n', "line 1 is not an audit finding"),
                      (json.dumps(Finding("x", dtype="float16").as_dict()) + "\n{}\n", "line 1 is not an audit finding")):
        findings.write_text(text)
        assert main(["audit", "--all", "--release", str(smol_release), "--findings", str(findings), "--resume"]) == 2
        assert why in capsys.readouterr().err and findings.read_text() == text


def test_the_audit_fails_a_record_with_its_logp_edited(smol_release, tmp_path):
    def change(result):
        result["sum_logp"] += 0.5

    report = audit(released_records(_tampered(smol_release, tmp_path, change)))
    assert len(report.failed) == 1 and "sum_logp" in report.failed[0].problems[0], report.summary()


def test_a_long_completions_sum_may_sit_so_much_a_token_off(smol_release, tmp_path, monkeypatch):
    """Each token's rounding adds to a completion's summed log-probability, so the tolerance grows with the
    completion's length past its floor: a sum 0.05 nats off fails at the measured rate and passes at a rate that
    allows 0.06 for the record's length."""
    import dataclasses

    import helpers.evaluation.audit as audit_module

    def change(result):
        result["sum_logp"] += 0.05

    tampered = released_records(_tampered(smol_release, tmp_path, change))
    failed = audit(tampered).failed
    assert len(failed) == 1 and "(tolerance 0.02 for" in failed[0].problems[0]
    float32 = TOLERANCES["float32"]
    assert float32.allowed(1) == float32.logp and float32.allowed(10_000) == 10_000 * float32.per_token
    monkeypatch.setitem(audit_module.TOLERANCES, "float32",
                        dataclasses.replace(float32, per_token=0.06 / failed[0].tokens))
    report = audit(tampered)
    assert not report.failed and 0.8 < report.by_dtype()["float32"].used <= 1, report.summary()


def test_the_audit_fails_a_record_whose_counts_do_not_fit_its_settings(smol_release, tmp_path):
    def change(result):
        result["decoded_tokens"] += 3

    report = audit(released_records(_tampered(smol_release, tmp_path, change)))
    assert len(report.failed) == 1 and "plain decode" in report.failed[0].problems[0], report.summary()


@pytest.mark.once  # the release's weights are those of the current transformers' conversion (the lowest converts anew)
@pytest.mark.release_audit
def test_a_sample_of_the_shipped_release_passes_the_audit():
    """`make check` audits a few random released decodes of the models installed here (the Pages workflow audits them
    all); the shipped release must pass as it is."""
    from helpers.core.env import REPO
    from helpers.evaluation.audit import auditable
    from helpers.models.wheels import missing_wheels
    from helpers.runner.publish import sample_records

    if not (REPO / "release" / "manifest.json").is_file():
        pytest.skip("NO RELEASE IN THIS CHECKOUT: the shipped release was not audited")
    records = [r for r in released_records(REPO / "release")
               if auditable(r) is None and not missing_wheels([r["config"]["model"]])]
    if not records:
        pytest.skip("NO RELEASED DECODE OF A MODEL INSTALLED HERE (python -m helpers install-models --profile full): "
                    "the shipped release was not audited")
    report = audit(sample_records(records, 3, seed=len(records)))
    assert len(report.findings) == 3 and not report.failed, report.summary()


@pytest.mark.once
@pytest.mark.release_audit
def test_a_sample_of_the_shipped_releases_studies_passes_the_audit():
    """One released study of each kind, of the models installed here (toy curves need none), computed again."""
    from helpers.core.env import REPO
    from helpers.evaluation.audit_studies import audit_records, reason
    from helpers.models.wheels import missing_wheels
    from helpers.runner.publish import sample_each_kind

    if not (REPO / "release" / "manifest.json").is_file():
        pytest.skip("NO RELEASE IN THIS CHECKOUT: the shipped release's studies were not audited")
    released = released_records(REPO / "release")

    def installed(r: dict) -> bool:
        c = r["config"]
        names = [v["model"] for v in c.values() if isinstance(v, dict) and "model" in v]  # a pair's (agreement, maps)
        names += [c["model"]] if "model" in c else []
        return not missing_wheels(names)

    studies = [r for r in released if r["experiment"] != "decode" and reason(r) is None and installed(r)]
    report = audit_records(sample_each_kind(studies, 1, seed=len(studies)),
                           [r for r in released if r["experiment"] == "decode"], progress=False)
    assert report.findings and not report.failed, report.summary()


def test_bfloat16_decodes_are_audited_within_their_own_tolerance(tmp_path):
    """bfloat16 rounds coarser than float32, so its decodes are audited against a wider, measured tolerance: honest
    ones pass wherever they are audited, one whose log-probability moved by more than that fails, and a number format
    without a measured tolerance is listed as not audited, with the reason."""
    import copy

    from helpers.evaluation.audit import auditable
    from helpers.models.loading import load_model
    from helpers.runner.publish import stored_records

    model = load_model("smollm2-135m", device="cpu", dtype="bfloat16")
    store = tmp_path / "store"
    problems = arithmetic_problems(1, levels=[1, 2])
    for settings in (GREEDY, POWER):
        _decode(model, problems, settings, store)
    records = stored_records(store)
    report = audit(records, progress=False)
    assert len(report.findings) == 4 and not report.failed, report.summary()
    assert set(report.by_dtype()) == {"bfloat16"} and "(tolerance 2.5 nats;" in report.summary()
    edited = copy.deepcopy(records)
    edited[0]["result"]["sum_logp"] += 2 * TOLERANCES["bfloat16"].logp
    assert len(audit(edited, progress=False).failed) == 1
    record = copy.deepcopy(records[0])
    record["config"]["dtype"] = "float16"
    assert auditable(record) == "float16 decodes (no tolerance is measured for them)"


def test_a_record_carries_where_it_was_computed_and_its_batch_says_so(tiny, tmp_path, monkeypatch):
    """The store writes the commit and machine into each record as it computes it; a batch added later, on another
    commit, reports the records' own origin, not the adder's."""
    import subprocess

    from conftest import tiny_problems

    import helpers.results.store as store_module
    from helpers.results.origin import origin
    from helpers.runner.publish import status

    here = origin()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=env.REPO, capture_output=True, text=True).stdout.strip()
    assert here["commit"] == head and isinstance(here["dirty"], bool) and here["machine"]["cores"]
    model = tiny
    store, root = tmp_path / "store", tmp_path / "release"
    root.mkdir()
    computed = {"commit": "a" * 40, "dirty": False, "machine": {"cpu": "the computing machine", "flags": ["avx2"],
                                                                 "cores": 2}}
    monkeypatch.setattr(store_module, "origin", lambda: computed)
    _decode(model, tiny_problems(), GREEDY, store)
    line = json.loads(next((store / "decode").glob("*.jsonl")).read_text().splitlines()[0])
    assert line["origin"] == computed
    batch = add_batch(store, root, commit="b" * 40, check=RecordCheck())
    entry = read_manifest(root).batches[batch.name]
    assert entry["commit"] == "a" * 40 and entry["computed_at"] == ["a" * 40]
    assert entry["machine"]["cpu"] == "the computing machine" and entry["records_without_origin"] == 0
    assert f"computed at {'a' * 40} on the computing machine" in status(root)


def test_a_build_that_reads_the_release_as_complete_stops_before_work(released, tmp_path, monkeypatch):
    """Released records of another shape (the code now stores more), or keys the release lacks: a published build
    stops before decoding anything and says which records and why; without the flag they are computed."""
    from conftest import tiny_problems

    from helpers.results.store import NotReleased

    model, _tokenizer, _store, _root = released
    empty = tmp_path / "empty"

    def no_decoding(*args, **kwargs):
        raise AssertionError("a build that reads the release as complete decoded")

    monkeypatch.setattr(decodes, "decode_work", no_decoding)
    monkeypatch.setenv(env.RELEASED_ONLY, "1")
    assert len(_decode(model, tiny_problems(), GREEDY, empty)) == 2  # all released: read, nothing to do
    monkeypatch.setattr(decodes, "RECORD_SHAPE", {**decodes.RECORD_SHAPE, "new_field": int})
    with pytest.raises(NotReleased, match=r"2 records of decode .* cannot be used here \(unreadable, or of another "
                                          r"shape.*Nothing was computed.*--recompute"):
        _decode(model, tiny_problems(), GREEDY, empty)
    monkeypatch.setattr(decodes, "RECORD_SHAPE", decodes.RECORD_SHAPE)
    with pytest.raises(NotReleased, match="the release holds no record under this key"):
        _decode(model, tiny_problems(), DecodeSettings("greedy", max_new_tokens=11), empty)
    assert not (empty / "decode").exists() or not any((empty / "decode").glob("*.jsonl"))


def test_a_released_profile_runs_its_kernels_with_the_guard_unless_told_to_recompute(monkeypatch):
    import os

    import helpers.runner.run as runner

    seen = []
    monkeypatch.setattr(runner, "_run", lambda *args, **kwargs: seen.append(os.environ.get(env.RELEASED_ONLY)))
    monkeypatch.delenv(env.RELEASED_ONLY, raising=False)
    runner.run("full")
    runner.run("full", recompute=True)
    runner.run("smoke")
    assert seen == ["1", None, None] and env.RELEASED_ONLY not in os.environ


def test_a_push_audits_the_batches_it_added(capsys):
    """`audit --since REF` takes the batches the manifest gained since commit REF: none since HEAD, all of them since
    a commit before the release existed, and every batch where REF is not a commit here (a first push)."""
    import subprocess

    from helpers.cli import main
    from helpers.runner.publish import batches_since

    root = env.REPO / "release"
    if not (root / "manifest.json").is_file():
        pytest.skip("NO RELEASE IN THIS CHECKOUT")
    first = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "release/manifest.json"],
                           cwd=env.REPO, capture_output=True, text=True).stdout.split()
    clean = not subprocess.run(["git", "status", "--porcelain", "--", "release"], cwd=env.REPO, capture_output=True,
                               text=True).stdout.strip()
    if clean:
        assert batches_since("HEAD", root) == set()
        assert main(["audit", "--since", "HEAD"]) == 0 and "batches added since HEAD: none" in capsys.readouterr().out
    assert batches_since("0" * 40, root) is None
    if first:
        assert batches_since(f"{first[-1]}~1", root) == set(read_manifest(root).batches)
    with pytest.raises(ReleaseError, match="has no batch b999"):
        released_records(root, {"b999"})


def test_a_push_audit_refuses_what_git_cannot_answer(tmp_path, capsys):
    """`--since` on a release outside the checkout says to name batches instead; `--store` with a choice of the
    release's batches is refused before any record is read."""
    from helpers.cli import main
    from helpers.runner.publish import batches_since

    outside = tmp_path / "release"
    outside.mkdir()
    (outside / "manifest.json").write_text('{"batches": {}}')
    with pytest.raises(ReleaseError, match=r"outside this checkout.*--batch"):
        batches_since("HEAD", outside)
    assert main(["audit", "--store", str(tmp_path), "--since", "HEAD"]) == 2
    assert "Give one or the other" in capsys.readouterr().err


def _stopped_under_way(model, store, monkeypatch) -> DecodeSettings:
    """Decode MH chains of the tiny problems into `store` until a budget runs out after three checkpoints: a step
    that leaves chains under way. The chains' settings, to go on with."""
    from conftest import tiny_problems

    from helpers.core import budget
    from helpers.results.store import Run

    chains = DecodeSettings("power", 24, target=Target(2.0), power=PowerConfig(block_size=4, mcmc_steps=1))
    saved = []
    save = Run.save_checkpoint
    monkeypatch.setattr(Run, "save_checkpoint", lambda self, *a: (saved.append(a[0]), save(self, *a)))
    monkeypatch.setattr(budget, "deadline", lambda: 0.0 if len(saved) >= 3 else None)
    with pytest.raises(budget.BudgetSpent):
        _decode(model, tiny_problems(), chains, store, n_seeds=2)
    monkeypatch.setattr(budget, "deadline", lambda: None)
    return chains


def test_the_checkpoints_of_chains_under_way_travel_with_the_release(released, tmp_path, monkeypatch, capsys):
    """A step stopped by its budget leaves MH chains under way: `release add` carries their checkpoints (listed and
    checked like records), a fresh store elsewhere goes on from them to the records an uninterrupted run writes,
    and the add that releases those records drops them."""
    from conftest import tiny_problems

    from helpers.cli import main
    from helpers.results.release import unlisted

    model, _tokenizer, store, root = released
    chains = _stopped_under_way(model, store, monkeypatch)
    under_way = decode_run(model, chains, root=store).checkpoints()
    batch = add_batch(store, root, commit="abc1234", check=RecordCheck())
    manifest = read_manifest(root)
    assert under_way and batch.checkpoints == len(under_way) == sum(e["chains"] for e in manifest.checkpoints.values())
    assert not unlisted(root)
    before = (root / "manifest.json").read_bytes()  # an add with nothing new writes nothing and names no batch
    again = add_batch(store, root, commit="abc1234", check=RecordCheck())
    assert again.name == "" and not again.checkpoints_moved and again.checkpoints == batch.checkpoints
    assert (root / "manifest.json").read_bytes() == before
    assert main(["release", "add", "--store", str(store), "--release", str(root)]) == 0
    said = capsys.readouterr().out
    assert "nothing new to release" in said and "unchanged" in said and "released as batch" not in said
    fresh = tmp_path / "fresh"  # another machine: no local store, the release's checkpoints
    assert decode_run(model, chains, root=fresh).checkpoints().keys() == under_way.keys()
    resumed = _decode(model, tiny_problems(), chains, fresh, n_seeds=2)
    monkeypatch.setenv(env.RELEASE, "off")
    whole = _decode(model, tiny_problems(), chains, tmp_path / "whole", n_seeds=2)
    assert [r["tokens"] for per in resumed for r in per] == [r["tokens"] for per in whole for r in per]
    monkeypatch.setenv(env.RELEASE, str(root))
    final = add_batch(fresh, root, commit="abc1234", check=RecordCheck())
    assert sum(batch.added.values()) + sum(final.added.values()) == 4 and final.checkpoints == 0
    assert not read_manifest(root).checkpoints and not list((root / "checkpoints").rglob("*.gz")) and not unlisted(root)


def test_the_checkpoints_of_a_configuration_no_profile_computes_can_be_dropped(released, monkeypatch, capsys):
    """`release status` lists each run's chains under way with its settings; `release drop-checkpoints` takes a
    named run's checkpoints out (manifest and files) and leaves its records, and refuses a run the release holds
    none of, or a malformed name, before anything changes."""
    from helpers.cli import main
    from helpers.results.release import file_lines, unlisted
    from helpers.runner.publish import run_settings

    model, _tokenizer, store, root = released
    _stopped_under_way(model, store, monkeypatch)
    batch = add_batch(store, root, commit="abc1234", check=RecordCheck())
    manifest = read_manifest(root)
    (entry,) = manifest.checkpoints.values()
    run = f"{entry['experiment']}/{entry['config_hash']}"
    assert main(["release", "status", "--release", str(root)]) == 0
    said = capsys.readouterr().out
    assert f"    {run}: {entry['chains']} chains (none of its records is released yet)" in said
    rel, file_entry = next(iter(manifest.files.items()))  # a run with records: its settings, from the first
    assert f"method {json.loads(file_lines(root, rel, file_entry)[0])['config']['method']}" in run_settings(
        root, rel, file_entry)
    before = (root / "manifest.json").read_bytes()
    assert main(["release", "drop-checkpoints", "--release", str(root), "--run", "decode/0000000000000000"]) == 2
    assert "holds no checkpoints of decode/0000000000000000" in capsys.readouterr().err
    assert main(["release", "drop-checkpoints", "--release", str(root), "--run", "no-slash"]) == 2
    assert main(["release", "drop-checkpoints", "--release", str(root)]) == 2
    assert (root / "manifest.json").read_bytes() == before  # refused: nothing changed
    assert main(["release", "drop-checkpoints", "--release", str(root), "--run", run]) == 0
    assert f"dropped the checkpoints of {batch.checkpoints} chains" in capsys.readouterr().out
    after = read_manifest(root)
    assert not after.checkpoints and after.files == manifest.files and after.batches == manifest.batches
    assert not list((root / "checkpoints").rglob("*.gz")) and not unlisted(root)


def test_a_records_origin_is_the_code_its_process_started_with(monkeypatch):
    """A long run's records name the commit it started at, even when commits land while it runs: the origin is read
    when a chapter (or a command) starts, not at the first record."""
    from helpers.results import origin

    origin._computed_on.cache_clear()
    origin.commit.cache_clear()
    monkeypatch.setattr(origin, "machine", lambda: {"cpu": "x"})
    heads = iter(["aaa", "bbb"])
    monkeypatch.setattr(origin.subprocess, "run", lambda args, **kw: type(
        "Out", (), {"returncode": 0, "stdout": next(heads) if "rev-parse" in args else ""})())
    try:
        origin.read_now()  # the run starts at aaa
        assert origin.origin()["commit"] == "aaa"  # and stores its first record after bbb landed
    finally:
        origin._computed_on.cache_clear()
        origin.commit.cache_clear()
