"""Plan renderers: human text (Terraform-like), JSON (versioned contract), Markdown (PR comment)."""

from __future__ import annotations

from reconciler.core.model.plan import Plan
from reconciler.render.json_render import render_json
from reconciler.render.markdown import render_markdown
from reconciler.render.text import render_text

FORMATS = ("text", "json", "markdown")


def render(plan: Plan, fmt: str = "text", verbose: bool = False) -> str:
    """``plan`` as ``fmt``; ``verbose``: every row one by one (text and the Markdown's full
    plan), instead of many rows of one kind and origin counted on one line."""
    if fmt == "json":
        return render_json(plan)
    if fmt == "markdown":
        return render_markdown(plan, verbose)
    return render_text(plan, verbose)


__all__ = ["FORMATS", "render", "render_json", "render_markdown", "render_text"]
