"""The trace model: what capture produces and everything after it reads (``trace``).
Imports nothing else of the project's."""

from profiler.model.trace import *  # noqa: F403
from profiler.model.trace import _convert, _pack_segment, _unpack_segment  # noqa: F401
