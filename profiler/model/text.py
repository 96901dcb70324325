"""The model's one rule for text it did not write itself: every string it holds encodes as UTF-8.

Place in the pipeline: text from a user's script and from the file system (a script's name, its
folder, its arguments, its exception's message and traceback, its working directory, code
objects' file names) enters the trace model through ``to_jsonable`` (``WorkloadTrace.save``, the
one way a trace leaves the process that measured it) and the script's spec
(``ScriptSpec.from_args``), and both pass it through ``shown``.

Python hands such text over as ``str`` holding lone surrogates: ``os.fsdecode`` (file names,
``sys.argv``, ``os.getcwd()``) maps each byte that is not UTF-8 to U+DC80..U+DCFF
(``surrogateescape``), and a script can put any surrogate in an exception's message. Those
strings cannot be written as UTF-8, so the rule escapes them as Python's ``backslashreplace``
does for the byte they stand for: a file named ``b"caf\\xe9.py"`` is shown as ``caf\\xe9.py``;
any other lone surrogate as ``\\udXXX``. Text that encodes already is returned unchanged.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` with every lone surrogate escaped (the module docstring's rule).

    >>> shown("caf\\udce9.py")  # os.fsdecode(b"caf\\xe9.py")
    'caf\\\\xe9.py'
    """
    if text.isascii():
        return text
    return _SURROGATE.sub(_escape, text)
