"""Small fixes to the HTML that Jupyter Book 1 writes, so that a page loads without console errors.

* sphinx-thebe's inline `const THEBE_JS_URL = ...` script is registered twice, and a second `const` of the same
  name is a SyntaxError in the browser: each identical script is kept once.
* The single-page build (the PDF's source) renders a node with the handlers registered for its builder name,
  falling back to the `html` format's only when none are registered under that name. sphinx-exercise registers
  some under `singlehtml`, so myst-nb's hidden-cell nodes lost theirs ("unknown node type: HideCodeCellNode"):
  every `html` handler missing under `singlehtml` is shared with it.
"""

from __future__ import annotations


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        key = (getattr(script, "filename", None) or str(script) if not attributes.get("body") else None,
               attributes.get("body"))  # the same file or the same inline code, whatever its priority
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def _share_html_handlers(app) -> None:
    handlers = app.registry.translation_handlers
    if app.builder.name != "html" and app.builder.format == "html" and app.builder.name in handlers:
        for node, visitors in handlers.get("html", {}).items():
            handlers[app.builder.name].setdefault(node, visitors)


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("builder-inited", _share_html_handlers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
