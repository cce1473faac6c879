"""A training script that knows nothing about rankscope (the collector's environment route tests it).

Single process, or one rank of a torchrun job (gloo, DDP) when WORLD_SIZE is set.
"""

import os

import torch
import torch.nn as nn


def main() -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(int(os.environ.get("TRAIN_STEPS", "6"))):
        x = torch.randn(16, 32)
        y = torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if world > 1:
        # every rank leaves together: torch 2.13 + gloo aborted at interpreter exit ('terminate called
        # without an active exception', SIGABRT) in 7 of 25 plain torchrun runs of this script on a loaded
        # 2-core machine when one rank tore down while its peer was still in destroy_process_group
        dist.barrier()
        dist.destroy_process_group()
    print("trained")


if __name__ == "__main__":
    main()
