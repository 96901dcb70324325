"""Profiling a user's own script, unchanged: ``python -m profiler run their_script.py [args]``.

Place in the pipeline: the script is one workload of the run. ``cli`` checks the script and builds
its ``ScriptSpec`` (``spec``); ``runner`` starts ``python -m profiler.capture.script.worker`` for it
instead of ``profiler.capture.worker``; that process writes the same ``model.json.gz`` trace, so
summary, attribution, TensorBoard scalars, the Chrome trace and the report work unchanged.

Modules, in the order a run uses them:

* ``source``: reads and checks the script (exit 2 before anything is written), and marks steps
  in its syntax tree for ``--step-function`` and ``--step-line``;
* ``spec``: the workload spec the parent builds for the script;
* ``driver``: the step driver, the hot path every detected step goes through, and the hand-off
  between the script (main thread) and the phase schedule (its own thread);
* ``detect``: where steps come from: TF1 ``Session.run``, ``tf.function`` calls, Keras ``fit``
  batches, ``--step-function``, ``--step-line`` (the markers API is ``profiler.markers``);
* ``schedule``: the phase windows cut from the script's single run;
* ``worker``: the process itself: runs the script as ``__main__`` and writes the trace.
"""
