"""The charting library the HTML report inlines: plotly.js, from the installed ``plotly`` package.

Place in the pipeline: read by the HTML renderer (``reports.html``). The ``plotly`` Python
package is a dependency and ships the full plotly.js bundle as ``plotly/package_data/
plotly.min.js`` (~4.8 MB), so the report has its charts right after ``pip install``: nothing is
downloaded, at set-up or at run time, and nothing third-party is kept in this repository. The
bundle is found with ``importlib.util.find_spec`` without importing ``plotly`` (an import costs
far more than a report needs).

The page carries the bundle gzip-compressed and base64-encoded (~1.95 MB instead of 4.8 MB) in
a script element the browser does not run; the page's own script unpacks it with the browser's
``DecompressionStream``. The encoded text is computed once per process (many reports are
rendered per run) and keyed by the bundle's path, size and modification time.
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib.util
import re
import sys
from pathlib import Path

#: What fixes a missing charting library; the page and ``python -m profiler setup`` say it.
INSTALL_HINT = "pip install plotly"
MISSING = f"the plotly package is not installed ({INSTALL_HINT}): the report has no charts"

_BUNDLE = ("package_data", "plotly.min.js")
_VERSION = re.compile(rb"plotly\.js(?: \([^)]*\))? v(\d+\.\d+\.\d+[\w.+-]*)")


def bundle_path() -> Path | None:
    """The installed plotly.js bundle, or None when the ``plotly`` package is not installed."""
    try:
        # A top-level name: find_spec locates the package without running its __init__.
        spec = importlib.util.find_spec("plotly")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root).joinpath(*_BUNDLE)
        if candidate.is_file():
            return candidate
    return None


def bundle_version(path: Path) -> str | None:
    """The plotly.js version its header comment names (``plotly.js v3.7.0``), else None."""
    with path.open("rb") as f:
        match = _VERSION.search(f.read(512))
    return match.group(1).decode("ascii") if match else None


def encode(data: bytes) -> str:
    """``data`` gzip-compressed (no timestamp: the same bytes give the same page) in base64."""
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")


@functools.lru_cache(maxsize=4)
def _encoded(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime_ns are only the cache key: a reinstalled plotly gives a new entry.
    return encode(Path(path).read_bytes())


def encoded_bundle() -> str | None:
    """The installed bundle as the page inlines it (``encode``), or None without plotly."""
    path = bundle_path()
    if path is None:
        return None
    try:
        stat = path.stat()
        return _encoded(str(path), stat.st_size, stat.st_mtime_ns)
    except OSError:
        return None


def setup() -> int:
    """Check that the charting library is installed; print where it is and its version.

    Returns:
        The exit status: 0, or 1 (with one line on stderr) when plotly is not installed.
    """
    path = bundle_path()
    if path is None:
        print(f"error: {MISSING}", file=sys.stderr)
        return 1
    version = bundle_version(path)
    print(f"plotly.js {'v' + version if version else '(version unknown)'}: {path}")
    return 0
