"""The book's print stylesheet (`static/print.css`): what the PDF and a browser's print show, and the
`print-only` / `screen-only` classes the pages use for what differs between paper and screen."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).with_name("static")


def _add_static(app, config) -> None:
    config.html_static_path = [*config.html_static_path, str(STATIC)]


def setup(app):
    app.connect("config-inited", _add_static)
    app.add_css_file("print.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
