"""Bad input, case by case: each gives a clear error that names what is wrong, at the boundary where it enters.

One table per boundary (runner, sampling, problems, models, grading); each row is (case, call, error type, a
fragment the message must contain). The CLI rows run the real command line and check the exit code and that no
traceback is printed. The results store's behaviour under interruption and concurrency is tested below them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.data.problems import DataError
from helpers.data.sources import load_problems
from helpers.evaluation import grading
from helpers.models.loading import load_model
from helpers.models.registry import ModelLoadError
from helpers.results.store import Run
from helpers.runner.planning import plan
from helpers.runner.profiles import RunError, load_profile, parse_overrides
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import DecodeSettings
from helpers.samplers.smc import SMCConfig
from helpers.samplers.target import Target

REPO = Path(__file__).resolve().parents[2]


def _plan(*pairs: str):
    return lambda: plan("smoke", parse_overrides(list(pairs)))


RUNNER = [
    ("malformed -p list", _plan("levels=[1,2"), RunError, "-p levels"),
    ("-p without =", _plan("levels"), RunError, "key=value"),
    ("string for a count", _plan("n_problems=abc"), RunError, "'n_problems' = 'abc'"),
    ("number for a list", _plan("levels=7"), RunError, "'levels' = 7"),
    ("zero count", _plan("n_problems=0"), RunError, "at least 1"),
    ("negative seed", _plan("seed=-1"), RunError, "must be an integer from 0 to 2,147,483,647 (the seed problems"),
    ("negative shots", _plan("shots=-1"), RunError, "must be an integer from 0 to 16 (worked examples"),
    ("unknown dtype", _plan("dtype=float16"), RunError, "auto, float32, bfloat16"),
    ("string levels", _plan('levels=["3"]'), RunError, "every entry must be an integer"),
    ("level outside the benchmark", _plan("levels=[1,9]"), RunError, "levels [9]"),
    ("depth deeper than the model", _plan("depths=[29,31]"), RunError, "depths [31] do not fit smollm2-135m"),
    ("depth too shallow to stitch", _plan("depths=[1]"), RunError, "depths [1]"),
    ("alpha zero", _plan("alpha=0"), RunError, "'alpha' = 0"),
    ("alpha NaN", _plan("alpha=.nan"), RunError, "finite"),
    ("alpha as text", _plan("alpha=big"), RunError, "'alpha' = 'big'"),
    ("negative MH steps", _plan("mcmc_steps=-1"), RunError, "'mcmc_steps' = -1: mcmc_steps must be an integer of at least 0"),
    ("a block longer than the answer", _plan("block_size=4096"), RunError, "'max_new_tokens' = "),
    ("boolean for a count", _plan("n_seeds=true"), RunError, "'n_seeds' = True"),
    ("unknown parameter", _plan("no_such_key=1"), RunError, "no_such_key"),
    ("unknown model", _plan("models=[foo]"), RunError, "Unknown model 'foo'"),
    ("no model", _plan("models=[]"), RunError, "name at least one model"),
    ("unknown dataset", _plan("dataset=foo"), RunError, "unknown problem set"),
    ("unknown power mode", _plan("power_mode=bogus"), RunError, "'power_mode' = 'bogus': mode must be one of"),
    ("unknown engine", _plan("engine=sglang"), RunError, "the engine is one of slot, vllm"),
    ("no SMC particles", _plan("smc_particles=0"), RunError, "at least 1"),
    ("ESS threshold above 1", _plan("smc_ess_threshold=2"), RunError, "'smc_ess_threshold' = 2: ess_threshold must be a number from 0"),
    ("no toy particle counts", _plan("toy_particles=[]"), RunError, "non-empty list, each entry a particle count"),
    ("negative SMC bridge", _plan("smc_bridge_tokens=-3"), RunError, "'smc_bridge_tokens' = -3: bridge_tokens must be"),
    ("a toy particle count of 0", _plan("toy_particles=[1,0]"), RunError, "an integer from 1 to 1,024"),
    ("depths as a word", _plan("depths=abc"), RunError, "'depths' = 'abc': give a non-empty list"),
    ("depths as a number", _plan("depths=5"), RunError, "e.g. [23] or [critical, critical-1], or null"),
    ("depths as text entries", _plan('depths=["29"]'), RunError, "a depth is a number of blocks"),
    ("a misspelt relative depth", _plan("depths=[critcal]"), RunError, "'critical', 'critical+1', 'critical-1'"),
    ("a depth of 0", _plan("depths=[0]"), RunError, "an integer from 1 to"),
    ("no depths", _plan("depths=[]"), RunError, "'depths' = []"),
    ("fewer seeds at a depth that does not run", _plan("depths=[28]", "seeds_at={27: 1}"), RunError,
     "seeds_at names the depth 27, which is not among its depths [28]"),
    ("more seeds at a depth than n_seeds", _plan("depths=[28]", "n_seeds=2", "seeds_at={28: 3}"), RunError,
     "seeds_at[28] must be a number of samples from 1 to n_seeds (2)"),
    ("seeds_at as a number", _plan("seeds_at=1"), RunError, "'seeds_at' = 1"),
    ("negative toy steps", _plan("toy_steps=[-1]"), RunError, "a number of MH steps per block, an integer from 0"),
    ("no sweep steps", _plan("sweep_steps=[]"), RunError, "'sweep_steps' = []"),
    ("a level of 0", _plan("levels=[0,1]"), RunError, "a difficulty level"),
    ("unknown truncation", _plan("methods=[stitch,chop]"), RunError, "truncations from stitch, naive"),
    ("unknown skip part", _plan("skip_parts=[head]"), RunError, "parts from layer, attn, mlp"),
    ("no attribution component", _plan("ig_components=[]"), RunError, "components from layer, attn, mlp"),
    ("absurd token limit", _plan("max_new_tokens=100000000000"), RunError, "at most 100,000"),
    ("tokens beyond the context", _plan("max_new_tokens=20000"), RunError, "context holds 8,192 tokens"),
    ("absurd problem count", _plan("n_problems=100000000000"), RunError, "at most 100,000"),
    ("empty --only", lambda: plan("smoke", only=""), RunError, "--only needs a chapter name"),
    ("unknown profile", lambda: load_profile("nope"), RunError, "Unknown profile 'nope'"),
    ("missing profile file", lambda: load_profile("/no/such/profile.yaml"), RunError, "does not exist"),
]


def _profile_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return str(path)


PROFILE_FILES = [
    ("not YAML", "parameters: [1, 2\n", "not valid YAML"),
    ("not a mapping", "- 1\n- 2\n", "must be a mapping"),
    ("section not a mapping", "notebooks:\n  02_logit_lens: 5\n", "02_logit_lens"),
    ("parameters not a mapping", "parameters: [1]\n", "'parameters' must be a mapping"),
    ("timeout not a number", "timeout: abc\nparameters: {seed: 1}\n", "timeout"),
    ("unknown top-level key", "paramters: {}\n", "paramters"),
    ("timeout NaN", "timeout: .nan\nbase: smoke\n", "positive finite number"),
    ("timeout infinite", "timeout: .inf\nbase: smoke\n", "positive finite number"),
    ("empty", "", "sets nothing: a profile holds parameters"),
    ("only a description", "description: mine\n", "sets nothing: a profile holds parameters"),
    ("empty sections", "parameters: {}\nnotebooks:\n", "sets nothing"),
    ("an empty chapter name", "chapters: ['']\nbase: smoke\n", "non-empty text"),
    ("a chapter that is not text", "chapters: [3]\nbase: smoke\n", "non-empty text"),
]

SAMPLING = [
    ("low temperature alpha 0", lambda: DecodeSettings("low_temperature", max_new_tokens=8, target=Target(0)), "alpha"),
    ("low temperature alpha NaN", lambda: DecodeSettings("low_temperature", max_new_tokens=8,
                                                         target=Target(math.nan)), "alpha"),
    ("low temperature alpha True", lambda: DecodeSettings("low_temperature", max_new_tokens=8, target=Target(True)),
     "alpha"),
    ("low temperature without its target", lambda: DecodeSettings("low_temperature", max_new_tokens=8),
     "need target=Target"),
    ("a target on greedy", lambda: DecodeSettings("greedy", max_new_tokens=8, target=Target(2.0)), "only they take"),
    ("a target that is a number", lambda: DecodeSettings("power", max_new_tokens=8, target=2.0,
                                                          power=PowerConfig(block_size=4)), "must be a Target"),
    ("power alpha infinite", lambda: Target(math.inf, 8), "alpha"),
    ("a block longer than the answer", lambda: PowerConfig(block_size=16).validate(Target(2.0, 8)), "block_size"),
    ("block size 0", lambda: PowerConfig(block_size=0).validate(), "block_size"),
    ("negative MH steps", lambda: PowerConfig(mcmc_steps=-1).validate(), "mcmc_steps"),
    ("unknown mode", lambda: PowerConfig(mode="fast").validate(), "mode"),
    ("unknown method", lambda: DecodeSettings("beam", max_new_tokens=8), "method"),
    ("SMC without its settings", lambda: DecodeSettings("smc", max_new_tokens=8), "SMC needs smc="),
    ("SMC settings on greedy", lambda: DecodeSettings("greedy", max_new_tokens=8, smc=SMCConfig()), "only SMC"),
    ("SMC with no particles", lambda: SMCConfig(particles=0).validate(), "particles"),
    ("SMC lengths that disagree", lambda: DecodeSettings("smc", max_new_tokens=8, target=Target(2.0, 9),
                                                         smc=SMCConfig()), "differs"),
    ("zero tokens", lambda: DecodeSettings("greedy", max_new_tokens=0), "max_new_tokens"),
]


def _problem_file(tmp_path: Path, text: str, suffix: str = ".json") -> str:
    path = tmp_path / f"problems{suffix}"
    path.write_text(text)
    return str(path)


PROBLEMS = [
    ("n zero", lambda tmp: load_problems("arithmetic", n=0), "n (problems per level)"),
    ("n text", lambda tmp: load_problems("arithmetic", n="abc"), "'abc'"),
    ("levels an int", lambda tmp: load_problems("arithmetic", levels=7), "levels must be a list"),
    ("levels of strings", lambda tmp: load_problems("arithmetic", levels=["3"]), "levels must be a list"),
    ("level not in the benchmark", lambda tmp: load_problems("arithmetic", levels=[8]), "[8]"),
    ("empty levels", lambda tmp: load_problems("arithmetic", levels=[]), "empty list"),
    ("file of numbers", lambda tmp: load_problems(_problem_file(tmp, "[1, 2, 3]")), "Record 0"),
    ("empty list file", lambda tmp: load_problems(_problem_file(tmp, "[]")), "no problems"),
    ("empty JSONL file", lambda tmp: load_problems(_problem_file(tmp, "", ".jsonl")), "no problems"),
    ("a JSON string", lambda tmp: load_problems(_problem_file(tmp, '"hello"', ".jsonl")), "Record 0"),
    ("a pretty-printed object", lambda tmp: load_problems(_problem_file(tmp, '{\n"question": "q"\n}')),
     "neither a JSON list"),
    ("not JSON", lambda tmp: load_problems(_problem_file(tmp, "[{", ".json")), "neither a JSON list"),
    ("missing field", lambda tmp: load_problems(_problem_file(tmp, '[{"q": "x", "answer": "1"}]')), "'question'"),
    ("no problem at the level", lambda tmp: load_problems(
        _problem_file(tmp, '[{"question": "q", "answer": "1", "level": 2}]'), levels=[5]), "levels are [2]"),
    ("unknown set", lambda tmp: load_problems("mathqa"), "Unknown problem set"),
    ("null question", lambda tmp: load_problems(_problem_file(tmp, '[{"question": null, "answer": "1"}]')),
     "Record 1 of problems: its question"),
    ("list answer", lambda tmp: load_problems(_problem_file(tmp, '{"question": "q", "answer": [1]}\n', ".jsonl")),
     "its answer"),
    ("NaN answer", lambda tmp: load_problems(_problem_file(tmp, '[{"question": "q", "answer": NaN}]')), "finite"),
    ("infinite answer", lambda tmp: load_problems(_problem_file(tmp, '[{"question": "q", "answer": 1e400}]')),
     "finite"),
    ("boolean answer", lambda tmp: load_problems(_problem_file(tmp, '[{"question": "q", "answer": true}]')),
     "its answer"),
    ("empty question", lambda tmp: load_problems(_problem_file(tmp, '[{"question": " ", "answer": "1"}]')),
     "empty question"),
    ("duplicate ids", lambda tmp: load_problems(_problem_file(
        tmp, '[{"id": "a", "question": "q", "answer": "1"}, {"id": "a", "question": "r", "answer": "2"}]')),
     "share the id 'a'"),
    ("deeply nested", lambda tmp: load_problems(_problem_file(tmp, "[" * 100_000 + "]" * 100_000)), "nested too deeply"),
    ("UTF-16 file", lambda tmp: load_problems(_bytes_file(tmp, '[{"question": "q", "answer": "1"}]'.encode("utf-16"))),
     "not UTF-8 text"),
]


def _bytes_file(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "problems.json"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(("case", "call", "error", "fragment"), RUNNER, ids=[r[0] for r in RUNNER])
def test_runner_rejects(case, call, error, fragment):
    with pytest.raises(error) as info:
        call()
    assert fragment in str(info.value), f"{case}: {info.value}"


@pytest.mark.parametrize(("case", "text", "fragment"), PROFILE_FILES, ids=[r[0] for r in PROFILE_FILES])
def test_profile_files_are_validated_as_a_whole(case, text, fragment, tmp_path):
    with pytest.raises(RunError, match=None) as info:
        plan(_profile_file(tmp_path, text))
    assert fragment in str(info.value), f"{case}: {info.value}"


def test_a_long_chain_of_base_profiles_is_refused_without_a_traceback(tmp_path):
    for i in range(1200):
        (tmp_path / f"p{i}.yaml").write_text(f"base: {tmp_path / f'p{i + 1}.yaml'}\n" if i < 1199 else "base: smoke\n")
    with pytest.raises(RunError, match="chain of more than 8 base profiles"):
        plan(str(tmp_path / "p0.yaml"))


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    import time

    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    start = time.perf_counter()
    with pytest.raises(RunError, match="expands to more than"):
        plan(_profile_file(tmp_path, "parameters:\n  " + "\n  ".join(lines) + "\n"))
    assert time.perf_counter() - start < 5


def test_a_profile_given_as_a_path_runs(tmp_path):
    path = _profile_file(tmp_path, "parameters:\n  n_problems: 2\n")
    assert all(j.parameters.get("n_problems", 2) == 2 for j in plan(path))


@pytest.mark.parametrize(("case", "call", "fragment"), SAMPLING, ids=[r[0] for r in SAMPLING])
def test_sampling_settings_are_checked(case, call, fragment):
    with pytest.raises(ValueError) as info:
        call()
    assert fragment in str(info.value), f"{case}: {info.value}"


@pytest.mark.parametrize(("case", "call", "fragment"), PROBLEMS, ids=[r[0] for r in PROBLEMS])
def test_problem_sets_are_checked(case, call, fragment, tmp_path):
    with pytest.raises(DataError) as info:
        call(tmp_path)
    assert fragment in str(info.value), f"{case}: {info.value}"


def test_levels_written_as_text_are_read(tmp_path):
    rows = [{"question": "q1", "answer": "1", "level": "3"}, {"question": "q2", "answer": "2", "level": "Level 4"},
            {"question": "q3", "answer": "3", "level": 3.0}]
    path = _problem_file(tmp_path, json.dumps(rows))
    assert [p.question for p in load_problems(path, levels=[3])] == ["q1", "q3"]
    assert [p.level for p in load_problems(path)] == [3, 4, 3]


# --------------------------------------------------------------------------------------------------
# Local model folders: a broken save says which file is wrong
# --------------------------------------------------------------------------------------------------


def _copy_save(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize(("case", "edit", "fragment"), [
    ("config not JSON", lambda d: (d / "config.json").write_text("{"), "config.json is not valid JSON"),
    ("config without model type", lambda d: (d / "config.json").write_text("{}"), "no 'model_type'"),
    ("no weights", lambda d: (d / "model.safetensors").unlink(), "no weights"),
    ("no tokenizer", lambda d: [f.unlink() for f in d.glob("tokenizer*")], "no tokenizer files"),
    ("truncated weights", lambda d: (d / "model.safetensors").write_bytes(b"\0" * 16), "could not be loaded"),
], ids=["config not JSON", "no model type", "no weights", "no tokenizer", "truncated weights"])
def test_broken_local_saves_name_the_file(case, edit, fragment, tiny_dir, tmp_path):
    folder = _copy_save(tiny_dir, tmp_path / "save")
    edit(folder)
    with pytest.raises(ModelLoadError) as info:
        load_model(str(folder), device="cpu")
    assert fragment in str(info.value), f"{case}: {info.value}"


# --------------------------------------------------------------------------------------------------
# Grading never raises and never hangs
# --------------------------------------------------------------------------------------------------


def test_numbers_beyond_pythons_int_limit_are_compared_as_digits():
    huge = "9" * 5000
    assert grading.is_equivalent(huge, huge)
    assert grading.is_equivalent("0" + huge, huge) and grading.is_equivalent("-0", "0")
    assert not grading.is_equivalent(huge, huge[:-1] + "8")
    assert grading.grade(f"so the answer is \\boxed{{{huge}}}", huge)


def test_very_long_answers_are_compared_as_strings():
    text = "\\frac{" * 300 + "1" + "}" * 300
    start = time.perf_counter()
    assert not grading.is_equivalent(text, "1")
    assert time.perf_counter() - start < 1.0


@pytest.mark.once  # child interpreters: a few seconds, nothing version-specific
def test_math_verify_is_bounded_outside_the_main_thread(monkeypatch):
    """From a thread, math-verify runs in a child interpreter that its own (signal) timeout bounds and that is
    killed at the limit: a tower of powers returns False within seconds and leaves nothing running."""
    monkeypatch.setattr(grading, "TIMEOUT_SECONDS", 1)
    box: list = []

    def grade_all():
        box.append(grading.grade("\\boxed{9^{9^{9^{9}}}}", "1"))
        box.append(grading.is_equivalent("\\frac{1}{2}", "0.5"))

    worker = threading.Thread(target=grade_all)
    start = time.perf_counter()
    worker.start()
    worker.join(60)
    assert box == [False, True] and time.perf_counter() - start < 20
    import psutil

    assert not [p for p in psutil.Process().children(recursive=True) if "helpers.evaluation.grading" in " ".join(p.cmdline())]


def test_integers_written_with_an_exponent_are_integers():
    assert grading.grade("\\boxed{1e30}", "1" + "0" * 30) and grading.is_equivalent("2.5E3", "2500")
    assert not grading.is_equivalent("2.55e1", "25") and not grading.is_equivalent("1e3", "100")


# --------------------------------------------------------------------------------------------------
# The results store: torn lines repaired, concurrent writers kept apart
# --------------------------------------------------------------------------------------------------


def test_a_torn_last_line_is_cut_before_the_next_record(tmp_path):
    run = Run("exp", {"k": 1}, root=tmp_path)
    run.add("a", 1, 0.1)
    with run.path.open("a") as fh:
        fh.write('{"key": "b", "config_ha')
    again = Run("exp", {"k": 1}, root=tmp_path)
    again.add("b", 2, 0.1)
    lines = run.path.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a", "b"]  # every line is valid JSON


def test_a_whole_last_record_without_its_newline_is_kept_and_a_torn_one_set_aside(tmp_path):
    run = Run("exp", {"k": 1}, root=tmp_path)
    run.add("a", 1, 0.1)
    run.path.write_bytes(run.path.read_bytes().rstrip(b"\n"))  # complete, but its newline never reached the disk
    again = Run("exp", {"k": 1}, root=tmp_path)
    assert again.get("a") == 1  # finished work, not recomputed
    again.add("b", 2, 0.1)
    assert [json.loads(line)["key"] for line in run.path.read_text().splitlines()] == ["a", "b"]
    with run.path.open("a") as fh:
        fh.write('{"key": "c", "config_ha')
    Run("exp", {"k": 1}, root=tmp_path).add("d", 3, 0.1)
    assert [json.loads(line)["key"] for line in run.path.read_text().splitlines()] == ["a", "b", "d"]
    assert '{"key": "c", "config_ha' in run.aside_path.read_text()  # kept, not lost


def test_a_second_process_waits_and_reuses_the_first_ones_records(tmp_path, capsys):
    first, second = Run("exp", {"k": 2}, root=tmp_path), Run("exp", {"k": 2}, root=tmp_path)
    holding = threading.Event()

    def compute():
        with first.locked():
            holding.set()
            time.sleep(0.5)
            first.add("unit", 42, 0.5)

    worker = threading.Thread(target=compute)
    worker.start()
    holding.wait()
    with second.locked():
        assert "unit" in second and second.get("unit") == 42  # read, not recomputed
    worker.join()
    assert "another process is working on exp/" in capsys.readouterr().err



def test_an_analysis_unit_under_way_elsewhere_is_waited_for_not_recomputed(tmp_path, capsys):
    """`Run.compute` (chapter 01's analyses, the lens, agreement) holds the lock while it computes."""
    first, second = Run("exp", {"k": 3}, root=tmp_path), Run("exp", {"k": 3}, root=tmp_path)
    started, calls = threading.Event(), []

    def slow():
        started.set()
        time.sleep(0.5)
        calls.append("first")
        return 7

    worker = threading.Thread(target=lambda: first.compute("unit", slow))
    worker.start()
    started.wait()
    assert second.compute("unit", lambda: calls.append("second") or 8) == 7
    worker.join()
    assert calls == ["first"]  # computed once, by the process that started it
    assert len(second.path.read_text().splitlines()) == 1
    assert "another process is working on exp/" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# The real command line: exit code 2, a message naming the input, no traceback
# --------------------------------------------------------------------------------------------------

CLI = [
    ("run with a malformed -p", ["run", "--profile", "smoke", "-p", "levels=[1,2", "--no-build"], "-p levels"),
    ("run with a string count", ["run", "--profile", "smoke", "-p", "n_problems=abc", "--no-build"], "n_problems"),
    ("run with an unknown profile", ["run", "--profile", "fastest"], "Unknown profile 'fastest'"),
    ("bench with zero problems", ["bench", "sampling", "--problems", "0"], "--problems"),
    ("bench with bad levels", ["bench", "sampling", "--levels", "1,x"], "--levels"),
    ("bench with alpha 0", ["bench", "sampling", "--alpha", "0"], "alpha"),
    ("truncate with no prompt", ["truncate", "--depth", "3", "--prompt", " "], "--prompt"),
    ("run with an empty --only", ["run", "--profile", "smoke", "--only", "", "--no-build"], "--only needs"),
    ("run with --out under a file", ["run", "--profile", "smoke", "--out", "/etc/hostname/x", "--no-build"], "--out"),
    ("bench with no model", ["bench", "sampling", "--model", ","], "--model needs at least one"),
    ("bench throughput batch 0", ["bench", "throughput", "--batch-sizes", "0"], "--batch-sizes"),
    ("bench throughput negative batch", ["bench", "throughput", "--batch-sizes", "8,-1"], "--batch-sizes"),
    ("effective-depth absurd n", ["effective-depth", "--n", "100000000000"], "--n must be"),
    ("effective-depth NaN fraction", ["effective-depth", "--kl-fraction", "nan"], "--kl-fraction"),
    ("effective-depth fraction 2", ["effective-depth", "--kl-fraction", "2"], "--kl-fraction"),
    ("effective-depth negative fraction", ["effective-depth", "--kl-fraction", "-1"], "--kl-fraction"),
    ("effective-depth overlap 5", ["effective-depth", "--overlap-threshold", "5"], "--overlap-threshold"),
    ("effective-depth overlap NaN", ["effective-depth", "--overlap-threshold", "nan"], "--overlap-threshold"),
    ("truncate with absurd tokens", ["truncate", "--depth", "3", "--prompt", "hi", "--max-new-tokens", "100000000000"],
     "--max-new-tokens"),
    ("truncate with zero tokens", ["truncate", "--depth", "3", "--prompt", "hi", "--max-new-tokens", "0"],
     "--max-new-tokens must be at least 1"),
    ("notebook-code on no folder", ["notebook-code", "/nonexistent"], "not a folder of notebooks"),
    ("glued-diff NaN tolerance", ["glued-diff", "a", "b", "--rel", "nan"], "--rel"),
    ("run with an unknown dtype", ["run", "--profile", "smoke", "--dtype", "half", "--no-build"], "--dtype"),
    ("truncate with an unknown dtype", ["truncate", "--depth", "3", "--prompt", "hi", "--dtype", "fp16"], "--dtype"),
]


def _main(argv, capsys) -> tuple[int, str]:
    """`python -m helpers ARGV` in this process (the imports are paid once): (exit status, stderr)."""
    from helpers.cli import main

    try:
        status = main(list(argv))
    except SystemExit as stop:  # argparse's own usage errors
        status = stop.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize(("case", "argv", "fragment"), CLI, ids=[r[0] for r in CLI])
def test_command_line_errors_are_one_clear_line(case, argv, fragment, capsys):
    status, err = _main(argv, capsys)
    assert status == 2, f"{case}: exit {status}\n{err[-2000:]}"
    assert fragment in err and "Traceback" not in err, f"{case}: {err[-2000:]}"


def test_the_module_entry_point_exits_with_the_error_status():
    """The cases above call `helpers.cli.main`; this one runs `python -m helpers` as a user does."""
    case, argv, fragment = CLI[-1]
    done = _cli(*argv)
    assert done.returncode == 2, f"{case}: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert fragment in done.stderr and "Traceback" not in done.stderr, f"{case}: {done.stderr[-2000:]}"


def test_a_cache_folder_that_is_a_file_is_one_clear_line_on_the_command_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = [sys.executable, "-m", "helpers", "effective-depth", "--model", "smollm2-135m", "--n", "1"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SVD_CACHE": str(blocker), "SVD_RESULTS": str(tmp_path / "results")})
    assert done.returncode == 2 and "is a file, not a folder" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "results").exists()  # nothing stored


def test_truncate_reports_the_blocks_it_keeps():
    from helpers.cli import block_ranges

    assert block_ranges(list(range(28))) == "0..27"  # naive truncation to 28 keeps blocks 0..27
    assert block_ranges([*range(27), 29]) == "0..26, 29"  # stitch-and-preserve re-attaches the last block
    assert block_ranges([0, 29]) == "0, 29"


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "helpers", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_truncate_on_the_command_line(tiny_dir, capsys):
    done = _cli("truncate", "--model", str(tiny_dir), "--method", "naive", "--depth", "3", "--prompt", "Ada has",
                "--raw", "--max-new-tokens", "2")
    assert done.returncode == 0 and "(blocks 0..2)" in done.stdout, done.stderr[-2000:]
    status, err = _main(["truncate", "--model", str(tiny_dir), "--depth", "9", "--prompt", "Ada has"], capsys)
    assert status == 2 and "Traceback" not in err and "9" in err, err[-2000:]


@pytest.mark.parametrize(("case", "content", "fragment"), [
    ("empty folder", None, "holds no executed chapter"),
    ("a JSON list of numbers", "[1, 2]", "list of objects with chapter"),
    ("an object", '{"chapter": "x"}', "list of objects"),
    ("a chapter that is a list", '[{"chapter": [1], "name": "a", "value": 1}]', "list of objects with chapter"),
    ("a value that is a mapping", '[{"chapter": "c", "name": "a", "value": {}}]', "a number, text or null"),
    ("an integer of 5,000 digits", '[{"chapter": "c", "name": "a", "value": ' + "9" * 5000 + "}]",
     "a number too long"),
    ("broken JSON", "[{", "glued.json is not a glued_values.json file"),
    ("nested 100,000 levels deep", "[" * 100_000 + "]" * 100_000, "nested too deeply to be read as JSON"),
], ids=lambda v: v if isinstance(v, str) and " " in v else None)
def test_glued_diff_refuses_what_is_not_a_build(case, content, fragment, tmp_path, capsys):
    if content is None:
        target = tmp_path / "empty"
        target.mkdir()
    else:
        target = tmp_path / "glued.json"
        target.write_text(content)
    status, err = _main(["glued-diff", str(target), str(target)], capsys)
    assert status == 2 and fragment in err and "Traceback" not in err, f"{case}: {err}"


def test_glued_diff_compares_integers_past_floats_range_exactly(tmp_path, capsys):
    """A 400-digit integer is valid JSON and a valid glued value; it is the same only where it is equal."""
    big = 10**400
    for name, value in (("before", big), ("same", big), ("after", big + 1), ("float", 1.5)):
        (tmp_path / f"{name}.json").write_text(f'[{{"chapter": "c", "name": "a", "value": {value}}}]')
    status, err = _main(["glued-diff", str(tmp_path / "before.json"), str(tmp_path / "same.json")], capsys)
    assert status == 0 and "Traceback" not in err, err
    for other in ("after", "float"):
        status, err = _main(["glued-diff", str(tmp_path / "before.json"), str(tmp_path / f"{other}.json")], capsys)
        assert "Traceback" not in err and "OverflowError" not in err, err
    from helpers.runner.glued import diff

    rows = [{"chapter": "c", "name": "a", "value": big}]
    assert diff(rows, rows)["changed"] == []
    assert len(diff(rows, [{"chapter": "c", "name": "a", "value": big + 1}])["changed"]) == 1
    assert len(diff(rows, [{"chapter": "c", "name": "a", "value": 1.5}])["changed"]) == 1


@pytest.mark.parametrize("notebook", ['{"cells": 5}', '{"cells": [{"outputs": 3}]}', "[1]"])
def test_glued_diff_on_a_folder_whose_notebook_is_malformed_says_which(notebook, tmp_path, capsys):
    (tmp_path / "01_effective_depth.ipynb").write_text(notebook)
    status, err = _main(["glued-diff", str(tmp_path), str(tmp_path)], capsys)
    assert status == 2 and "01_effective_depth.ipynb is not a notebook" in err and "Traceback" not in err, err


def test_a_results_store_that_is_a_file_stops_the_run_before_any_chapter(tmp_path, monkeypatch):
    from helpers.runner.run import run

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SVD_RESULTS", str(blocker))
    with pytest.raises(RunError, match="SVD_RESULTS"):
        run("smoke", out_root=tmp_path / "out", build=False)
    assert not (tmp_path / "out" / "book" / "chapters" / "01_effective_depth.ipynb").exists()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_the_vllm_engine_without_vllm_stops_the_run_before_any_chapter(tmp_path, monkeypatch):
    from helpers.runner.run import run

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path / "results"))
    with pytest.raises(RunError, match=r"engine' = 'vllm': the vllm engine needs vLLM.*make vllm-env"):
        run("smoke", parse_overrides(["engine=vllm"]), only="04_power_sampling", out_root=tmp_path / "out")
    assert not (tmp_path / "out" / "book" / "chapters" / "04_power_sampling.ipynb").exists()


