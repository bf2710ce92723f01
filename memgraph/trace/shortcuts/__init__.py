"""The shortcuts: a trace made from other, cheaper traces, trusted only where a check against a real trace holds.

Both take real traces (trace/tracer.py ``Trace``) and return a ``Trace`` as the tracer would have recorded it,
which the analysis then reads like any other; both fall back to a real trace when their check fails, so a
shortcut never changes a number.

- ``depth_run.py`` / ``depth.py``: depth synthesis (``--depth-synthesis auto``): a deep model traced at
  ``BASE_DEPTH`` and ``BASE_DEPTH + 1`` layers, one layer repeated to the full depth
  (``trace_with_depth_synthesis``, called by the tracer).
- ``batch.py``: batch interpolation (``AffineFit``): a batch size's trace from the traces at two others (sweep.py,
  fit/).
- ``checks.py``: their checks in one place: ``first_difference`` (a synthesis against the real trace at
  ``BASE_DEPTH + 1`` layers), ``same_stream`` and ``storage_sizes`` (two batch sizes record one stream; a middle
  size's real trace against its interpolation).
"""
