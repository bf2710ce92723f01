import sys, json, tempfile
from memgraph.api import analyze_traced
from memgraph.model_spec.options import TrainingOptions
def run(zero, extra={}, n=2):
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": zero, **extra}
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False); json.dump(cfg, f); f.close()
    r, t = analyze_traced("tests/configs/tiny-llama.json", TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=n, deepspeed=f.name, precision="bf16-mixed", depth_synthesis="off"))
    return r, t
def shapes(t, shape, dtype):
    return [s for s in t.log.storages if s.shape == shape and s.dtype == dtype]
def end_live(t, it):
    b = t.iteration_bounds[it][1]
    return sum(s.nbytes for s in t.log.storages if s.alloc_event < b and (s.free_event is None or s.free_event >= b))
what = sys.argv[1]
if what == "bucket":
    for ov in (False, True):
        r, t = run({"stage": 2, "reduce_bucket_size": 20000, "allgather_bucket_size": 20000, "overlap_comm": ov})
        print(ov, [(s.name, s.dtype, s.phase, s.iteration, s.nbytes) for s in [s for s in t.log.storages if s.shape == (20000,)]][:6])
if what == "persist":
    for th in (0, 5000):
        r, t = run({"stage": 3, "stage3_param_persistence_threshold": th})
        print(th, end_live(t, 0), end_live(t, 1), r.notes[-2:] if hasattr(r, "notes") else "")
if what == "bf16":
    r, t = run({"stage": 1}, {"data_types": {"grad_accum_dtype": "fp32"}})
    print([(s.name, s.phase, s.iteration, s.nbytes, s.role, s.free_event) for s in [s for s in t.log.storages if s.dtype == "float32" and s.nbytes > 400000]])