def test_a_bad_repository_address_stops_the_run_before_any_chapter(tmp_path, monkeypatch):
    from helpers.runner.run import run

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("SVD_REPOSITORY_URL", "github.com/org")
    with pytest.raises(RunError, match=r"SVD_REPOSITORY_URL='github\.com/org' is not a repository address"):
        run("smoke", out_root=tmp_path / "out")
    assert not (tmp_path / "out" / "book" / "chapters" / "01_effective_depth.ipynb").exists()


@pytest.mark.parametrize(("case", "line"), [("a JSON list", b"[1, 2, 3]\n"), ("no result", b'{"key": "k"}\n'),
                                            ("not UTF-8", b"\xff\xfe{}\n"), ("a key that is not text", b'{"key": 1, "result": 2}\n')])
def test_store_lines_of_the_wrong_shape_are_skipped_once_with_the_path(case, line, tmp_path, capsys):
    run = Run("exp", {"a": 1}, root=tmp_path)
    run.add("good", {"x": 1}, 0.0)
    with run.path.open("ab") as fh:
        fh.write(line)
    again = Run("exp", {"a": 1}, root=tmp_path)
    assert again.get("good") == {"x": 1} and len(again) == 1, case
    err = capsys.readouterr().err
    assert f"skipped 1 unreadable line of {run.path}" in err, case
    assert again.aside_path.read_bytes() == line and line not in run.path.read_bytes()  # set aside as it was read
    Run("exp", {"a": 1}, root=tmp_path)
    assert "skipped" not in capsys.readouterr().err  # so said once
    again.add("more", {"x": 2}, 0.0)  # the damaged line blocks nothing
    assert Run("exp", {"a": 1}, root=tmp_path).get("more") == {"x": 2}


