"""A real 4-stage pipeline-parallel training job with a 1F1B schedule (gloo, torch CPU), profiled by
torch.profiler, and the job's own record of what it sent and computed: the reference the pipeline
analyses (``analyzer/analyses/pipeline.py``) are checked against (tests/test_pipeline_1f1b.py).

Ranks 0..3 are stages 0..3 of one pipeline (PP = 4, DP = 1: the pipeline group is the world, as in
Megatron without data parallelism). Each step runs ``MICRO_BATCHES`` micro-batches through
Megatron's non-interleaved 1F1B schedule (``forward_backward_pipelining_without_interleaving``):
stage s runs ``min(STAGES - s - 1, MICRO_BATCHES)`` warm-up forwards, then one forward and one
backward at a time, then the cool-down backwards. Point-to-point transfers are Megatron's
``_communicate``: the sends and recvs of one exchange are posted together (``isend`` / ``irecv``)
and waited on together, so a middle stage in the steady phase sends its activation to the next
stage while it receives that stage's gradient (``send_forward_recv_backward``), and sends a
gradient back while it receives the next activation (``send_backward_recv_forward``). Activations
and gradients have the same shape, so a message's size does not tell its direction. After the
pipeline, every rank joins a world all-reduce of the loss, then steps its optimizer.

Each rank writes ``OUT/trace/rank_{r}/rank{r}.pt.trace.json`` (the profiled steps) and
``OUT/log/rank{r}.json``, the job's own record, on its own counters and its monotonic clock
(``time.monotonic_ns``), per profiled step:

- ``p2p``: every send and recv in the order posted: kind, direction (``forward``: activations to
  the next stage), peer rank, micro-batch, the exchange it belongs to, and when the exchange was
  posted and when its wait returned;
- ``compute``: each forward and backward of a micro-batch, with its start and end;
- ``start`` / ``pipeline_end``: the step's start and the end of its last p2p exchange.

Needs torch (``pip install torch==2.13.0``). The tests run it once per session (``tests/conftest.py``);
by hand::

    python tests/data/make_pipeline_1f1b.py OUT
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

STAGES = 4
MICRO_BATCHES = 6
HIDDEN = 128
BATCH = 16
CLASSES = 10
WAIT, WARMUP, ACTIVE = 1, 1, 3  # torch.profiler schedule: steps WAIT + WARMUP .. + ACTIVE - 1 are profiled


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def schedule(stage: int, stages: int = STAGES, micro: int = MICRO_BATCHES) -> list[tuple[str, int]]:
    """Megatron's non-interleaved 1F1B order of one stage: (``forward`` | ``backward``, micro-batch)."""
    warm = min(stages - stage - 1, micro)
    out = [("forward", k) for k in range(warm)]
    for i in range(micro - warm):
        out += [("forward", warm + i), ("backward", i)]
    return out + [("backward", k) for k in range(micro - warm, micro)]


