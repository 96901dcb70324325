"""Capture: what runs inside a measured process and produces its immutable trace.

``loop`` is the contract with the measured code (``WorkloadSpec``, ``Loop``, ``LoopInfo``);
``schedule`` runs windows of steps and the phases over them; ``phases/`` are the kinds of
instrumentation (timed, sampled, lines, framework, hooks); ``collectors/`` turn their foreign
artefacts (py-spy stacks, xplane, step_stats, line_profiler, hook timers) into the trace model
(``profiler.model``). ``worker`` is the process of a registered workload, ``script/`` the
process of a user's script; ``experiments`` and ``efficiency`` are the case study's
measurement processes. Nothing here analyses or renders.
"""