@pytest.mark.parametrize(("case", "result"), [("a result of the wrong shape", {"kl": [0.1]}), ("a null result", None),
                                              ("a list where a number goes", {"kl": [1], "nll": 1.0, "nll_full": 1.0})])
def test_a_record_of_the_wrong_shape_is_set_aside_and_recomputed(case, result, tmp_path, capsys):
    shape = {"kl": float, "nll": float, "nll_full": float}
    run = Run("exp", {"a": 1}, root=tmp_path, shape=shape)
    run.add("good", {"kl": 0.5, "nll": 1.0, "nll_full": 2}, 0.0)
    record = json.loads(run.path.read_text().splitlines()[0])
    bad = json.dumps({**record, "key": "unit", "result": result}) + "\n"  # the right key and hash
    with run.path.open("a") as fh:
        fh.write(bad)
    again = Run("exp", {"a": 1}, root=tmp_path, shape=shape)
    assert "unit" not in again and again.get("good")["kl"] == 0.5, case
    err = capsys.readouterr().err
    assert f"skipped 1 record whose result has the wrong shape or length for exp of {run.path}" in err, case
    Run("exp", {"a": 1}, root=tmp_path, shape=shape)
    assert "skipped" not in capsys.readouterr().err  # set aside as it was read, so said once
    assert again.compute("unit", lambda: {"kl": 0.25, "nll": 1.5, "nll_full": 1.5}) == {"kl": 0.25, "nll": 1.5,
                                                                                          "nll_full": 1.5}
    assert again.aside_path.read_text() == bad  # set aside, never deleted
    assert bad not in run.path.read_text() and len(run.path.read_text().splitlines()) == 2
    fresh = Run("exp", {"a": 1}, root=tmp_path, shape=shape)
    assert fresh.get("unit")["kl"] == 0.25 and "skipped" not in capsys.readouterr().err


