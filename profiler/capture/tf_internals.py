"""The TensorFlow versions whose private internals this toolkit knows, in one place.

Place in the pipeline: the measured process. TensorFlow is the user's own (any ``tensorflow`` or
``tensorflow-cpu``); the parts that reach into its private modules (the hooks phase, the
script's step detectors in ``script/detect.py``, the what-ifs) were tested against the
versions of ``KNOWN_TF``. Each checks the attributes it uses before it patches or calls them
(feature detection, not version numbers): where one is missing that part steps aside, with a
note naming it and the TensorFlow version (``missing_note``), and the rest of the run goes on.
A version outside the range whose internals are all there runs as usual, and its records say
it was not tested (``tf_version_note``).

Nothing here imports TensorFlow: the version is the imported module's, or else the installed
distribution's metadata.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from typing import Any

#: The oldest and the newest (major, minor) TensorFlow release tested, inclusive.
KNOWN_TF: tuple[tuple[int, int], tuple[int, int]] = ((2, 16), (2, 21))
#: Distributions that install the ``tensorflow`` package (the first one installed is read).
DISTRIBUTIONS: tuple[str, ...] = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tf-nightly",
    "tf-nightly-cpu",
)


def known_range() -> str:
    """``KNOWN_TF`` in words: ``2.16–2.21``."""
    (a, b), (c, d) = KNOWN_TF
    return f"{a}.{b}–{c}.{d}"


def tf_version() -> str | None:
    """The TensorFlow version in use: the imported module's, else the first installed
    distribution's (TensorFlow is not imported for it); None without TensorFlow."""
    module = sys.modules.get("tensorflow")
    version = getattr(module, "__version__", None)
    if isinstance(version, str) and version:
        return version
    for name in DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def parse(version: str) -> tuple[int, int] | None:
    """``"2.20.0"`` -> ``(2, 20)``; None if the string does not start with major.minor."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_known(version: str) -> bool:
    """Whether ``version`` lies within ``KNOWN_TF``."""
    parsed = parse(version)
    return parsed is not None and KNOWN_TF[0] <= parsed <= KNOWN_TF[1]


def tf_version_note(version: str | None = None) -> str | None:
    """None if TensorFlow (``version``, else the one in use) is absent or within ``KNOWN_TF``;
    else a note that its internals were not tested here."""
    version = tf_version() if version is None else version
    if version is None or is_known(version):
        return None
    return (
        f"TensorFlow {version} is outside the versions this toolkit was tested with "
        f"({known_range()}): the TensorFlow internals it uses were each checked before use, "
        "and what was missing was left out with a note"
    )


def missing_attributes(owner: Any, names: tuple[str, ...]) -> list[str]:
    """The dotted attribute paths of ``names`` that ``owner`` lacks. The last name of a path
    that ends on a class must be in that class's own namespace, where a patch replaces it
    (``"Function.__call__"``: ``Function`` defines ``__call__`` itself; every class is
    callable)."""
    missing = []
    for name in names:
        obj = owner
        *path, last = name.split(".")
        for part in path:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        found = obj is not None and (
            last in vars(obj) if isinstance(obj, type) else hasattr(obj, last)
        )
        if not found:
            missing.append(name)
    return missing


def missing_note(what: str, missing: str, version: str | None = None) -> str:
    """Why ``what`` (a phase, a detector, a what-if) stepped aside: the internal it needs,
    ``missing``, is not in this TensorFlow."""
    version = tf_version() if version is None else version
    shown = version or "(version unknown)"
    installed = f"TensorFlow {shown}"
    keras = getattr(sys.modules.get("keras"), "__version__", None)
    if missing.startswith("keras") and isinstance(keras, str):
        installed += f" (Keras {keras})"
    outside = "" if version is not None and is_known(version) else f"; {shown} is not among them"
    return (
        f"{what} needs {missing}, which {installed} does not have (this toolkit knows the "
        f"internals of TensorFlow {known_range()}{outside})"
    )
