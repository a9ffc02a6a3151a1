"""What the benchmark's event timing charges any kernel: a one-element torch kernel timed as `kda2 bench recurrent`
times a call (GPU spin before each call, CUDA events around it; kda2.bench.timing.Timer), and under CUDA-graph replay.
Usage: python launch_floor.py OUT.json"""
import json
import sys

import torch

from kda2.bench.timing import Timer

timer = Timer(torch)
xs = [torch.zeros(1, device="cuda") for _ in range(8)]
res = {"device": torch.cuda.get_device_name(), "what": "x.add_(1) on a 1-element fp32 tensor, 8 rotating tensors"}
for name, fn in (("one_element_add", lambda i: xs[i].add_(1)),):
    st = timer.kernel(fn, len(xs), 200)
    g = timer.graph(fn, len(xs))
    res[name] = {"event_us_median": st.median_ms * 1e3, "event_us_p10": st.p10_ms * 1e3,
                 "event_us_p90": st.p90_ms * 1e3, "graph_us_median": g.median_ms * 1e3}
print(json.dumps(res, indent=1))
json.dump(res, open(sys.argv[1], "w"), indent=1)