def _train(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=STAGES)
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    stage = rank
    first, last = stage == 0, stage == STAGES - 1
    prev_rank, next_rank = rank - 1, rank + 1
    layers: list[nn.Module] = [nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU()]
    if last:
        layers.append(nn.Linear(HIDDEN, CLASSES))
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1234)  # the same data on every rank: the first stage's input, the last's labels
    trace_dir = Path(out) / "trace" / f"rank_{rank}"
    trace_dir.mkdir(parents=True, exist_ok=True)
    log_dir = Path(out) / "log"
    log_dir.mkdir(parents=True, exist_ok=True)

    record: dict[str, Any] = {"rank": rank, "stage": stage, "stages": STAGES, "micro_batches": MICRO_BATCHES}
    now = time.monotonic_ns

    def exchange(step_log: dict[str, Any], ops: list[tuple[str, str, int, int, Any]]) -> list[Any]:
        """Megatron's ``_communicate``: post every op of the exchange, wait for all; ops are
        (kind, direction, peer, micro-batch, tensor); returns the received tensors in order."""
        n = len(step_log["exchanges"])
        t0 = now()
        works = []
        for kind, _direction, peer, _k, tensor in ops:
            works.append(dist.isend(tensor, dst=peer) if kind == "send" else dist.irecv(tensor, src=peer))
        for w in works:
            w.wait()
        t1 = now()
        step_log["exchanges"].append({"posted": t0, "done": t1})
        for kind, direction, peer, k, _ in ops:
            step_log["p2p"].append(
                {"kind": kind, "direction": direction, "peer": peer, "micro_batch": k, "exchange": n}
            )
        return [tensor for kind, *_, tensor in ops if kind == "recv"]

    def run_step(step_log: dict[str, Any]) -> torch.Tensor:
        xs = [torch.randn(BATCH, HIDDEN, generator=gen) for _ in range(MICRO_BATCHES)]
        ys = [torch.randint(0, CLASSES, (BATCH,), generator=gen) for _ in range(MICRO_BATCHES)]
        inputs: dict[int, torch.Tensor] = {}
        outputs: dict[int, torch.Tensor] = {}
        loss_sum = torch.zeros(1)
        order = schedule(stage)
        for i, (what, k) in enumerate(order):
            nxt = order[i + 1] if i + 1 < len(order) else None
            if what == "forward":
                if first:
                    x = xs[k]
                else:
                    if k not in received:  # recv_forward: not received with the last exchange
                        received[k] = exchange(
                            step_log, [("recv", "forward", prev_rank, k, torch.empty(BATCH, HIDDEN))]
                        )[0]
                    x = received.pop(k)
                    x.requires_grad_()
                inputs[k] = x
                t0 = now()
                y = model(x)
                if last:
                    y = nn.functional.cross_entropy(y, ys[k]) / MICRO_BATCHES
                    loss_sum += y.detach()
                outputs[k] = y
                step_log["compute"].append({"kind": "forward", "micro_batch": k, "start": t0, "end": now()})
                if not last:
                    ops = [("send", "forward", next_rank, k, y.detach())]
                    if nxt and nxt[0] == "backward":  # send_forward_recv_backward
                        ops.append(("recv", "backward", next_rank, nxt[1], torch.empty(BATCH, HIDDEN)))
                    got = exchange(step_log, ops)
                    if got:
                        grads[nxt[1]] = got[0]
            else:
                if not last and k not in grads:  # recv_backward (cool-down)
                    grads[k] = exchange(step_log, [("recv", "backward", next_rank, k, torch.empty(BATCH, HIDDEN))])[0]
                t0 = now()
                if last:
                    outputs.pop(k).backward()
                else:
                    torch.autograd.backward(outputs.pop(k), grad_tensors=grads.pop(k))
                step_log["compute"].append({"kind": "backward", "micro_batch": k, "start": t0, "end": now()})
                x = inputs.pop(k)
                if not first:
                    ops = [("send", "backward", prev_rank, k, x.grad)]
                    if nxt and nxt[0] == "forward":  # send_backward_recv_forward
                        ops.append(("recv", "forward", prev_rank, nxt[1], torch.empty(BATCH, HIDDEN)))
                    got = exchange(step_log, ops)
                    if got:
                        received[nxt[1]] = got[0]
        return loss_sum

    received: dict[int, torch.Tensor] = {}
    grads: dict[int, torch.Tensor] = {}
    record["steps"] = profiled_steps(rank, trace_dir, opt, run_step)
    (log_dir / f"rank{rank}.json").write_text(json.dumps(record))
    # every rank leaves together (torch 2.13 + gloo can abort at exit when a peer is still tearing down)
    dist.barrier()
    dist.destroy_process_group()


def profiled_steps(rank: int, trace_dir: Path, opt: Any, run_step: Any) -> list[dict[str, Any]]:
    """The training loop under torch.profiler (``WAIT`` + ``WARMUP`` + ``ACTIVE`` steps, the active ones
    written to ``trace_dir``): each step ``run_step(step_log)`` runs the pipeline and returns the
    loss, which the world all-reduces (the end of the pipeline phase) before the optimizer steps.
    Returns the profiled steps' records (``start``, ``pipeline_end``: the last exchange's end,
    ``end``, and what ``run_step`` logged in ``p2p``, ``exchanges``, ``compute``)."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler import schedule as prof_schedule

    now = time.monotonic_ns
    steps: list[dict[str, Any]] = []

    def on_ready(p: profile) -> None:
        p.export_chrome_trace(str(trace_dir / f"rank{rank}.pt.trace.json"))

    dist.barrier()
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=prof_schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        record_shapes=True,
        on_trace_ready=on_ready,
    ) as prof:
        for step in range(WAIT + WARMUP + ACTIVE):
            step_log: dict[str, Any] = {"step": step, "start": now(), "p2p": [], "exchanges": [], "compute": []}
            opt.zero_grad()
            loss = run_step(step_log)
            step_log["pipeline_end"] = step_log["exchanges"][-1]["done"]
            dist.all_reduce(loss)  # the world: the end of the pipeline phase
            opt.step()
            step_log["end"] = now()
            if step >= WAIT + WARMUP:
                steps.append(step_log)
            prof.step()
    return steps


def generate(out: Path, train: Any = None, ranks: int = STAGES) -> Path:
    """Run the job (``train(rank, port, out)`` on ``ranks`` ranks; this one's ``_train`` by default)
    into ``out`` (``out/trace``: the profile folder; ``out/log``: the job's record). The ranks are
    forked from this process after it imported torch (imported once)."""
    import torch.distributed
    import torch.multiprocessing as tmp
    import torch.nn
    import torch.profiler  # noqa: F401

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    train = _train if train is None else train
    tmp.start_processes(train, args=(_free_port(), str(out)), nprocs=ranks, join=True, start_method="fork")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(f"generated {generate(Path(sys.argv[1]))}")
