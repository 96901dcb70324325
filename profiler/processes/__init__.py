"""Processes: the parent side of a run, which starts the measured processes and owns the run
folder.

``pipeline`` (one run from start to finish, and re-rendering a finished one), ``runner`` (one
process per workload, time-outs, failure isolation, progress), ``rundir`` (run folders and
atomic renames), ``env`` (the environment record, from an allow-list).
"""
