"""A real 4-rank pipeline-parallel training job with Megatron's interleaved 1F1B schedule (virtual
pipeline: each rank holds ``CHUNKS`` model chunks), gloo, torch CPU, profiled by torch.profiler,
and the job's own record of what it sent and computed: the reference the pipeline analyses
(``analyzer/analyses/pipeline.py``) are checked against (tests/test_pipeline_interleaved.py).

Rank r holds chunks 0..CHUNKS-1; chunk c of rank r is virtual stage ``c * RANKS + r``, so the
model runs rank 0 chunk 0, rank 1 chunk 0, ..., rank 3 chunk 0, rank 0 chunk 1, ..., rank 3 chunk
``CHUNKS - 1`` (the loss). The last rank's activations of chunk c go to the first rank's chunk
c + 1 (the wrap: rank 0 receives activations as well as gradients, rank 3 gradients as well as
activations) and the first rank's gradients of chunk c + 1 go back to the last rank's chunk c. The
order is Megatron's ``forward_backward_pipelining_with_interleaving`` (without overlapped p2p):
``(RANKS - r - 1) * 2 + (CHUNKS - 1) * RANKS`` warm-up forwards, then one forward and one backward
at a time, then the cool-down backwards; virtual micro-batch k runs chunk
``(k % (RANKS * CHUNKS)) // RANKS`` (backward: the reverse) on micro-batch
``(k // (RANKS * CHUNKS)) * RANKS + k % RANKS``. Its exchanges are Megatron's ``_communicate``:
``send_forward_recv_forward`` in the warm-up, ``send_forward_backward_recv_forward_backward`` (up to
four ops, both neighbours on the ring) in the steady phase, ``send_backward_recv_backward`` in the
cool-down, the ops of one exchange posted together (``isend`` / ``irecv``, in the order of
Megatron's batched p2p: send to the previous rank, recv from it, send to the next, recv from it)
and waited on together;
which chunk a received tensor feeds follows Megatron's rules for the first and last rank.
Activations and gradients have one shape: a message's size tells neither its direction nor its
chunk. After the pipeline every rank joins a world all-reduce of the loss, then steps its optimizer.

Each rank writes ``OUT/trace/rank_{r}/rank{r}.pt.trace.json`` (the profiled steps) and
``OUT/log/rank{r}.json``, the job's own record on its monotonic clock (``time.monotonic_ns``), per
profiled step:

- ``p2p``: every send and recv in the order posted: kind, direction (``forward``: activations to
  the next virtual stage), peer rank, chunk (on this rank: the chunk that produced the send or
  consumes the recv), virtual stage (``chunk * RANKS + rank``), micro-batch, the exchange;
- ``exchanges``: when each exchange was posted and when its wait returned;
- ``compute``: each forward and backward: chunk, micro-batch, start, end;
- ``start`` / ``pipeline_end``: the step's start and the end of its last exchange.

Needs torch (``pip install torch==2.13.0``). The tests run it once per session (``tests/conftest.py``);
by hand::

    python tests/data/make_pipeline_interleaved.py OUT
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_pipeline_1f1b
from make_pipeline_1f1b import profiled_steps

RANKS = 4
CHUNKS = 2
MICRO_BATCHES = 8  # a multiple of RANKS (Megatron's interleaved schedule asks for it)
HIDDEN = 128
BATCH = 16
CLASSES = 10


def chunk_of(k: int, forward: bool, ranks: int = RANKS, chunks: int = CHUNKS) -> int:
    """Megatron's ``get_model_chunk_id``: the chunk of virtual micro-batch k."""
    c = (k % (ranks * chunks)) // ranks
    return c if forward else chunks - c - 1


