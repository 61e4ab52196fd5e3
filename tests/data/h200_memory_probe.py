"""The script run on the lent H200 (reformatted for the linter: names and line breaks only;
PyTorch 2.11+cu130, driver 580.159.04) that measured its cudaMemGetInfo total
for assets/gpus.yaml (cuda_total_gib of H200-SXM-141GB); output: assets/results/h200_cuda_total_probe.json.
The "mlp_emulation" part is an unfused PyTorch MLP (separate silu and multiply), not vLLM: it peaks above
the runtime model's 3 x intermediate + 3 x hidden because vLLM fuses silu_and_mul; it is not used as evidence.
Run with OUT=<folder> python3 h200_memory_probe.py on a CUDA machine."""
import json
import os

import torch

o = {}
f, t = torch.cuda.mem_get_info()
p = torch.cuda.get_device_properties(0)
o.update(name=p.name, props_total=p.total_memory, cuda_free=f, cuda_total=t, torch=torch.__version__,
         cuda=torch.version.cuda)
h, inter = 4096, 14336
wgu = torch.empty(h, 2 * inter, dtype=torch.bfloat16, device="cuda")
wd = torch.empty(inter, h, dtype=torch.bfloat16, device="cuda")
r = {}
for T in (2048, 8192, 20000):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    b = torch.cuda.memory_allocated()
    x = torch.randn(T, h, dtype=torch.bfloat16, device="cuda")
    n = torch.nn.functional.rms_norm(x, (h,))
    gu = n @ wgu
    a = torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]
    del gu
    y = a @ wd
    del a, n
    x = x + y
    torch.cuda.synchronize()
    r[T] = {"peak_minus_base": torch.cuda.max_memory_allocated() - b, "formula_3I_3h": T * 2 * (3 * inter + 3 * h)}
    del x, y
o["mlp_emulation"] = r
f2, _ = torch.cuda.mem_get_info()
o["non_torch_after_init"] = (t - f2) - torch.cuda.memory_reserved()
json.dump(o, open(os.environ["OUT"] + "/probe.json", "w"), indent=1)
print(json.dumps(o, indent=1))
