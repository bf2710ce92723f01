"""The default registry entries (reviewed ops, their families and kernel workspaces).

What the tracer gets right without an entry: every output storage (its real size) and aliasing
(a view's storage is its base's; an in-place op returns a storage already known). An entry says
the op was reviewed, names its family, and per target gives the scratch buffers its kernel
allocates and frees by itself (see :mod:`memgraph.facts.ops.cpu_workspace` for the ``cpu`` target and
:mod:`memgraph.facts.ops.cuda_workspace` for the ``cuda`` target: cuDNN convolution workspaces, operand
copies of cuBLAS GEMMs, fused attention backward buffers).

The list is every op seen in traces of the zoo models and tests/configs (targets cpu and cuda;
sgd, sgd-momentum, adam, adamw with their for-loop and foreach implementations; eager and sdpa
attention), each checked against torch.profiler on the CPU for buffers the meta trace cannot see,
plus close elementwise/view/factory relatives whose kernels are plain TensorIterator loops. Ops
not reviewed that way are left out on purpose, so that a trace using them reports them as unknown
(e.g. group norm; sort-based indexing).

CPU note for the whole list: a Python scalar argument (``x.mul_(0.9)``, ``x / 8``) is wrapped into
a 0-dim tensor of 4-12 bytes on the real CPU run that the meta trace does not see; it is ignored.
"""

from __future__ import annotations

from memgraph.facts.ops import cpu_attention
from memgraph.facts.ops import cpu_gemm
from memgraph.facts.ops import cpu_norm_workspace as cpu_norm
from memgraph.facts.ops import cpu_workspace as cpu
from memgraph.facts.ops import cuda_workspace as cuda
from memgraph.facts.ops.table import register

# -- views and aliases: a tensor on an existing storage, no allocation -------------------------
register(
    "view",
    "aten.view", "aten._unsafe_view", "aten._reshape_alias", "aten.as_strided", "aten.t",
    "aten.transpose", "aten.permute", "aten.expand", "aten.select", "aten.slice", "aten.squeeze",
    "aten.unsqueeze", "aten.split", "aten.split_with_sizes", "aten.unbind", "aten.diagonal",
    "aten.unfold", "aten.alias", "aten.detach", "aten.lift_fresh", "aten.view_as_real",
    "aten.view_as_complex",
    note="aliases its input's storage; no allocation (a reshape that must copy shows up as aten.clone)",
)

# -- in place: writes into its first argument ----------------------------------------------------
register(
    "inplace",
    "aten.add_", "aten.sub_", "aten.mul_", "aten.div_", "aten.addcdiv_", "aten.addcmul_", "aten.lerp_",
    "aten.masked_fill_", "aten.fill_", "aten.zero_", "aten.clamp_", "aten.clamp_min_", "aten.clamp_max_",
    "aten.sqrt_", "aten.pow_", "aten.neg_", "aten.exp_", "aten.relu_", "aten.sigmoid_", "aten.tanh_",
    "aten.tril_", "aten.triu_", "aten.hardtanh_",
    "aten.rsqrt_", "aten.sign_",  # torch.optim.Adafactor's update; lion-pytorch's update_fn
    "aten.bitwise_or_", "aten.__ior__",  # SmolVLM's real_images_inds[0] |= ...; torch.profiler: no allocation
    note="in place on its first argument; no allocation",
)

