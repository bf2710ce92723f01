"""The target on meta: what the target's kernels and libraries do that meta's would not: autocast
(autocast_emulation.py), the SDPA / dropout kernel choice (sdpa_kernels.py), the buffers CUDA libraries take
(cuda_library_workspaces.py), and meta kernels corrected to the target's (meta_kernels.py with conv_layout.py,
pointwise_layout.py, moe.py, gather_backward.py, inplace_grad_sum.py)."""
