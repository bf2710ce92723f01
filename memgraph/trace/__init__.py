"""Trace: run one training step eagerly on ``meta`` and record ops, storages and lifetimes."""
