"""Drop repeated <script>/<link> assets from every page.

Sphinx 7.4 re-adds the assets that extensions register after the builder starts (sphinx-thebe's
inline ``const THEBE_JS_URL = ...``, sphinx-togglebutton's selector), so every page declared the
same ``const`` twice: a SyntaxError in the browser's console.
"""

from __future__ import annotations


def _unique(assets: list) -> list:
    seen: set = set()
    out = []
    for asset in assets:
        attrs = getattr(asset, "attributes", {})
        # the re-added copy of an inline script has filename "" where the first has None
        key = (str(getattr(asset, "filename", asset) or ""),
               tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key not in seen:
            seen.add(key)
            out.append(asset)
    return out


def _dedupe(app, pagename, templatename, context, doctree) -> None:
    for name in ("script_files", "css_files"):
        if name in context:
            context[name] = _unique(context[name])


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