def test_lines_another_process_holds_the_lock_over_are_skipped_by_each_reader_and_set_aside_by_the_holder(
        tmp_path, capsys):
    """A reader never waits for a computing process to set bad lines aside: it skips them and says so; the lock's
    holder sets them aside before it writes."""
    from filelock import FileLock

    run = Run("exp", {"a": 1}, root=tmp_path)
    run.add("good", {"x": 1}, 0.0)
    with run.path.open("ab") as fh:
        fh.write(b"[1, 2]\n")
    with FileLock(run.path.with_suffix(".lock")):  # another process's, as far as the readers can tell
        for _ in range(2):
            assert Run("exp", {"a": 1}, root=tmp_path).get("good") == {"x": 1}
            assert "skipped 1 unreadable line" in capsys.readouterr().err
        assert not run.aside_path.exists()
    run.add("more", {"x": 2}, 0.0)
    assert run.aside_path.read_bytes() == b"[1, 2]\n" and len(Run("exp", {"a": 1}, root=tmp_path)) == 2


def test_a_stored_analysis_of_the_wrong_shape_is_recomputed_not_read(tiny, tmp_path, capsys):
    """The reproduction: a depth-profile record with the right key and hash whose result lacks the metrics
    (then a KeyError: 'rc_attn' deep in helpers.interp.depth)."""
    from helpers.interp.depth import PROFILE_SHAPE, profiles

    model = tiny
    problems = load_problems("arithmetic", n=1, levels=[1], seed=0)
    first = profiles(model, problems, root=tmp_path, progress=False)
    (path,) = (tmp_path / "depth_profile").glob("*.jsonl")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "result": {"kl": first[0]["kl"]}}) + "\n")
    again = profiles(model, problems, root=tmp_path, progress=False)
    assert again == first and set(PROFILE_SHAPE) <= set(again[0])
    assert "wrong shape or length for depth_profile" in capsys.readouterr().err
    assert len(path.with_name(path.name + ".set-aside").read_text().splitlines()) == 1


