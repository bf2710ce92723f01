"""The cpu target's convolution probe never runs real kernels on inputs above its limit."""

import torch

from memgraph.facts.ops import cpu_kernel_probe as probe


def test_an_oversized_single_sample_convolution_is_not_run(monkeypatch):
    def must_not_run(*a, **k):
        raise AssertionError("probe ran a kernel above the limit")

    monkeypatch.setattr(probe, "_run_profiled", must_not_run)
    monkeypatch.setenv(probe.PROBE_LIMIT_ENV, "1")  # 1 MiB of inputs and outputs
    # x: 1 x 3 x 512 x 512 float32 = 3 MiB > 1 MiB, and a batch of 1 cannot shrink
    x = torch.empty(1, 3, 512, 512, device="meta")
    w = torch.empty(8, 3, 3, 3, device="meta")
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert probe.probe_kernel_peak(torch.ops.aten.convolution.default, args, {}) is None


def test_a_large_batch_is_probed_at_two_smaller_batches(monkeypatch):
    ran = []

    def fake(op, args, kwargs, batch, batched):
        ran.append(batch)
        return 1000 * batch  # 1000 B of scratch per sample

    monkeypatch.setattr(probe, "_run_profiled", fake)
    monkeypatch.setenv(probe.PROBE_LIMIT_ENV, "2")  # 2 MiB of inputs and outputs
    # x: 16 x 3 x 128 x 128 float32 = 3 MiB in, 16 x 8 x 128 x 128 = 8 MiB out: 192 + 512 = 704 KiB a sample,
    # and 864 B of weight: n2 = (2 MiB - 864) // 704 KiB = 2 samples, n1 = 1
    x = torch.empty(16, 3, 128, 128, device="meta")
    w = torch.empty(8, 3, 3, 3, device="meta")
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert probe.probe_kernel_peak(torch.ops.aten.convolution.default, args, {}) == 16 * 1000
    assert ran == [1, 2]  # then 2000 + (2000 - 1000) x (16 - 2) / (2 - 1) = 16000


def test_the_outputs_count_against_the_limit(monkeypatch):
    def must_not_run(*a, **k):
        raise AssertionError("probe ran a kernel whose output exceeds the limit")

    monkeypatch.setattr(probe, "_run_profiled", must_not_run)
    monkeypatch.setenv(probe.PROBE_LIMIT_ENV, "2")
    # 1 MiB in (1 x 256 x 32 x 32 float32), a 1x1 convolution to 1024 channels: 4 MiB out; 1 + 4 + 1 MiB > 2 MiB
    x = torch.empty(1, 256, 32, 32, device="meta")
    w = torch.empty(1024, 256, 1, 1, device="meta")
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert probe.probe_kernel_peak(torch.ops.aten.convolution.default, args, {}) is None
