"""Which repository the book links to, and the tracked file behind each generated page."""

from __future__ import annotations

import subprocess

import pytest

from helpers.runner.source_links import (
    Repository,
    SourceLinkError,
    normalise,
    repository,
    retarget,
    source_path,
)


def test_an_explicit_address_wins_and_is_normalised(tmp_path):
    repo = repository({"SVD_REPOSITORY_URL": "git@github.com:org/name.git", "SVD_REPOSITORY_BRANCH": "pages",
                       "GITHUB_REPOSITORY": "other/repo"}, root=tmp_path)
    assert repo == Repository("https://github.com/org/name", "pages") and repo.launchable


def test_github_actions_names_its_own_repository_and_branch(tmp_path):
    env = {"GITHUB_REPOSITORY": "org/name", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REF_NAME": "main",
           "GITHUB_REF_TYPE": "branch"}
    assert repository(env, root=tmp_path) == Repository("https://github.com/org/name", "main")
    tag = {**env, "GITHUB_REF_NAME": "v1.0", "GITHUB_REF_TYPE": "tag"}
    assert repository(tag, root=tmp_path).branch == "main"  # a tag build still links to the default branch


def test_a_checkout_with_a_github_origin_links_to_it_and_one_without_has_no_buttons(tmp_path):
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(tmp_path)], check=True)
    assert repository({}, root=tmp_path) is None  # no remote: no buttons
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", "/some/local/path"], check=True)
    assert repository({}, root=tmp_path) is None  # a local clone: nothing a reader could open
    subprocess.run(["git", "-C", str(tmp_path), "remote", "set-url", "origin", "https://github.com/org/name.git"],
                   check=True)
    assert repository({}, root=tmp_path) == Repository("https://github.com/org/name", "trunk")


@pytest.mark.parametrize(("env", "words"), [
    ({"SVD_REPOSITORY_URL": "not a url"}, "SVD_REPOSITORY_URL='not a url' is not a repository address"),
    ({"SVD_REPOSITORY_URL": "https://github.com/org"}, "is not a repository address"),
    ({"SVD_REPOSITORY_URL": "https://github.com/org/name", "SVD_REPOSITORY_BRANCH": "a b"}, "not a branch name"),
    ({"SVD_REPOSITORY_URL": "https://github.com/org/name", "SVD_REPOSITORY_BRANCH": "../x"}, "not a branch name"),
])
def test_a_bad_address_or_branch_is_refused_with_the_variable_named(env, words, tmp_path):
    with pytest.raises(SourceLinkError, match="SVD_REPOSITORY") as err:
        repository(env, root=tmp_path)
    assert words in str(err.value)


def test_a_self_hosted_forge_gets_repository_links_but_no_binder():
    assert not Repository("https://git.example.org/org/name", "main").launchable
    assert normalise("https://git.example.org/org/name/") == "https://git.example.org/org/name"


def test_generated_chapter_paths_map_to_their_notebooks():
    assert source_path("book/chapters/04_power_sampling.ipynb") == "notebooks/04_power_sampling.ipynb"
    assert source_path("book/intro.md") == "book/intro.md"
    edit = "https://github.com/o/r/edit/main/book/chapters/04_power_sampling.ipynb"
    assert retarget(edit) == "https://github.com/o/r/edit/main/notebooks/04_power_sampling.ipynb"
    binder = "https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/book/chapters/05_cost.ipynb"
    assert retarget(binder).endswith("urlpath=lab/tree/notebooks/05_cost.ipynb")
    issue = "https://github.com/o/r/issues/new?title=Issue%20on%20page%20%2Fbook/chapters/05_cost.html"
    assert retarget(issue) == issue  # names the page the reader saw


def test_the_pages_own_downloads_are_not_retargeted():
    """The header's .ipynb download is a file of the built book (`_sources/`): rewritten to notebooks/ it was a 404."""
    download = "../../_sources/book/chapters/04_power_sampling.ipynb"
    assert retarget(download) == download