@pytest.mark.parametrize("case", ["per-layer lists cut to 3 entries", "empty per-layer lists"])
def test_a_stored_analysis_of_the_wrong_length_is_recomputed_not_read(case, tiny, tmp_path, capsys):
    """The reproduction: depth profiles of a 4-layer model whose per-layer lists were cut gave `"n_layers": 3` and
    exit 0; empty lists made every later run fail deep in numpy. The lists must be as long as the model is deep."""
    from helpers.interp.depth import curves, effective_depths, profiles

    model = tiny
    problems = load_problems("arithmetic", n=2, levels=[1], seed=0)
    first = profiles(model, problems, root=tmp_path, progress=False)
    depth = model.config.num_hidden_layers
    assert all(len(r["kl"]["sum"]) == depth for r in first)
    (path,) = (tmp_path / "depth_profile").glob("*.jsonl")
    n = 3 if case.startswith("per-layer") else 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    cut = {name: {**v, "sum": v["sum"][:n], "max": v["max"][:n]} for name, v in lines[0]["result"].items()}
    path.write_text("".join(json.dumps(r) + "\n" for r in [{**lines[0], "result": cut}, lines[1]]))
    again = profiles(model, problems, root=tmp_path, progress=False)
    assert again == first, case
    assert effective_depths(curves(again))["n_layers"] == depth
    assert "1 record whose result has the wrong shape or length for depth_profile" in capsys.readouterr().err
    assert len(path.with_name(path.name + ".set-aside").read_text().splitlines()) == 1


