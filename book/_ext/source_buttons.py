"""Repository, issue, edit and launch buttons that lead to files the repository tracks.

The runner (helpers.runner.run.build_book) finds the repository once (helpers.runner.source_links) and passes it in the
environment; without one the book has no such buttons. The theme builds every button from the page's own path,
and a chapter page's path (book/chapters/*.ipynb, generated and ignored by git) is not its source's: the
addresses are rewritten to notebooks/*.ipynb after the theme has made them.
"""

from __future__ import annotations

import os

from helpers.core import env
from helpers.runner.source_links import BINDERHUB, COLAB, Repository, retarget


def _switch_on(app, config) -> None:
    if os.environ.get(env.BASE_URL):  # where the book is published (canonical links, the sitemap's addresses)
        config.html_baseurl = os.environ[env.BASE_URL].rstrip("/") + "/"
    url = os.environ.get(env.REPOSITORY_URL, "")
    if not url:
        return
    repo = Repository(url=url, branch=os.environ.get(env.REPOSITORY_BRANCH, "main"))
    options = dict(config.html_theme_options or {})
    options.update(repository_url=repo.url, repository_branch=repo.branch, path_to_docs="",
                   use_repository_button=True, use_issues_button=True, use_edit_page_button=True)
    if repo.launchable:
        options["launch_buttons"] = {**options.get("launch_buttons", {}), "binderhub_url": BINDERHUB,
                                     "notebook_interface": "jupyterlab"}
        if repo.on_github:  # one click to a running copy of the chapter's notebook, on Google's machines
            options["launch_buttons"]["colab_url"] = COLAB
    config.html_theme_options = options


def _retarget_buttons(app, pagename, templatename, context, doctree) -> None:
    def walk(buttons):
        for button in buttons or []:
            if isinstance(button.get("url"), str):
                button["url"] = retarget(button["url"])
            walk(button.get("buttons"))

    walk(context.get("header_buttons"))


def setup(app):
    app.connect("config-inited", _switch_on)
    app.connect("html-page-context", _retarget_buttons, priority=900)  # after the theme's buttons (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
