"""The HTML report: the view model, formatted by Jinja2 templates into one offline file.

Place in the pipeline: view model -> **html**. Autoescaping is on for every string; the view
model reaches the page's script only as one JSON island rendered with ``|tojson`` (which escapes
``<``, ``>``, ``&`` and quotes), so a workload named ``</script>...`` stays text. The charting
library (plotly.js from the installed ``plotly`` package: ``profiler.assets``) is inlined
gzip-compressed and base64-encoded in a script element the browser does not run; the page's
script unpacks it with ``DecompressionStream`` (Chromium 80+, Firefox 113+, Safari 16.4+), runs
it, then draws the charts, so the page needs no network. Without the library, or in an older
browser, the page still renders every table and each chart's box says why it is empty.
"""

from __future__ import annotations

import json
import math
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


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _tojson_dumps(value: Any, **kwargs: Any) -> str:
    """``|tojson``'s encoder: NaN and infinities are null, as in ``summary.json``. Python's
    ``json`` writes them as ``NaN``/``Infinity``, which ``JSON.parse`` refuses: the page's data
    island would not parse and no chart would draw."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


_ENV.policies["json.dumps_function"] = _tojson_dumps


def render(vm: dict[str, Any], library: Any = INSTALLED) -> str:
    """The report page for view model ``vm``.

    Args:
        vm: the view model (``reports.viewmodel.build``).
        library: the charting library to inline, gzip-compressed and base64-encoded
            (``assets.encode``); by default the installed one (``assets.encoded_bundle``);
            None renders without charts (the golden test).
    """
    text = assets.encoded_bundle() if library is INSTALLED else library
    # base64 cannot hold "</script", but a caller's text can: the element must not end early.
    if text is not None and "</script" in text.lower():
        raise ValueError("the charting library contains </script>: refusing to inline it")
    return _ENV.get_template("report.html.j2").render(
        vm=vm, library=text, install_hint=assets.INSTALL_HINT
    )