# -- pointwise: one new output of the broadcast shape ----------------------------------------------
register(
    "pointwise",
    "aten.add", "aten.sub", "aten.rsub", "aten.mul", "aten.div", "aten.neg", "aten.abs", "aten.pow",
    "aten.sqrt", "aten.rsqrt", "aten.exp", "aten.log", "aten.log1p", "aten.expm1", "aten.cos",
    "aten.sin", "aten.tanh", "aten.sigmoid", "aten.relu", "aten.gelu", "aten.silu", "aten.erf",
    "aten.reciprocal", "aten.sign", "aten.floor", "aten.ceil", "aten.round", "aten.clamp",
    "aten.clamp_min", "aten.clamp_max", "aten.minimum", "aten.maximum", "aten.where", "aten.lerp",
    "aten.addcmul", "aten.addcdiv", "aten.masked_fill", "aten.tril", "aten.triu", "aten.hardtanh",
    "aten.leaky_relu", "aten.elu", "aten.softplus", "aten.mish", "aten.hardswish", "aten.hardsigmoid",
    "aten.logical_not", "aten.logical_and", "aten.logical_or", "aten.bitwise_and", "aten.bitwise_or",
    "aten.bitwise_not", "aten.eq", "aten.ne", "aten.lt", "aten.le", "aten.gt", "aten.ge", "aten.isnan",
    "aten.isinf", "aten.nan_to_num", "aten.fmod", "aten.remainder", "aten.floor_divide",
    "aten.log_sigmoid_forward",
    "aten.__or__", "aten.__and__",  # a | b on masks (TP's embedding mask); the profiler: one output (via bitwise_or)
    note="elementwise; one output (log_sigmoid_forward: output + buffer, both returned)",
)
register(
    "pointwise", "aten.bucketize",
    note="one output of the input's shape (int64, or int32 with out_int32); torch.profiler on the CPU (torch "
         "2.13): no other allocation with contiguous boundaries (Idefics2/3 and SmolVLM position ids)",
)
register(
    "pointwise",
    "aten.silu_backward", "aten.sigmoid_backward", "aten.tanh_backward", "aten.threshold_backward",
    "aten.log_sigmoid_backward", "aten.hardtanh_backward", "aten.leaky_relu_backward", "aten.elu_backward",
    "aten.softplus_backward", "aten.hardswish_backward", "aten.hardsigmoid_backward",
    note="elementwise activation gradient; one output",
)
register(
    "pointwise", "aten.gelu_backward",
    note="elementwise; CPU: oneDNN computes it when self is contiguous and reorders a strided grad",
    workspace={"cpu": cpu.gelu_backward},
)

# -- reductions -----------------------------------------------------------------------------------
register(
    "reduction", "aten.sum", "aten.mean", "aten.argmax", "aten.linalg_vector_norm",
    # small reductions over token ids and masks (vision-language inputs, packed-sequence checks)
    "aten.cumsum", "aten.prod", "aten.max", "aten._is_all_true",
    "aten.any",  # bitsandbytes' int8_vectorwise_quant outlier search (model_spec/quantize.py, --quantize 8bit)
    "aten.argmin",  # a VQ-GAN quantizer's nearest codebook entry (Chameleon, Emu3: model_spec/vq_tokens.py)
    # max/min over dims (a stable softmax's shift, absmax scales); their backward is composite (eq, sum, div, mul).
    # torch.profiler on the CPU (torch 2.13): the reduced output only, plus a transient of two elements
    # (the kernel's 0-d partial) when every dim is reduced, freed within the op
    "aten.amax", "aten.amin",
    note="reduced output (one per reduced tensor, the same size or smaller); CPU reductions keep their "
         "per-thread partials off the c10 allocator",
)

# -- matmul ---------------------------------------------------------------------------------------
_MATMUL_NOTE = ("GEMM into the output; CPU (MKL) packing buffers are MKL's own memory, not c10's, but mm/addmm copy an "
                "operand BLAS cannot take as laid out (see cpu_gemm); CUDA: an operand "
                "cuBLAS cannot take as laid out (e.g. a zero stride) is copied first, see cuda_workspace")
register("matmul", "aten.mm", note=_MATMUL_NOTE, workspace={"cpu": cpu_gemm.mm}, cuda=cuda.mm)
register("matmul", "aten.addmm", note=_MATMUL_NOTE, workspace={"cpu": cpu_gemm.addmm}, cuda=cuda.addmm)
register("matmul", "aten.bmm", note=_MATMUL_NOTE, cuda=cuda.bmm)
register("matmul", "aten.baddbmm", note=_MATMUL_NOTE, cuda=cuda.baddbmm)