def test_sized_shapes_read_their_lengths_from_the_configuration():
    from helpers.results.shapes import Sized, conforms, shape_sizes

    sizes = shape_sizes({"depth": 4, "steps": [1, 2], "flag": True, "name": "x"})
    assert sizes == {"depth": 4, "steps": 2}  # a bool is not a count
    shape = {"kl": Sized(float, "depth"), "tv": Sized(float, "steps"), "m": [Sized(Sized(float, 2), "steps")]}
    good = {"kl": [0.0, 1, 2.5, 3.0], "tv": [0.1, 0.2], "m": [[[1, 2], [3, 4]]] * 3}
    assert conforms(good, shape, sizes)
    assert not conforms({**good, "kl": [0.0, 1, 2.5]}, shape, sizes)
    assert not conforms({**good, "m": [[[1, 2], [3]]]}, shape, sizes)
    assert not conforms({**good, "tv": []}, shape, sizes)
    with pytest.raises(ValueError, match="'layers'"):
        conforms([1.0], Sized(float, "layers"), sizes)


def test_an_smc_record_with_too_few_particles_does_not_conform():
    from helpers.evaluation.decodes import SMC_SHAPE
    from helpers.results.shapes import conforms

    particle = {"predicted": "1", "correct": True, "log_weight": -1.0, "n_tokens": 3}
    record = {"id": "p", "text": "1", "tokens": [1, 2, 3], "predicted": "1", "correct": True, "n_tokens": 3,
              "sum_logp": -1.0, "stopped": True, "decoded_tokens": 6, "prefill_tokens": 2, "acceptance": None,
              "chosen": 0, "resamples": 0.0, "particles": [particle, particle]}
    assert conforms(record, SMC_SHAPE, {"particles": 2})
    assert not conforms(record, SMC_SHAPE, {"particles": 4})


