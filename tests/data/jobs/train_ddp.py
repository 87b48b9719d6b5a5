import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("GLOO_T","120"))))
rank = dist.get_rank()
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(os.environ.get("STEPS", "40"))
for step in range(1, steps + 1):
    x = torch.randn(16, 8)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    print(f"rank {rank} step {step}/{steps} loss {loss.item():.4f}", flush=True)
    if rank == int(os.environ.get("CRASH_RANK", "-1")) and step == int(os.environ.get("CRASH_STEP", "10")):
        raise ValueError(f"bad batch at step {step}")
    time.sleep(0.2)
dist.destroy_process_group()
