"""What an installed toolkit puts into a user's environment: one package, ``profiler``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO


def test_the_wheel_installs_only_the_profiler_package_with_its_data(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", str(REPO)),
            *("--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # reports/ and workloads/ are the toolkit's own: no top-level names that would shadow a
    # user's modules of the same name.
    assert {n.split("/")[0] for n in names} == {
        "profiler",
        f"{wheel.name.split('-')[0]}-0.1.0.dist-info",
    }
    assert "profiler/reports/templates/report.html.j2" in names
    assert "profiler/reports/schema/summary.schema.json" in names
    assert "profiler/workloads/tf1_gd.py" in names
    assert not any(n.startswith(("tests/", "profiler/tests/")) for n in names)
