"""Megatron's interleaved 1F1B schedule (virtual pipeline), as a model the traffic of a rank is checked
against: which forward and backward computations (model chunk, micro-batch) run between which of
its exchanges.

A pipeline of ``p`` ranks with ``v`` model chunks per rank runs ``m`` micro-batches through ``p * v``
virtual stages: rank r holds virtual stages r, p + r, ..., (v - 1) p + r, the last rank's
activations of chunk c go to the first rank's chunk c + 1. Megatron's
``forward_backward_pipelining_with_interleaving`` (without overlapped p2p) runs on rank r
``(p - r - 1) * 2 + (v - 1) * p`` warm-up forwards (all ``m * v`` when ``m == p``), then one forward
and one backward at a time, then the cool-down backwards; virtual micro-batch k runs chunk
``(k % (p v)) // p`` (backward: ``v - 1`` less that) on micro-batch ``(k // (p v)) p + k % p``. After
each computation (two in the steady phase) the rank posts one exchange (``_communicate``): the
send of what it computed (none for the last virtual stage's activations or the first's gradients)
and the recvs of what it computes next, by Megatron's rules for the first and last rank; an
exchange with no op is skipped (its computations run on into the next gap).

``schedule`` gives, per exchange of a rank's step, the computations before it and its ops; the
pipeline analysis (``pipeline.pipeline``) labels the work between a rank's exchanges with them
when the exchanges it sees in the trace (ops posted together, their kinds and directions from the
pairing) are the model's, one for one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class Work(NamedTuple):
    kind: str  # "forward" | "backward"
    chunk: int
    micro_batch: int


class Message(NamedTuple):
    kind: str  # "send" | "recv"
    direction: str  # "forward" (activations, to the next virtual stage) | "backward"
    chunk: int  # the chunk on this rank that produced the send or that the recv feeds
    micro_batch: int


class Exchange(NamedTuple):
    work: tuple[Work, ...]  # the computations run since the previous exchange
    ops: tuple[Message, ...]


def chunk_of(k: int, forward: bool, p: int, v: int) -> int:
    """Megatron's ``get_model_chunk_id``: the chunk of virtual micro-batch k."""
    c = (k % (p * v)) // p
    return c if forward else v - c - 1


