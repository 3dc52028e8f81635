"""Small fixes to the HTML that Jupyter Book 1 writes, so that a page loads without console errors.

* sphinx-thebe's inline `const THEBE_JS_URL = ...` script is registered twice, and a second `const` of the same
  name is a SyntaxError in the browser: each identical script is kept once.
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


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
