"""Analysis: liveness over the recorded trace, the memory timeline, peaks and breakdowns."""