# -- convolution ----------------------------------------------------------------------------------
register(
    "conv", "aten.convolution",
    note="CPU: oneDNN (Mkldnn) or im2col+GEMM (Slow2d), as _select_conv_backend picks; see cpu_workspace. "
         "CUDA: cuDNN's forward workspace (a bounded unknown), see cuda_workspace",
    workspace={"cpu": cpu.convolution}, cuda=cuda.convolution,
)
register(
    "conv", "aten.convolution_backward",
    note="CPU: grad_input/grad_weight/grad_bias on the forward's backend; see cpu_workspace. CUDA: cuDNN's "
         "backward-data then backward-filter workspaces (a bounded unknown), see cuda_workspace",
    workspace={"cpu": cpu.convolution_backward}, cuda=cuda.convolution_backward,
)

# -- normalization --------------------------------------------------------------------------------
register(
    "norm", "aten.native_batch_norm", "aten._native_batch_norm_legit",
    note="output + save_mean/save_invstd (C each); CPU: per-channel stats and alpha/beta temporaries",
    workspace={"cpu": cpu_norm.batch_norm},
)
register(
    "norm", "aten._native_batch_norm_legit_no_training",
    note="eval-mode batch norm (as native_batch_norm)", workspace={"cpu": cpu_norm.batch_norm_no_training},
)
register(
    "norm", "aten._batch_norm_with_update",
    note="training batch norm (as native_batch_norm)", workspace={"cpu": cpu_norm.batch_norm_with_update},
)
register(
    "norm", "aten.native_batch_norm_backward", "aten.batch_norm_backward",
    note="grad_input/weight/bias; CPU contiguous path allocates grad_input twice",
    workspace={"cpu": cpu_norm.batch_norm_backward},
)
register(
    "norm", "aten.native_layer_norm",
    note="output + mean/rstd (one per row); CPU: contiguous copy of a strided input",
    workspace={"cpu": cpu_norm.layer_norm},
)
register(
    "norm", "aten.native_layer_norm_backward",
    note="grad_input/weight/bias; CPU: contiguous copies and a {2, threads, N} partial-sum buffer",
    workspace={"cpu": cpu_norm.layer_norm_backward},
)

# -- softmax --------------------------------------------------------------------------------------
register(
    "softmax",
    "aten._softmax", "aten._log_softmax", "aten._safe_softmax", "aten._softmax_backward_data",
    "aten._log_softmax_backward_data",
    note="same-shape output (the eager and math-SDPA attention probabilities)",
)

# -- loss -----------------------------------------------------------------------------------------
register(
    "loss", "aten.nll_loss_forward", "aten.nll_loss_backward",
    note="loss + total_weight; backward: a gradient of the log-probabilities' shape",
)
register(
    "loss", "aten.mse_loss",
    note="the reduced loss; CPU: the elementwise loss first, freed after the reduction (PI0's flow-matching loss)",
    workspace={"cpu": cpu.mse_loss},
)
register("loss", "aten.mse_loss_backward", note="a gradient of the input's shape, written in place of its output")

# -- embedding ------------------------------------------------------------------------------------
register("embedding", "aten.embedding", note="rows of the table: one output")
register(
    "embedding", "aten.embedding_dense_backward",
    note="zero-filled gradient table; CPU: contiguous copies of a strided grad/indices",
    workspace={"cpu": cpu.embedding_dense_backward},
)

# -- pooling --------------------------------------------------------------------------------------
register(
    "pool", "aten.max_pool2d_with_indices", "aten.max_pool2d_with_indices_backward",
    note="pooled output + int64 indices; backward: a gradient of the input's shape",
)
register(
    "pool", "aten.avg_pool2d", "aten.avg_pool2d_backward",
    note="pooled output; backward: a gradient of the input's shape (nn.AvgPool1d runs as avg_pool2d: the audio "
         "encoders of Qwen2-Audio and Qwen2.5-Omni pool by 2 over time)",
)