def test_a_cache_folder_that_is_a_file_is_refused_before_any_conversion(tmp_path, monkeypatch):
    from helpers.runner.run import run

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SVD_CACHE", str(blocker))
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match=r"SVD_CACHE=.*file is a file, not a folder.*Point SVD_CACHE at a folder"):
        load_model("smollm2-135m", device="cpu", dtype="float32")
    assert time.perf_counter() - start < 5  # refused before the GGUF conversion (about 25 s)
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path / "results"))
    with pytest.raises(RunError, match="SVD_CACHE"):
        run("smoke", out_root=tmp_path / "out", build=False)
    assert not (tmp_path / "out" / "book" / "chapters" / "01_effective_depth.ipynb").exists()
    assert blocker.read_text() == ""


def test_a_profile_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_bytes(b"description: \xff\xfe\n")
    with pytest.raises(RunError, match="not UTF-8"):
        load_profile(str(path))


def test_a_store_file_that_cannot_be_written_is_named(tmp_path):
    import shutil as sh

    run = Run("exp", {"a": 1}, root=tmp_path)
    run.add("done", 1, 0.0)
    if not sh.which("chattr") or subprocess.run(["chattr", "+i", str(run.path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here (it needs root and a file system that supports it)")
    try:
        from helpers.results.store import StoreError

        again = Run("exp", {"a": 1}, root=tmp_path)
        assert again.get("done") == 1  # reading still works
        with pytest.raises(StoreError, match=f"{run.path} cannot be repaired"):
            again.add("next", 2, 0.0)
    finally:
        subprocess.run(["chattr", "-i", str(run.path)], capture_output=True)


def test_an_out_folder_that_cannot_be_made_stops_the_run_before_any_chapter(tmp_path, capsys):
    status, err = _main(["run", "--profile", "smoke", "--out", "/proc/no-such-folder", "--no-build"], capsys)
    assert status == 2 and "--out: cannot write into /proc/no-such-folder" in err and "Traceback" not in err


def test_a_cache_folder_under_a_file_is_refused_before_any_conversion(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SVD_CACHE", str(blocker / "cache"))
    with pytest.raises(ModelLoadError, match=r"cannot be made: .*file is a file, not a folder"):
        load_model("smollm2-135m", device="cpu", dtype="float32")


def test_a_store_file_that_is_a_folder_is_one_clear_error(tmp_path):
    from helpers.results.store import StoreError

    run = Run("exp", {"k": 9}, root=tmp_path)
    run.path.mkdir(parents=True)
    with pytest.raises(StoreError, match=r"cannot be written.*SVD_RESULTS"):
        run.add("a", 1, 0.1)


@pytest.mark.parametrize("old", ['{"chapters": {"01_effective_depth": {"seconds": 3}}}', '{"chapters": [1]}', "[1",
                                 '{"chapters": {"x": {"parameters": {}, "seconds": true}}}'])
def test_a_run_configuration_from_an_older_runner_is_replaced_not_a_keyerror(old, tmp_path):
    from helpers.runner.profiles import Job
    from helpers.runner.run_config import previous_chapters, write_run_config

    folder = tmp_path / "book" / "chapters"
    folder.mkdir(parents=True)
    (folder / "run_config.json").write_text(old)
    assert previous_chapters(folder / "run_config.json") == {}
    write_run_config(tmp_path, "smoke", [Job("02_logit_lens", {"n_problems": 1}, seconds=1.0)])
    written = json.loads((folder / "run_config.json").read_text())
    assert list(written["chapters"]) == ["02_logit_lens"]


def test_an_integer_of_5000_digits_is_one_clear_line_wherever_it_is_given(tmp_path, capsys):
    from helpers.data.problems import DataError
    from helpers.data.sources import load_local

    status, err = _main(["run", "--profile", "smoke", "-p", "seed=" + "9" * 5000], capsys)
    assert status == 2 and "too long" in err and "int_max_str_digits" not in err and "Traceback" not in err
    with pytest.raises(RunError, match="too long"):
        plan(_profile_file(tmp_path, "parameters:\n  seed: " + "9" * 5000 + "\n"))
    data = tmp_path / "problems.jsonl"
    data.write_text('{"question": "q", "answer": ' + "9" * 5000 + "}\n")
    with pytest.raises(DataError, match="too long"):
        load_local(data)



@pytest.mark.parametrize(("override", "message"), [
    ({"floor_fraction": 0.6, "collapse_fraction": 0.5}, "floor_fraction 0.6 is above collapse_fraction 0.5"),
    ({"length_cap": 32, "max_new_tokens": 48}, "length_cap 32 is below max_new_tokens 48"),
])
def test_chapter_03s_settings_that_contradict_each_other_are_refused_before_work(override, message):
    from helpers.runner.planning import plan
    from helpers.runner.profiles import RunError

    with pytest.raises(RunError, match=message):
        plan("smoke", override, only="03_stitch_and_preserve")


def test_a_longer_cap_that_is_not_longer_is_refused_before_work():
    from helpers.runner.planning import plan
    from helpers.runner.profiles import RunError

    with pytest.raises(RunError, match="longer_cap 48 is not above max_new_tokens 48"):
        plan("smoke", {"longer_cap": 48, "max_new_tokens": 48}, only="04_power_sampling")
    assert plan("smoke", {"longer_cap": 96}, only="04_power_sampling")  # longer: accepted


def test_a_profiles_base_file_is_found_beside_the_profile_not_in_the_working_folder(tmp_path, monkeypatch):
    from helpers.runner.profiles import RunError, load_profile

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "parent.yaml").write_text("base: smoke\nparameters: {n_problems: 2}\n", encoding="utf-8")
    (folder / "child.yaml").write_text("base: parent.yaml\nparameters: {seed: 3}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the profiles' folder
    child = load_profile(str(folder / "child.yaml"))
    assert child["parameters"]["n_problems"] == 2 and child["parameters"]["seed"] == 3
    (folder / "orphan.yaml").write_text("base: missing.yaml\n", encoding="utf-8")
    with pytest.raises(RunError, match=r"starts from base 'missing.yaml', which is not a file beside it"):
        load_profile(str(folder / "orphan.yaml"))


def test_a_missing_release_is_said_first_for_a_profile_read_from_it(tmp_path, monkeypatch):
    from helpers.core import env
    from helpers.runner import run as runner
    from helpers.runner.profiles import RunError

    monkeypatch.setenv(env.RELEASE, str(tmp_path / "nowhere"))
    with pytest.raises(RunError, match=r"read from the results release, but there is none at .*nowhere"):
        runner.run("full", only="05_cost", build=False)


def test_a_robustness_setting_is_a_profile_checked_before_anything_runs_and_read_as_that_profile_runs(tmp_path):
    """Chapter 04 reads its comparison at another setting beside its own, named by a profile: `other_setting` gives
    that profile's parameters of the chapter (the notebook's defaults, its critical depths' sweep, no robustness of
    its own, whether it is released); the plan refuses, before anything runs, a name that is not text, the profile
    itself, one on other problems, one at this very setting and one without the chapter. Two profiles naming each
    other plan (each reads the other without its robustness); a relative path in a profile is found beside it."""
    from helpers.runner.planning import other_setting

    (tmp_path / "shorter.yaml").write_text("base: smoke\nnotebooks:\n  04_power_sampling:\n    max_new_tokens: 32\n"
                                           "    robustness: longer.yaml\n")
    (tmp_path / "longer.yaml").write_text("base: smoke\nnotebooks:\n  04_power_sampling:\n    robustness: shorter.yaml\n")
    shorter, longer = str(tmp_path / "shorter.yaml"), str(tmp_path / "longer.yaml")
    theirs = other_setting(shorter, "04_power_sampling")
    assert theirs["max_new_tokens"] == 32 and theirs["alpha"] == 4.0 and theirs["robustness"] is None
    assert theirs["released"] is False and other_setting("full", "04_power_sampling")["released"] is True
    assert other_setting(None, "04_power_sampling") is None
    assert plan("smoke", {"robustness": shorter}, only="04_power_sampling")[0].parameters["robustness"] == shorter
    assert plan(longer, only="04_power_sampling")[0].parameters["robustness"] == shorter  # beside it, each way
    assert plan(shorter, only="04_power_sampling")[0].parameters["robustness"] == longer
    assert plan("smoke", only="04_power_sampling")[0].parameters.get("robustness") is None
    (tmp_path / "seeded.yaml").write_text("base: smoke\nnotebooks:\n  04_power_sampling:\n    seed: 3\n")
    (tmp_path / "same.yaml").write_text("base: smoke\nnotebooks:\n  04_power_sampling:\n    toy_samples: 9\n")
    (tmp_path / "short.yaml").write_text("base: smoke\nchapters: [01_effective_depth]\n")
    (tmp_path / "two.yaml").write_text("base: smoke\nnotebooks:\n  04_power_sampling:\n    max_new_tokens: 32\n"
                                       "    models: [qwen2.5-coder-0.5b, smollm2-135m]\n")
    assert plan("smoke", {"robustness": str(tmp_path / "two.yaml")}, only="04_power_sampling")  # its models among theirs
    for value, fragment in [({"max_new_tokens": 32}, "robustness names a profile"), (5, "robustness names a profile"),
                            ("smoke", "names itself as 04_power_sampling's robustness setting"),
                            (str(tmp_path / "seeded.yaml"), "differs in seed; it must run the chapter's models on the same"),
                            (str(tmp_path / "same.yaml"), "runs this very setting"),
                            (str(tmp_path / "short.yaml"), "does not run 04_power_sampling")]:
        with pytest.raises(RunError, match=fragment):
            plan("smoke", {"robustness": value}, only="04_power_sampling")
    with pytest.raises(RunError, match=r"differs in models \(qwen2.5-coder-0.5b not among its models\)"):
        plan("smoke", {"robustness": shorter, "models": ["qwen2.5-coder-0.5b"]}, only="04_power_sampling")
