"""The HTML report: the view model, formatted by a Jinja2 template into one offline file.

Autoescaping is on for every string; the view model reaches scripts only as one JSON island
rendered with ``|tojson`` (which escapes ``<``, ``>``, ``&`` and quotes), so a workload named
``</script>...`` stays text. Nothing is fetched at view time.
"""

from __future__ import annotations

from typing import Any

import jinja2

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reports", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _fmt(value: float | None, spec: str = ".1f", missing: str = "–") -> str:
    if value is None:
        return missing
    return format(value, spec)


_ENV.filters["fmt"] = _fmt


def render(vm: dict[str, Any]) -> str:
    """The report page for view model ``vm``."""
    return _ENV.get_template("report.html.j2").render(vm=vm)
