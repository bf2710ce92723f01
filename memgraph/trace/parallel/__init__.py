"""Distributed runs on one process: a rank of DDP / FSDP2 / ZeRO / tensor parallelism on a fake process group
(distributed.py, tensor_parallel.py), and which ranks differ (ranks.py)."""