# -- indexing -------------------------------------------------------------------------------------
register(
    "indexing", "aten.index", "aten.index_put", "aten.gather", "aten.slice_backward", "aten.select_backward",
    note="new output; *_backward: zeros of the input's shape with the gradient written in",
)
register(
    "indexing", "aten.index_put_", "aten.index_select", "aten.repeat_interleave", "aten.masked_scatter",
    note="vision-language glue: image features scattered into text embeddings, token positions; output only "
         "(index_put_ writes in place)",
)
register(
    "indexing", "aten.masked_scatter_backward",
    note="gradient of the scattered source; on CPU the kernel briefly holds about 2x the gradient internally "
         "(seen by profiling tiny LLaVA; not modelled, it did not reach the peak there)",
)

# -- copies and layout changes --------------------------------------------------------------------
register(
    "copy", "aten.clone", "aten._to_copy", "aten.copy_", "aten.cat", "aten.stack", "aten.repeat",
    "aten.constant_pad_nd",
    note="new output (copy_ writes into its destination)",
)

# -- factories ------------------------------------------------------------------------------------
register(
    "factory",
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided",
    "aten.zeros", "aten.zeros_like", "aten.new_zeros", "aten.ones", "aten.ones_like", "aten.new_ones",
    "aten.full", "aten.full_like", "aten.new_full", "aten.arange", "aten.eye", "aten.scalar_tensor",
    "aten.lift_fresh_copy",
    note="allocates its (filled) output",
)

# -- dropout and attention kernels ----------------------------------------------------------------
register(
    "dropout", "aten.native_dropout", "aten.native_dropout_backward",
    note="CUDA's fused dropout: output + a bool mask (1 byte/element) saved for backward; backward pointwise",
)
register(
    "attention",
    "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_cudnn_attention_backward",
    note="fused attention: output + float32 logsumexp saved (no B*H*S*S scores). Not modelled: the cuDNN "
         "attention kernels' workspace",
)
register(
    "attention", "aten._scaled_dot_product_flash_attention_for_cpu",
    note="CPU flash attention: output + float32 logsumexp saved; the kernel's per-thread buf (qk, max, sum, dst) "
         "in the accumulation dtype, see cpu_attention",
    workspace={"cpu": cpu_attention.flash_forward},
)
register(
    "attention", "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    note="dq/dk/dv (zeros); the kernel's grad_out.contiguous() copy, per-thread buf (attn, grad_attn) and dsum, "
         "see cpu_attention",
    workspace={"cpu": cpu_attention.flash_backward},
)
register(
    "attention", "aten._scaled_dot_product_flash_attention_backward",
    note="dq/dk/dv; CUDA: mha_bwd's float32 dq_accum and softmax_d (and full-head dk/dv with GQA), see cuda_workspace",
    cuda=cuda.flash_attention_backward,
)
register(
    "attention", "aten._scaled_dot_product_efficient_attention_backward",
    note="dq/dk/dv (+ bias grad); CUDA: float32 delta and the kernel's staging workspace (a bounded unknown), "
         "see cuda_workspace",
    cuda=cuda.efficient_attention_backward,
)
register(
    "amp", "aten._amp_foreach_non_finite_check_and_unscale_", "aten._amp_update_scale_",
    note="GradScaler: unscale gradients in place, update the scale in place; no allocation",
)

# -- random ---------------------------------------------------------------------------------------
register("random", "aten.bernoulli_", "aten.rand",
         note="bernoulli_: dropout's mask, filled in place from the generator; rand: a new tensor of its shape "
              "(transformers < 5.23 draws a 0-d one per step for Whisper's layerdrop)")

