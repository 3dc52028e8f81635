"""Where the book's pages come from: the repository its buttons link to, and the tracked file behind each page.

The chapter pages are built from `book/chapters/*.ipynb`, executed copies that git ignores; their source is
`notebooks/*.ipynb`. A repository, edit or launch button must name that source, or it would lead to a 404.
The repository is found once, here, for the runner (which hands it to the book's Sphinx extension):

1. `SVD_REPOSITORY_URL` (and `SVD_REPOSITORY_BRANCH`), set by whoever publishes the book;
2. on GitHub Actions, the repository and branch the workflow runs for;
3. the checkout's `origin` remote, when it is a GitHub or GitLab address.

With none of these the book has no repository buttons: a wrong address is worse than none.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers.core.env import REPO, REPOSITORY_BRANCH, REPOSITORY_URL

# Generated page folders and the tracked folder each one is built from (the runner writes the former from the latter).
SOURCE_OF = {"book/chapters/": "notebooks/"}
BINDERHUB = "https://mybinder.org"
COLAB = "https://colab.research.google.com"
_HOSTED = re.compile(r"^https://(github\.com|gitlab\.com)/[\w.-]+/[\w.-]+$")
_ANY = re.compile(r"^https?://[\w.-]+(:\d+)?(/[\w.~-]+){2,}$")


class SourceLinkError(ValueError):
    """A repository address or branch that no button could use; the message says which variable to fix."""


@dataclass(frozen=True)
class Repository:
    """A repository on a forge, as the book's buttons name it."""

    url: str  # https://github.com/org/name, no trailing slash or .git
    branch: str

    @property
    def on_github(self) -> bool:
        """Colab opens notebooks from GitHub addresses only."""
        return self.url.startswith("https://github.com/")

    @property
    def launchable(self) -> bool:
        """Binder builds straight from GitHub and GitLab addresses only."""
        return bool(_HOSTED.match(self.url))


def normalise(url: str) -> str:
    """An https address without `.git` or a trailing slash; SSH remotes (git@host:org/name) become https."""
    url = url.strip()
    ssh = re.match(r"^(?:ssh://)?git@([\w.-]+)[:/](.+)$", url)
    if ssh:
        url = f"https://{ssh.group(1)}/{ssh.group(2)}"
    url = url.rstrip("/")
    return url[:-4] if url.endswith(".git") else url


def _git(*args: str, root: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def repository(env: Mapping[str, str] | None = None, root: Path = REPO) -> Repository | None:
    """The repository the book links to, or None when nothing names one (see the module's docstring)."""
    env = os.environ if env is None else env
    explicit = env.get(REPOSITORY_URL, "").strip()
    if explicit:
        url = normalise(explicit)
        if not _ANY.match(url):
            raise SourceLinkError(f"{REPOSITORY_URL}={explicit!r} is not a repository address; give one like "
                                  "https://github.com/ORG/NAME, or unset it to build the book without repository "
                                  "buttons.")
        branch = env.get(REPOSITORY_BRANCH, "").strip() or _git("symbolic-ref", "--short", "-q", "HEAD", root=root)
    elif env.get("GITHUB_REPOSITORY"):
        url = f"{env.get('GITHUB_SERVER_URL', 'https://github.com').rstrip('/')}/{env['GITHUB_REPOSITORY']}"
        branch = env.get(REPOSITORY_BRANCH, "").strip() or (
            env.get("GITHUB_REF_NAME", "") if env.get("GITHUB_REF_TYPE", "branch") == "branch" else "")
    else:
        url = normalise(_git("remote", "get-url", "origin", root=root))
        if not _HOSTED.match(url):
            return None
        branch = env.get(REPOSITORY_BRANCH, "").strip() or _git("symbolic-ref", "--short", "-q", "HEAD", root=root)
    branch = branch if branch and branch != "HEAD" else "main"
    if not re.fullmatch(r"[\w./-]+", branch) or ".." in branch:
        raise SourceLinkError(f"{REPOSITORY_BRANCH}={branch!r} is not a branch name the buttons could link to.")
    return Repository(url=url, branch=branch)


def source_path(generated: str) -> str:
    """The tracked file a page was built from: `book/chapters/04_power_sampling.ipynb` → `notebooks/...`."""
    for built, source in SOURCE_OF.items():
        if generated.startswith(built):
            return source + generated[len(built):]
    return generated


def retarget(url: str) -> str:
    """A button's address with every generated path in it replaced by its source's (edit, blob and launch links).
    The page's own downloads (`_sources/...`, files of the built book) are left alone: they exist where they point."""
    if "_sources/" in url:
        return url
    for built, source in SOURCE_OF.items():
        url = re.sub(rf"(?<=[/=]){re.escape(built)}", source, url)
    return url
