"""Renderers: summary -> view model -> HTML, text, and the other output formats.

Nothing here imports collectors or workloads: every renderer works from ``summary.json`` (and
the artefacts it names), so a run's report can be rebuilt from its folder alone.
"""