# -- foreach (multi-tensor optimizer ops) ---------------------------------------------------------
register(
    "foreach",
    "aten._foreach_add_", "aten._foreach_sub_", "aten._foreach_mul_", "aten._foreach_div_",
    "aten._foreach_addcdiv_", "aten._foreach_addcmul_", "aten._foreach_lerp_", "aten._foreach_sqrt_",
    "aten._foreach_maximum_", "aten._foreach_neg_", "aten._foreach_zero_", "aten._foreach_copy_",
    "aten._foreach_clamp_min_", "aten._foreach_clamp_max_", "aten._foreach_pow_", "aten._foreach_exp_",
    "aten._foreach_rsqrt_",  # torch.optim.Adafactor (foreach)
    note="in place on every tensor of the list; no allocation (CPU runs the per-tensor slow path)",
)
register(
    "foreach",
    "aten._foreach_add", "aten._foreach_sub", "aten._foreach_mul", "aten._foreach_div", "aten._foreach_sqrt",
    "aten._foreach_neg", "aten._foreach_addcdiv", "aten._foreach_addcmul", "aten._foreach_maximum",
    "aten._foreach_pow", "aten._foreach_abs",
    note="one new output per tensor of the list",
)

register(
    "foreach",
    "aten._fused_adamw_", "aten._fused_adam_", "aten._fused_sgd_",
    note="fused optimizer step (torch.optim fused=True; the Hugging Face Trainer's default adamw_torch_fused): "
         "parameters, moments and step counters updated in place by one multi-tensor kernel, no allocation "
         "(torch 2.13 aten/src/ATen/native/cuda/fused_adamw_impl.cu, native/FusedAdam.cpp on CPU)",
)

# -- host-side and bookkeeping ops ----------------------------------------------------------------
register(
    "host", "aten._local_scalar_dense",
    note="reads a scalar back to Python (e.g. an optimizer's CPU step counter); no device memory",
)
register(
    "profiler", "profiler._record_function_enter_new", "profiler._record_function_exit",
    "profiler._record_function_enter",
    note="record_function markers (optimizer.step's profiling range); no tensor memory",
)

# -- mixture-of-experts routing and grouped GEMM (transformers/integrations/moe.py) ----------------
register(
    "matmul", "aten._grouped_mm",
    note="experts' GEMM: one [S, N] output for the forward (groups are row ranges given by offs), [G, K, N] "
         "for weight gradients; CPU and CUDA fallback loop mm_out over groups into it, no scratch (measured: "
         "forward +output only, backward +grad_a +grad_w only). On meta, trace/emulate/moe.py answers non-bf16 dtypes",
)
register(
    "routing", "aten.topk", "aten.scatter",
    note="router top-k (values + int64 indices; the CPU kernel's queues are std::vector) and scatter (a clone "
         "written in place): outputs only, measured with torch.profiler",
)
register(
    "routing", "aten.sort",
    note="values + int64 indices; CPU: an arange of the sorted dimension filled into the indices first",
    workspace={"cpu": cpu.sort},
)
register(
    "routing", "aten.histc",
    note="tokens per expert; CPU: bins+1 edges and a {num_threads, bins} per-thread histogram",
    workspace={"cpu": cpu.histc},
)
register(
    "reduction", "aten.all",  # (aten.any is registered with the reductions above; the same facts)
    note="bool reductions over masks (transformers' padding-mask checks, read back with .item()): a bool output",
)
register(
    "inplace", "aten.unsqueeze_", "aten.scatter_",
    note="in place on its first argument (BigBird's block-sparse layout); no allocation",
)
register(
    "indexing", "aten.scatter_add", "aten.index_add",
    note="a clone of self, then added into in place: output only (BigBird's random-block gradients; transformers "
         "5.6's BigBird uses index_add where 5.23 uses scatter_add)",
)
from memgraph.facts.ops import collectives  # noqa: E402,F401  (torch.distributed collectives, FSDP2 copies)
