"""memgraph run: the user's own CUDA script, unmodified, on meta (memgraph/script_run/)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from memgraph.cli import main
from memgraph.model_spec.options import TrainingOptions
from memgraph.script_run import ScriptCommand, run_script

SCRIPTS = Path(__file__).resolve().parent.parent / "examples" / "scripts"


def _run_json(tmp_path, *argv) -> dict:
    out = tmp_path / "report.json"
    assert main(["run", "-o", str(out), "--", *map(str, argv)]) == 0
    return json.loads(out.read_text())


def test_nanogpt_script_static_bytes_by_hand(tmp_path):
    """The nanoGPT-style loop (bf16 autocast, fused AdamW, GradScaler, grad accumulation 2), cuda target.

    Parameters (fp32, each storage rounded up to the CUDA allocator's 512-byte blocks): wte 512x64 (tied with
    lm_head: one storage) 131,072; wpe 64x64 16,384; per layer ln_1 64 -> 512, c_attn 192x64 49,152, c_proj
    64x64 16,384, ln_2 512, c_fc 256x64 65,536, c_proj 64x256 65,536 = 197,632, x2 layers = 395,264; ln_f 512.
    Total 543,232. Fused AdamW: exp_avg and exp_avg_sq of each (2 x 543,232) plus one float32 0-dim ``step``
    per parameter on the device (fused keeps it there), 15 parameters x 512 = 7,680: 1,094,144."""
    report = _run_json(tmp_path, SCRIPTS / "nanogpt_train.py")
    assert report["parameters"] == 135_488  # 32,768 + 4,096 + 2 x 49,280 + 64: the tied weight counted once
    assert report["static"]["parameters"] == 543_232
    assert report["static"]["gradients"] == 543_232
    assert report["static"]["optimizer_state"] == 2 * 543_232 + 15 * 512
    assert report["options"]["precision"] == "bf16-mixed"
    assert report["optimizer_impl"] == "AdamW (fused)"
    assert report["steady_state_peak"]["phase"] in ("forward", "backward", "optimizer")
    notes = "\n".join(report["notes"])
    assert "Tensor.item() -> 1.0 at nanogpt_train.py:" in notes and "`lossf = loss.item()" in notes
    assert "stopped after 3 optimizer steps" in notes


def test_cuda_queries_answer_from_the_prediction(tmp_path, capsys):
    """memory_allocated() after one 1000-element float32 tensor: 4,000 B rounded to 512-byte blocks = 4,096;
    is_available / device name / capability are the --gpu's; the patches are undone afterwards."""
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent("""
        import torch
        assert torch.cuda.is_available()
        x = torch.empty(1000, device="cuda")
        print("allocated", torch.cuda.memory_allocated(), torch.cuda.get_device_name(), torch.cuda.get_device_capability())
        del x
        model = torch.nn.Linear(8, 8).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.save(model.state_dict(), "never-written.pt")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            pass
        for _ in range(5):
            loss = model(torch.randn(4, 8).to("cuda", non_blocking=True)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch.cuda.synchronize()
            if torch.isfinite(loss):
                print("peak", torch.cuda.max_memory_allocated())
    """))
    report = _run_json(tmp_path, script)
    err = capsys.readouterr().err
    assert "allocated 4096 NVIDIA H100 80GB HBM3 (9, 0)" in err
    assert "bool(tensor) -> True at loop.py:19 `if torch.isfinite(loss):`" in "\n".join(report["notes"])
    assert "torch.save: 1 call(s) skipped" in "\n".join(report["notes"]) and not Path("never-written.pt").exists()
    assert torch.cuda.is_available() is False
    assert torch.autocast is torch.amp.autocast_mode.autocast


