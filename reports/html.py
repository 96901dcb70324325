"""The HTML report: the view model, formatted by Jinja2 templates into one offline file.

Place in the pipeline: view model -> **html**. Autoescaping is on for every string; the view
model reaches the page's script only as one JSON island rendered with ``|tojson`` (which escapes
``<``, ``>``, ``&`` and quotes), so a workload named ``</script>...`` stays text. The charting
library (plotly.js, fetched at set-up and pinned by hash: ``profiler.assets``) is inlined, so the
page needs no network; without it the page still renders every table and says how to get charts.
"""

from __future__ import annotations

from typing import Any

import jinja2

from profiler import assets

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("profiler.reports", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

#: Sentinel: inline the installed charting library.
INSTALLED = object()


def _fmt(value: float | None, spec: str = ".1f", missing: str = "–") -> str:
    if value is None:
        return missing
    return format(value, spec)


_ENV.filters["fmt"] = _fmt


def render(vm: dict[str, Any], library: Any = INSTALLED) -> str:
    """The report page for view model ``vm``.

    Args:
        vm: the view model (``reports.viewmodel.build``).
        library: the charting library's source to inline; by default the installed one
            (``python -m profiler setup``); None renders without charts (the golden test).
    """
    text = assets.load(assets.PLOTLY) if library is INSTALLED else library
    if text is not None and "</script" in text.lower():
        raise ValueError("the charting library contains </script>: refusing to inline it")
    return _ENV.get_template("report.html.j2").render(vm=vm, library=text)
