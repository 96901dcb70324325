"""The charting library is pinned: a tampered download is refused."""

from __future__ import annotations

import pytest

from profiler import assets


def test_plotly_is_installed_by_setup_and_is_the_pinned_bundle():
    text = assets.load(assets.PLOTLY)
    assert text is not None, "run `python -m profiler setup` (make does it)"
    assert "plotly.js (basic - minified) v4.1.1" in text[:200]


def test_integrity_mismatch_is_refused():
    with pytest.raises(assets.AssetError, match="integrity check failed"):
        assets._check_integrity(b"not the tarball", assets.PLOTLY.integrity)


def test_missing_asset_loads_as_none(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILER_ASSET_DIR", str(tmp_path))
    assert assets.load(assets.PLOTLY) is None


def test_unreachable_registry_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILER_ASSET_DIR", str(tmp_path))
    with pytest.raises(assets.AssetError, match=r"cannot download http://127\.0\.0\.1:9/"):
        assets.fetch(assets.PLOTLY, registry="http://127.0.0.1:9", timeout_s=5)
    assert not any(tmp_path.iterdir())
