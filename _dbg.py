import sys
from memgraph.api import analyze_traced
from memgraph.model_spec.options import TrainingOptions
r, t = analyze_traced(sys.argv[1], TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=int(sys.argv[3]), deepspeed=sys.argv[2], precision="bf16-mixed"))
log = t.log
# storages alive at the end of iteration 1 (event bound)
b = t.iteration_bounds[0][1]
alive = [s for s in log.storages if s.alloc_event < b and (s.free_event is None or s.free_event >= b)]
for s in sorted(alive, key=lambda s: -s.nbytes)[:25]:
    print(s.nbytes, s.dtype, s.shape, s.origin.value, s.name, s.module, s.phase, s.iteration, s.role)
print(sum(s.nbytes for s in alive))
