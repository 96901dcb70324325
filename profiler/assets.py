"""Third-party files the report inlines, fetched from a package registry at set-up time.

Place in the pipeline: set-up only (``make`` runs ``python -m profiler setup``). The HTML report
inlines the charting library so it works offline; the library is not committed to this
repository but downloaded once from the npm registry, checked against the integrity hash pinned
here (the registry's ``dist.integrity`` for that exact version), and kept under
``<venv>/share/training-loop-profiler/``. Set ``PROFILER_ASSET_DIR`` to keep it elsewhere and
``npm_config_registry`` to use a registry mirror.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DEFAULT_REGISTRY = "https://registry.npmjs.org"


class AssetError(RuntimeError):
    """An asset could not be fetched or did not match its pinned hash."""


@dataclass(frozen=True)
class Asset:
    """One file from one npm package tarball, pinned by the tarball's integrity hash."""

    file: str
    package: str
    version: str
    integrity: str
    member: str
    license: str

    def tarball_url(self, registry: str) -> str:
        base = self.package.rsplit("/", 1)[-1]
        return f"{registry.rstrip('/')}/{self.package}/-/{base}-{self.version}.tgz"


#: plotly.js "basic" bundle (scatter, bar, pie; ~1.2 MB): the report's charts.
PLOTLY = Asset(
    file="plotly-basic.min.js",
    package="plotly.js-basic-dist-min",
    version="4.1.1",
    integrity="sha512-1oNF8PeQx2hv/y7tqEVWKD3JGwn/MGEMQ8mL9HUwsaqG9FGy/OU5FHUHvzqbqxN4mnwZGI9abTiE775C4kkjMQ==",
    member="package/plotly-basic.min.js",
    license="MIT",
)

ASSETS: tuple[Asset, ...] = (PLOTLY,)


def asset_dir() -> Path:
    override = os.environ.get("PROFILER_ASSET_DIR")
    if override:
        return Path(override)
    return Path(sys.prefix) / "share" / "training-loop-profiler"


def path(asset: Asset) -> Path:
    return asset_dir() / f"{asset.version}-{asset.file}"


def load(asset: Asset) -> str | None:
    """The asset's text, or None if it has not been fetched (``python -m profiler setup``)."""
    try:
        return path(asset).read_text(encoding="utf-8")
    except OSError:
        return None


def _check_integrity(data: bytes, integrity: str) -> None:
    algo, _, expected = integrity.partition("-")
    digest = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if digest != expected:
        raise AssetError(f"integrity check failed: got {algo}-{digest}, pinned {integrity}")


def fetch(asset: Asset, registry: str | None = None, timeout_s: float = 60.0) -> Path:
    """Download, verify and unpack ``asset`` unless it is already there; return its path."""
    target = path(asset)
    if target.exists():
        return target
    # npm spells its setting in lower case; honour both spellings.
    registry = (
        registry
        or os.environ.get("npm_config_registry")  # noqa: SIM112
        or os.environ.get("NPM_CONFIG_REGISTRY")
        or DEFAULT_REGISTRY
    )
    url = asset.tarball_url(registry)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            data = resp.read()
    except OSError as exc:
        raise AssetError(f"cannot download {url}: {exc}") from exc
    _check_integrity(data, asset.integrity)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            member = tar.extractfile(asset.member)
            if member is None:
                raise AssetError(f"{url} has no file {asset.member}")
            content = member.read()
    except tarfile.TarError as exc:
        raise AssetError(f"{url} is not a readable tarball: {exc}") from exc
    from profiler.processes.rundir import atomic_write_bytes

    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, content)
    return target


def setup() -> int:
    """Fetch every asset; print one line each. Exit status 0, or 1 if any failed."""
    status = 0
    for asset in ASSETS:
        try:
            p = fetch(asset)
            print(f"{asset.package} {asset.version}: {p}")
        except AssetError as exc:
            print(f"error: {asset.package} {asset.version}: {exc}", file=sys.stderr)
            status = 1
    return status
