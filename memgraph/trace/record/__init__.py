"""Recording: the dispatch mode that writes the storage event log (recorder.py, event_log.py), which module is
running (module_tracking.py), the function mode it builds on (transparent_mode.py), and where a running
analysis is (progress.py)."""