def test_script_that_cannot_run_gets_one_line(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text("import torch\nx = torch.randn(8, device='cuda')\ny = x[x > 0]\n")
    assert main(["run", "--", str(script)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("memgraph: error: bad.py:3 `y = x[x > 0]`"), err


def test_missing_script_is_refused(tmp_path, capsys):
    assert main(["run", "--", str(tmp_path / "nope.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


DDP_SCRIPT = """
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda(local_rank)
ddp = DDP(model, device_ids=[local_rank])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
for step in range(5):
    loss = ddp(torch.randn(32, 256, device="cuda")).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""


def test_torchrun_style_ddp_script_on_the_fake_group(tmp_path):
    """init_process_group("nccl") + DDP(device_ids=[LOCAL_RANK]) as rank 0 of --nproc 4. Parameters by hand:
    weights 256x1024 and 1024x256 float32 = 1,048,576 B each, biases 1024 -> 4,096 B and 256 -> 1,024 B (each a
    multiple of 512): 2,102,272 B; AdamW (foreach, as on CUDA) keeps exp_avg and exp_avg_sq on the device (its
    ``step`` counters stay on the host): 2 x 2,102,272."""
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    out = tmp_path / "r.json"
    assert main(["run", "--nproc", "4", "-o", str(out), "--", str(script)]) == 0
    report = json.loads(out.read_text())
    assert report["static"]["parameters"] == 2 * 1_048_576 + 4_096 + 1_024
    assert report["static"]["optimizer_state"] == 2 * report["static"]["parameters"]
    assert report["options"]["nproc"] == 4
    assert any("init_process_group (nccl x1); it ran as rank 0 of 4" in n for n in report["notes"])
    assert not torch.distributed.is_initialized()


def test_module_form(tmp_path, monkeypatch):
    """``-- -m MODULE ARGS``: run as python -m runs it; its argv reaches the module."""
    (tmp_path / "tinyloop.py").write_text(textwrap.dedent("""
        import sys
        import torch
        n = int(sys.argv[1])
        model = torch.nn.Linear(n, n).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            model(torch.randn(2, n, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.json"
    assert main(["run", "-o", str(out), "--", "-m", "tinyloop", "64"]) == 0
    report = json.loads(out.read_text())
    assert report["parameters"] == 64 * 64 + 64  # Linear(64, 64): the argument reached the module
    assert report["model"] == "tinyloop"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["nanogpt_train.py", "hf_trainer_clm.py", "accelerate_loop.py",
                                    "resnet_train.py", "llava_train.py", "trl_sft_lora.py"])
def test_cpu_ground_truth_within_1_percent(script, tmp_path, monkeypatch):
    """The script run for real on the CPU (its CPU path, fp32) and measured with torch.profiler's memory events,
    against memgraph run --target cpu: the steady-state peak (max over iterations 2..3) within 1% (the issue's
    bound; measured 0.0000% to -0.0004% on the steady state), and the first iteration's peak too."""
    from memgraph.api import result_of_trace
    from memgraph.script_run.cpu_truth import measure_script_cpu

    monkeypatch.chdir(tmp_path)  # the Trainers make their output_dir in the working folder

    command = ScriptCommand((str(SCRIPTS / script),))
    measured = measure_script_cpu(command, 3)["iterations"]
    opts = TrainingOptions(target="cpu", iterations=3)
    trace, _ = run_script(command, opts)
    result = result_of_trace(script, opts, trace)
    steady = max(it["peak_allocated"] for it in measured[1:])
    assert abs(result.steady_state_peak.bytes - steady) <= 0.01 * steady
    assert abs(result.first_iteration_peak.bytes - measured[0]["peak_allocated"]) <= 0.01 * measured[0]["peak_allocated"]


@pytest.mark.slow
@pytest.mark.parametrize("checkpointing", [False, True])
def test_trainer_script_agrees_with_analyze(tmp_path, monkeypatch, checkpointing):
    """hf_trainer_clm.py against ``analyze`` of the same Llama config (batch 2 x 64, bf16-mixed, --loop trainer,
    fused AdamW: what the Trainer does). The static bytes agree exactly; the peaks differ by what the Trainer
    passes and analyze's loop does not: attention_mask int64[2,64] = 1,024 B and num_items_in_batch (a float32
    0-dim tensor, one 512-byte block), 1,536 B of inputs; measured 3,584 B in all (also 2,048 B more temporaries
    at the peak, from the Trainer's own loss arithmetic over num_items_in_batch). With gradient checkpointing
    (the Trainer's, non-reentrant; the recompute re-enters the emulated autocast) the same difference (measured)."""
    from transformers import LlamaConfig

    from memgraph.api import analyze

    config = LlamaConfig(vocab_size=504, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, pad_token_id=1)
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(tmp_path)
    monkeypatch.chdir(tmp_path)  # the Trainer makes its output_dir in the working folder
    expected = analyze(str(tmp_path), batch_size=2, seq_len=64, precision="bf16-mixed", loop="trainer",
                       gradient_checkpointing=checkpointing)
    report = _run_json(tmp_path, SCRIPTS / "hf_trainer_clm.py", *(["--gradient_checkpointing"] if checkpointing else []))
    assert report["static"] == dict(expected.static)
    ran, analyzed = report["steady_state_peak"]["by_category"], expected.steady_state_peak.by_category
    assert ran["inputs"] - analyzed["inputs"] == 1024 + 512
    assert ran["activations"] == analyzed["activations"]
    assert 0 <= report["steady_state_peak"]["bytes"] - expected.steady_state_peak.bytes <= 4096


def test_weights_from_disk_are_built_on_meta(tmp_path):
    """from_pretrained of a local folder builds the model from its config on meta, in the config's dtype
    (bfloat16 here), reading no weights; torch.load maps every tensor to meta. Parameters by hand: Llama with
    vocab 504, hidden 64, intermediate 176, 2 layers, 4 heads / 2 kv heads (head_dim 16), untied head:
    embed 504x64 + head 504x64 = 64,512; per layer q 64x64 + k 64x32 + v 64x32 + o 64x64 = 12,288, mlp 3 x 64x176
    = 33,792, two norms 128: 46,208, x2 = 92,416; final norm 64: 156,992. The checkpoint's Linear(8, 8) loads
    on meta; copied into the host module it leaves the host values (a counted read)."""
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=504, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, dtype="bfloat16")
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(tmp_path / "model")
    torch.save(torch.nn.Linear(8, 8).state_dict(), tmp_path / "head.pt")
    script = tmp_path / "ft.py"
    script.write_text(textwrap.dedent(f"""
        import torch
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained({str(tmp_path / "model")!r}).cuda()
        head = torch.nn.Linear(8, 8)
        head.load_state_dict(torch.load({str(tmp_path / "head.pt")!r}))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for step in range(3):
            ids = torch.randint(0, 504, (2, 32)).cuda()
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad()
    """))
    report = _run_json(tmp_path, script)
    assert report["parameters"] == 156_992
    assert report["options"]["precision"] == "bf16"
    notes = "\n".join(report["notes"])
    assert "LlamaForCausalLM.from_pretrained(" in notes and "built on meta in bfloat16" in notes
    assert "torch.load(" in notes and "copy into a host tensor (values not loaded)" in notes


def test_report_header_names_memgraph_run(tmp_path, capsys):
    """The text report of `memgraph run` is headed by the command that made it, not `memgraph analyze`."""
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(8, 8).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(4, 8, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
    """))
    assert main(["run", "--", str(script)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== memgraph run ==\n") and "== memgraph analyze ==" not in out, out[:200]
