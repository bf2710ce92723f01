import sys, json
from memgraph.api import analyze, measure
from memgraph.model_spec.options import TrainingOptions
model, cfg, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=n, deepspeed=cfg, precision="bf16-mixed")
rec = measure(model, "cpu", opts)
p = analyze(model, opts)
print("RESULT", model, cfg, n, [(g["ranks"], g["first_iteration_peak"], g["steady_state_peak"]) for g in p.ranks],
      [(r["rank"], [(i["peak_allocated_step_thread"], i["peak_allocated"]) for i in r["iterations"]], r["unreported_free_bytes"]) for r in rec["ranks"]], flush=True)
