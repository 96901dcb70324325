"""Analysis: pure functions of the traces, run once per run (``run.analyse``).

``stats`` (step statistics, one-off costs, inflation), ``stacks`` (the stack classification
table) and ``sampling`` (samples counted by cause), ``attribution`` (every step split into
categories), ``lines`` (line tables), ``experiments`` and ``efficiency``/``efficiency_pairs``
(the counterfactual pairs, the size sweep, training efficiency), ``compare`` (two workloads by
category). No I/O, no printing: renderers format what these return.
"""
