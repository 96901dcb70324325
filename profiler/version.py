"""The toolkit's version, in a module of its own that imports nothing: the package's ``__init__``
re-exports it and the summary records it, without the summary importing the public API."""

__version__ = "0.1.0"