def micro_batch_of(k: int, ranks: int = RANKS, chunks: int = CHUNKS) -> int:
    """The micro-batch of virtual micro-batch k (forward and backward alike)."""
    return (k // (ranks * chunks)) * ranks + k % ranks


def warmup(rank: int, ranks: int = RANKS, chunks: int = CHUNKS, micro: int = MICRO_BATCHES) -> int:
    """Megatron's warm-up forwards of a rank (all of them when the micro-batches are the ranks)."""
    total = micro * chunks
    if micro == ranks:
        return total
    return min((ranks - rank - 1) * 2 + (chunks - 1) * ranks, total)


def schedule(rank: int, ranks: int = RANKS, chunks: int = CHUNKS, micro: int = MICRO_BATCHES) -> list[tuple]:
    """A rank's computations in order: (``forward`` | ``backward``, chunk, micro-batch)."""
    total, warm = micro * chunks, warmup(rank, ranks, chunks, micro)
    out = [("forward", chunk_of(k, True, ranks, chunks), micro_batch_of(k, ranks, chunks)) for k in range(warm)]
    for i in range(total - warm):
        out.append(("forward", chunk_of(warm + i, True, ranks, chunks), micro_batch_of(warm + i, ranks, chunks)))
        out.append(("backward", chunk_of(i, False, ranks, chunks), micro_batch_of(i, ranks, chunks)))
    for k in range(total - warm, total):
        out.append(("backward", chunk_of(k, False, ranks, chunks), micro_batch_of(k, ranks, chunks)))
    return out


def _train(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    first, last = rank == 0, rank == RANKS - 1
    prev_rank, next_rank = (rank - 1) % RANKS, (rank + 1) % RANKS  # the ring: the wrap joins the last and first
    total = MICRO_BATCHES * CHUNKS
    warm = warmup(rank)
    remaining = total - warm
    models: list[nn.Module] = []
    for c in range(CHUNKS):
        layers: list[nn.Module] = [nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU()]
        if last and c == CHUNKS - 1:
            layers.append(nn.Linear(HIDDEN, CLASSES))
        models.append(nn.Sequential(*layers))
    opt = torch.optim.SGD([p for m in models for p in m.parameters()], lr=0.01)
    gen = torch.Generator().manual_seed(1234)  # the same data on every rank: the first chunk's input, the loss's labels
    trace_dir = Path(out) / "trace" / f"rank_{rank}"
    trace_dir.mkdir(parents=True, exist_ok=True)
    log_dir = Path(out) / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"rank": rank, "ranks": RANKS, "chunks": CHUNKS, "micro_batches": MICRO_BATCHES}
    now = time.monotonic_ns

    def run_step(step_log: dict[str, Any]) -> torch.Tensor:
        xs = [torch.randn(BATCH, HIDDEN, generator=gen) for _ in range(MICRO_BATCHES)]
        ys = [torch.randint(0, CLASSES, (BATCH,), generator=gen) for _ in range(MICRO_BATCHES)]
        received: dict[tuple[int, int], torch.Tensor] = {}  # (chunk, micro-batch) -> activation
        grads: dict[tuple[int, int], torch.Tensor] = {}  # (chunk, micro-batch) -> gradient of its output
        n_in = [0] * CHUNKS  # activations received per chunk (a chunk's micro-batches arrive in order)
        n_grad = [0] * CHUNKS
        inputs: dict[tuple[int, int], torch.Tensor] = {}
        outputs: dict[tuple[int, int], torch.Tensor] = {}
        loss_sum = torch.zeros(1)

        def exchange(
            send_fwd: tuple[int, int, torch.Tensor] | None,
            send_bwd: tuple[int, int, torch.Tensor] | None,
            recv_fwd_chunk: int | None,
            recv_bwd_chunk: int | None,
        ) -> None:
            """Megatron's ``_communicate``: post the exchange's ops together, wait for all. Sends are
            (chunk, micro-batch, tensor); a recv names the chunk it feeds (its micro-batch: the
            chunk's next one)."""
            # in the order of Megatron's batched p2p (``batch_p2p_comm``, its default without overlap):
            # send_prev, recv_prev, send_next, recv_next
            ops: list[tuple[str, str, int, int, int, torch.Tensor]] = []  # kind, direction, peer, chunk, mb, tensor
            if send_bwd is not None:
                ops.append(("send", "backward", prev_rank, *send_bwd))

            def recv(direction: str, peer: int, c: int | None, count: list[int]) -> None:
                if c is not None:
                    ops.append(("recv", direction, peer, c, count[c], torch.empty(BATCH, HIDDEN)))
                    count[c] += 1

            recv("forward", prev_rank, recv_fwd_chunk, n_in)
            if send_fwd is not None:
                ops.append(("send", "forward", next_rank, *send_fwd))
            recv("backward", next_rank, recv_bwd_chunk, n_grad)
            if not ops:
                return
            n = len(step_log["exchanges"])
            t0 = now()
            works = [
                dist.isend(tensor, dst=peer) if kind == "send" else dist.irecv(tensor, src=peer)
                for kind, _d, peer, _c, _k, tensor in ops
            ]
            for w in works:
                w.wait()
            step_log["exchanges"].append({"posted": t0, "done": now()})
            for kind, direction, peer, c, k, tensor in ops:
                step_log["p2p"].append(
                    {
                        "kind": kind,
                        "direction": direction,
                        "peer": peer,
                        "chunk": c,
                        "virtual_stage": c * RANKS + rank,
                        "micro_batch": k,
                        "exchange": n,
                    }
                )
                if kind == "recv":
                    (received if direction == "forward" else grads)[(c, k)] = tensor

        def forward(k: int) -> tuple[int, int, torch.Tensor] | None:
            c, j = chunk_of(k, True), micro_batch_of(k)
            if first and c == 0:
                x = xs[j]
            else:
                x = received.pop((c, j))
                x.requires_grad_()
            inputs[(c, j)] = x
            t0 = now()
            y = models[c](x)
            if last and c == CHUNKS - 1:
                y = nn.functional.cross_entropy(y, ys[j]) / MICRO_BATCHES
                nonlocal loss_sum
                loss_sum = loss_sum + y.detach()
            outputs[(c, j)] = y
            step_log["compute"].append({"kind": "forward", "chunk": c, "micro_batch": j, "start": t0, "end": now()})
            return None if last and c == CHUNKS - 1 else (c, j, y.detach())

        def backward(k: int) -> tuple[int, int, torch.Tensor] | None:
            c, j = chunk_of(k, False), micro_batch_of(k)
            t0 = now()
            if last and c == CHUNKS - 1:
                outputs.pop((c, j)).backward()
            else:
                torch.autograd.backward(outputs.pop((c, j)), grad_tensors=grads.pop((c, j)))
            step_log["compute"].append({"kind": "backward", "chunk": c, "micro_batch": j, "start": t0, "end": now()})
            x = inputs.pop((c, j))
            return None if first and c == 0 else (c, j, x.grad)

        # warm-up
        if not first:
            exchange(None, None, 0, None)  # recv_forward of chunk 0's first micro-batch
        for k in range(warm):
            sent = forward(k)
            nxt = chunk_of(k + 1, True)
            recv_prev = not (first and nxt == 0) and k != total - 1
            if k == warm - 1 and remaining:  # send_forward_backward_recv_forward_backward
                exchange(sent, None, nxt if recv_prev else None, None if last else CHUNKS - 1)
            else:  # send_forward_recv_forward
                exchange(sent, None, nxt if recv_prev else None, None)
        # steady 1F1B
        for i in range(remaining):
            fk = i + warm
            sent_f = forward(fk)
            sent_b = backward(i)
            if first:  # the first rank is ahead of the last by RANKS - 1
                nf = chunk_of(fk - (RANKS - 1), True)
                recv_prev = nf != CHUNKS - 1
                nf += 1
            else:
                nf, recv_prev = chunk_of(fk + 1, True), True
            if last:
                nb = chunk_of(i - (RANKS - 1), False)
                recv_next = nb != 0
                nb -= 1
            else:
                nb, recv_next = chunk_of(i + 1, False), True
            if i == remaining - 1:
                recv_prev = False
            exchange(sent_f, sent_b, nf if recv_prev else None, nb if recv_next else None)
        # cool-down
        if not remaining and not last:
            exchange(None, None, None, CHUNKS - 1)  # recv_backward
        for k in range(remaining, total):
            sent = backward(k)
            nb = chunk_of(k + 1, False)
            recv_next = not (last and nb == CHUNKS - 1) and k != total - 1
            exchange(None, sent, None, nb if recv_next else None)
        return loss_sum

    record["steps"] = profiled_steps(rank, trace_dir, opt, run_step)
    (log_dir / f"rank{rank}.json").write_text(json.dumps(record))
    dist.barrier()  # every rank leaves together (torch 2.13 + gloo can abort when a peer is tearing down)
    dist.destroy_process_group()


def generate(out: Path) -> Path:
    """Run the job into ``out`` (``out/trace``: the profile folder; ``out/log``: the job's record)."""
    return make_pipeline_1f1b.generate(out, _train, RANKS)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(f"generated {generate(Path(sys.argv[1]))}")
