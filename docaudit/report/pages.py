"""The HTML pages docaudit writes (report, map, controls), rendered from the package's jinja2 templates: each
extends ``templates/base.html`` (the shared head and styles), every value escaped, an undefined name an error."""

from __future__ import annotations

from functools import cache
from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"


@cache
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )


def render_page(template: str, **values) -> str:
    """The page of ``template`` (a file of ``templates/``) with ``values``."""
    return _environment().get_template(template).render(**values)
