# PyTorch's CPU AdamW on the same tensors as mt's AdamW unit test (2^24 fp32 parameters, all
# cores), for the side-by-side rate: bench_adamw.py [fused|foreach]
import sys
import time

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "fused"
param = torch.nn.Parameter(torch.ones(1 << 24))
param.grad = torch.full_like(param, 0.01)
optimizer = torch.optim.AdamW([param], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                              **{mode: True})
best = 1e30
for _ in range(5):
    start = time.perf_counter()
    optimizer.step()
    best = min(best, time.perf_counter() - start)
print(f"torch {torch.__version__} AdamW {mode}: {param.numel() / best / 1e9:.2f} G params/s, "
      f"{torch.get_num_threads()} threads")
