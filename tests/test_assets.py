"""The charting library comes with the installed plotly package and travels gzip + base64."""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
import sys

import pytest

from profiler import assets
from profiler.reports import html, viewmodel
from tests.conftest import REPO

GOLDEN_SUMMARY = REPO / "tests" / "data" / "golden_summary.json"


@pytest.fixture
def no_plotly(monkeypatch):
    """plotly as if not installed: a None entry in sys.modules makes find_spec answer None."""
    monkeypatch.setitem(sys.modules, "plotly", None)


def test_the_bundle_is_found_in_the_installed_plotly_package():
    path = assets.bundle_path()
    assert path is not None, "the plotly package is a dependency: pip install -e ."
    assert path.name == "plotly.min.js"
    assert path.parent.name == "package_data" and path.parent.parent.name == "plotly"
    assert path.stat().st_size > 1_000_000


def test_finding_the_bundle_does_not_import_plotly():
    code = (
        "import sys; from profiler import assets; "
        "assert assets.bundle_path() is not None; print('plotly' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_the_header_names_plotly_js_and_its_version():
    path = assets.bundle_path()
    assert path is not None
    version = assets.bundle_version(path)
    assert version is not None and re.fullmatch(r"\d+\.\d+\.\d+\S*", version)
    assert f"plotly.js v{version}" in path.read_text(encoding="utf-8")[:300]


def test_encoded_bundle_round_trips_to_the_same_bytes():
    path = assets.bundle_path()
    assert path is not None
    text = assets.encoded_bundle()
    assert text is not None
    assert re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", text)
    assert gzip.decompress(base64.b64decode(text, validate=True)) == path.read_bytes()
    # Compressed once per process, and about a third of the raw size.
    assert assets.encoded_bundle() is text
    assert len(text) < 0.5 * path.stat().st_size


def test_encoding_is_deterministic():
    data = b"Plotly.newPlot(" * 1000
    assert assets.encode(data) == assets.encode(data)
    assert gzip.decompress(base64.b64decode(assets.encode(data))) == data


def test_missing_plotly_gives_none_and_says_pip_install_plotly(no_plotly, capsys):
    assert assets.bundle_path() is None
    assert assets.encoded_bundle() is None
    assert assets.setup() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "pip install plotly" in err


def test_setup_prints_the_version_and_path(capsys):
    assert assets.setup() == 0
    out = capsys.readouterr().out
    path = assets.bundle_path()
    assert out == f"plotly.js v{assets.bundle_version(path)}: {path}\n"


def _vm():
    return viewmodel.build(json.loads(GOLDEN_SUMMARY.read_text()))


def test_the_page_carries_the_bundle_in_an_element_the_browser_does_not_run():
    encoded = assets.encode(b"window.Plotly = {};")
    page = html.render(_vm(), library=encoded)
    element = re.search(r'<script id="charting-library" type="([^"]+)">([^<]*)</script>', page)
    assert element is not None
    assert element.group(1) == "application/octet-stream"
    assert element.group(2) == encoded
    assert 'new DecompressionStream("gzip")' in page


def test_a_library_that_would_end_its_element_is_refused():
    with pytest.raises(ValueError, match="</script>"):
        html.render(_vm(), library="QUJD</SCRIPT>")


def test_without_plotly_the_page_says_pip_install_plotly(no_plotly):
    page = html.render(_vm())
    assert 'id="charting-library"' not in page
    assert "pip install plotly" in page
    assert "profiler setup" not in page
