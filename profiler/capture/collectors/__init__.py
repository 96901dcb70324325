"""Collectors: each converts one foreign artefact (xplane, step_stats, stacks) into the model."""