def micro_batch_of(k: int, p: int, v: int) -> int:
    """The micro-batch of virtual micro-batch k."""
    return (k // (p * v)) * p + k % p


def schedule(rank: int, p: int, v: int, m: int) -> tuple[list[Exchange], tuple[Work, ...]]:
    """Rank ``rank``'s exchanges in one step of Megatron's interleaved 1F1B with ``p`` ranks, ``v``
    chunks and ``m`` micro-batches, and the computations after its last exchange."""
    total = m * v
    warm = total if m == p else min((p - rank - 1) * 2 + (v - 1) * p, total)
    remaining = total - warm
    first, last = rank == 0, rank == p - 1
    out: list[Exchange] = []
    pending: list[Work] = []
    n_in, n_grad = [0] * v, [0] * v  # a chunk's inputs and gradients arrive in micro-batch order

    def work(kind: str, k: int) -> Work:
        w = Work(kind, chunk_of(k, kind == "forward", p, v), micro_batch_of(k, p, v))
        pending.append(w)
        return w

    def exchange(send_f: Work | None, send_b: Work | None, recv_f: int | None, recv_b: int | None) -> None:
        ops = []
        if send_b is not None:
            ops.append(Message("send", "backward", send_b.chunk, send_b.micro_batch))
        if recv_f is not None:
            ops.append(Message("recv", "forward", recv_f, n_in[recv_f]))
            n_in[recv_f] += 1
        if send_f is not None:
            ops.append(Message("send", "forward", send_f.chunk, send_f.micro_batch))
        if recv_b is not None:
            ops.append(Message("recv", "backward", recv_b, n_grad[recv_b]))
            n_grad[recv_b] += 1
        if ops:
            out.append(Exchange(tuple(pending), tuple(ops)))
            pending.clear()

    if not first:
        exchange(None, None, 0, None)
    for k in range(warm):
        f = work("forward", k)
        nxt = chunk_of(k + 1, True, p, v)
        recv_prev = not (first and nxt == 0) and k != total - 1
        recv_next = k == warm - 1 and remaining > 0 and not last
        exchange(
            None if last and f.chunk == v - 1 else f, None, nxt if recv_prev else None, v - 1 if recv_next else None
        )
    for i in range(remaining):
        f, b = work("forward", i + warm), work("backward", i)
        if first:  # the first rank is ahead of the last by p - 1
            nf = chunk_of(i + warm - (p - 1), True, p, v)
            recv_prev, nf = nf != v - 1, nf + 1
        else:
            nf, recv_prev = chunk_of(i + warm + 1, True, p, v), True
        if last:
            nb = chunk_of(i - (p - 1), False, p, v)
            recv_next, nb = nb != 0, nb - 1
        else:
            nb, recv_next = chunk_of(i + 1, False, p, v), True
        recv_prev = recv_prev and i != remaining - 1
        exchange(
            None if last and f.chunk == v - 1 else f,
            None if first and b.chunk == 0 else b,
            nf if recv_prev else None,
            nb if recv_next else None,
        )
    if not remaining and not last:
        exchange(None, None, None, v - 1)
    for k in range(remaining, total):
        b = work("backward", k)
        nb = chunk_of(k + 1, False, p, v)
        recv_next = not (last and nb == v - 1) and k != total - 1
        exchange(None, None if first and b.chunk == 0 else b, None, nb if recv_next else None)
    return out, tuple(pending)


def chunks_from_traffic(inner: int, wrap: int) -> tuple[int, int] | None:
    """``(v, m)`` from the activations a step sends over an inner link (``v * m``) and over the
    wrap (``(v - 1) * m``), None when they fit no interleaved pipeline."""
    if wrap <= 0 or inner <= wrap or inner % (inner - wrap):
        return None
    return inner // (inner - wrap), inner - wrap


def posted_together(call: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The exchange of each of a rank's ops (``call`` and ``end`` in any order): in call order, an
    exchange ends when an op is called after one of it ended (Megatron posts an exchange's ops,
    then waits for all)."""
    order = np.argsort(call, kind="stable")
    group = np.zeros(len(call), np.int64)
    g, reach = 0, None
    for i in order:
        if reach is not None and call[i] > reach:
            g, reach = g + 1, None
        group[i] = g
        reach = end[i] if reach is None else min(reach, end[i])
    return group


Segment = tuple[str, "int | None", "int | None", int, int, "str | None", "int | None"]
Op = tuple[str, str, int, int, int]  # op type, direction, call, end, peer


def cut(
    ops: list[Op],
    start: int,
    phase_end: int,
    rank: int,
    p: int,
    v: int,
    m: int,
    split: Callable[[int, int], int | None],
) -> list[Segment] | None:
    """The segments (kind, micro-batch, chunk, start, end, op, peer) of a rank's step of an
    interleaved pipeline, ``ops`` in call order with their directions, when its exchanges are the
    model's one for one (``schedule``; else None): the work before each exchange is the model's
    computations there (a forward then a backward in the steady phase, split at ``split``: the
    autograd engine's first backward node, or one forward+backward segment without it), each op
    a bubble with the micro-batch and chunk of its message."""
    model, after = schedule(rank, p, v, m)
    group = posted_together(np.array([o[2] for o in ops], np.int64), np.array([o[3] for o in ops], np.int64))
    seen: list[list[Op]] = [[] for _ in range(int(group.max()) + 1)] if len(ops) else []
    for o, g in zip(ops, group):
        seen[int(g)].append(o)
    if len(seen) != len(model) or any(
        sorted((o[0], o[1]) for o in mine) != sorted((x.kind, x.direction) for x in ex.ops)
        for mine, ex in zip(seen, model)
    ):
        return None
    out: list[Segment] = []

    def add(kind: str, k: int | None, c: int | None, a: int, b: int, op: str | None = None, peer: int | None = None):
        if b > a:
            out.append((kind, k, c, a, b, op, peer))

    def work(done: tuple[Work, ...], a: int, b: int) -> None:
        if not done:
            add("other", None, None, a, b)
        elif len(done) == 1:
            add(done[0].kind, done[0].micro_batch, done[0].chunk, a, b)
        elif [w.kind for w in done] == ["forward", "backward"] and (at := split(a, b)) is not None:
            add("forward", done[0].micro_batch, done[0].chunk, a, at)
            add("backward", done[1].micro_batch, done[1].chunk, at, b)
        else:
            said = " + ".join(f"{w.kind} {w.micro_batch}" for w in done)
            kind = done[0].kind if len({w.kind for w in done}) == 1 else "forward+backward"
            add(kind, done[0].micro_batch, done[0].chunk, a, b, said)

    t = start
    for mine, ex in zip(seen, model):
        work(ex.work, t, min(o[2] for o in mine))
        msg = {(x.kind, x.direction): x for x in ex.ops}
        for kind, direction, call, end, peer in mine:
            x = msg[(kind, direction)]
            add("bubble", x.micro_batch, x.chunk, max(call, t), end, f"{kind} {direction}", peer)
            t = max(t, end)
    work(after, t, phase_end)
    return out
