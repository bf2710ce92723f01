import sys
from memgraph.api import analyze
from memgraph.model_spec.options import TrainingOptions
model, cfg, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
prec = sys.argv[4] if len(sys.argv) > 4 else "bf16-mixed"
r = analyze(model, TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=n, deepspeed=cfg, precision=prec))
print(r.first_iteration_peak.bytes, r.steady_state_peak.bytes, r.ranks)
