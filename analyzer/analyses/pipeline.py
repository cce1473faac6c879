"""Pipeline parallelism without instrumentation: send → recv pairs across ranks, and per pipeline
stage the forward / backward micro-batches and the bubbles between them.

msprof-analyze's ``pp_chart`` needs mstx ranges the user puts around each forward and backward in
the schedule code. Here the schedule is read off the point-to-point traffic instead:

1. *Pipelines*. The ``pp`` groups of the inferred layout (``parallel_layout``), their ranks by
   stage; without a PP dimension (a job whose only group is the world, gloo p2p attributed to no
   group) they are read off the traffic (``_traffic_chains``): a first stage is a rank whose step
   starts with a send (every other stage first waits for its input), the next stage the rank
   whose traffic pairs with what the current one has left, and so on (with the peers named, see
   2, the peer of the first stage's first send, then each stage's other neighbour: ``_peer_chains``).
2. *Pairs* (``send_recv_pairs``). Where the trace names the peer of every op (torch's
   c10d::send / recv_ with record_shapes: ``operators.peer``, carried to the op by
   ``collectives.with_call_times``), per link and direction the sender's sends to the receiver pair
   with the receiver's recvs from the sender in order (``_peer_pairs``): no timing, so no load
   sensitivity. Otherwise, from timing: gloo's ranges name neither peer nor direction, activations and
   gradients often have one size, and a middle stage of a 1F1B schedule sends to one neighbour
   while it receives from it or from the other (Megatron posts both, then waits). What holds: a
   send and its recv were both called before either ended (the message moves while both wait);
   messages between two ranks arrive in the order sent; a stage forwards no micro-batch it has not
   received, nor sends a gradient back before receiving it (the last stage: before its forward).
   The first stage only sends forward and receives backward, the last the reverse. Per step each
   middle stage's sends and recvs are labelled (``_label``: a dynamic programme over its ops in call
   order, most pairs then least rendezvous slack) from its predecessor, then refined from both
   neighbours; the labelled ops pair in order. Clocks: the fitted offsets (``clock_alignment``);
   when their residuals exceed ``TOLERANCE_NS`` (a fit from a few collectives), each link's shift
   is the one (scanned within the residuals, or the ranks' own clocks) under which the link and
   the next pair best.
3. *Direction*. A send to the next stage carries activations (forward), one to the previous stage
   gradients (backward); a recv is forward when it comes from the previous stage. The k-th op of a
   (kind, direction) in a rank's step is micro-batch k.
4. *Segments* (``pipeline``). A stage's step is cut at its p2p ops. Each op, from the call to the
   end of its range (the calling thread waits on it), is time the stage is blocked on its
   neighbour: **bubble**. The work between two ops belongs to the micro-batch it produces or
   consumes: the work before a send is that send's micro-batch and direction (forward k before the
   activation send k); work after a recv that ends at another recv (or at the end of the pipeline
   phase) consumed that recv (the last stage's forward k after recv k; the first stage's backward
   k after the gradient recv k). Forward and backward that meet with no p2p op between (the last
   stage in 1F1B: forward k then backward k; the first stage: backward j then forward k) are split
   where the trace shows the autograd engine (``autograd::engine::evaluate_function: ...``, torch
   and torch_npu alike): at its first backward node, or after its last; a trace without those
   names keeps them as one **forward+backward** segment. Work
   before the first op that ends in a recv, or between a send and a recv, is **other** (it feeds no
   micro-batch). The pipeline phase ends at the rank's first non-p2p collective after its last p2p
   op (the data-parallel gradient reduction) or at its step end.
5. *Per stage* (``pipeline_stages``): per (rank, step) the micro-batches seen in each direction,
   forward, backward and bubble time, and the bubble's share of the pipeline phase.
6. *Interleaved pipelines* (virtual pipeline: each rank holds v model chunks, the last stage sends
   activations on to the first). When a chain leaves ops of its first or last stage unpaired, the
   stages are tried as a ring (``_ring_step_pairs``): the counts tell whether a wrap fits (inner
   links ``v * m`` each way, the wrap ``(v - 1) * m``: ``_wraps``), each rank is labelled alone by
   causality and the order of its exchanges, then from its neighbours; the ring is kept when it
   pairs more. Such a step's segments come from Megatron's schedule (``interleaved``) when the
   rank's exchanges are the model's, with each segment's ``chunk``.

Times are on each rank's own clock (``start_ns``) and on the reference clock (``aligned_start_ns``:
minus the rank's clock offset, where it could be estimated).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..store import Store
from .activity import run_host_steps
from .cache import per_run
from .clock_alignment import clock_offsets, run_alignment
from .interleaved import chunks_from_traffic, posted_together
from .interleaved import cut as cut_interleaved
from .parallel_layout import parallel_layout

TOLERANCE_NS = 200_000

PAIR_COLUMNS = [
    "src_rank",
    "dst_rank",
    "src_stage",
    "dst_stage",
    "pp_group",
    "direction",
    "step",
    "bytes",
    "send_ts_ns",
    "send_end_ns",
    "recv_ts_ns",
    "recv_end_ns",
    "send_name",
    "recv_name",
]
SEGMENT_COLUMNS = [
    "rank",
    "stage",
    "pp_group",
    "n_stages",
    "step",
    "kind",
    "micro_batch",
    "start_ns",
    "end_ns",
    "dur_ns",
    "aligned_start_ns",
    "op",
    "peer",
    "chunk",
]
STAGE_COLUMNS = [
    "rank",
    "stage",
    "pp_group",
    "n_stages",
    "step",
    "forward_micro_batches",
    "backward_micro_batches",
    "forward_ns",
    "backward_ns",
    "forward_backward_ns",
    "other_ns",
    "bubble_ns",
    "phase_ns",
    "bubble_pct",
    "chunks",
]


def _layout_chains(store: Store, run: str) -> list[list[int]]:
    """The pipelines of the inferred layout (``pp`` dimension): per PP group its ranks by stage."""
    lay = parallel_layout(store, run)
    if "pp" not in lay.columns or not lay["pp"].notna().any():
        return []
    lay = lay.dropna(subset=["pp", "pp_group"])
    return [[int(r) for r in g.sort_values("pp")["rank"]] for _, g in lay.groupby("pp_group", sort=True)]


def _p2p_ops(store: Store, run: str) -> pd.DataFrame:
    ops = run_alignment(store, run).ops
    p = ops.loc[ops["is_p2p"] & ops["op_type"].isin(("send", "recv"))].copy()
    p["call"] = p["call_ns"].astype("Int64").fillna(p["ts_ns"]).astype("int64") if len(p) else p["ts_ns"]
    return p.sort_values(["rank", "ts_ns"], kind="stable").reset_index(drop=True)


def _offsets(store: Store, run: str) -> tuple[dict[int, int], dict[int, int]]:
    off = clock_offsets(store, run)
    offset = {int(r): int(o) for r, o in zip(off["rank"], off["offset_ns"]) if pd.notna(o)}
    resid = {int(r): int(x) for r, x in zip(off["rank"], off["residual_p90_ns"]) if pd.notna(x)}
    return offset, resid


def send_recv_pairs(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per send paired with its recv on another rank (see the module doc): ranks, stages,
    direction (forward: to the next stage), step, size, both ranges on their ranks' own clocks."""
    return _pairing(store, run)[PAIR_COLUMNS]


class _Ops:
    """One rank's sends or recvs of one step in call order, on the aligned clock, as arrays."""

    def __init__(self, g: pd.DataFrame) -> None:
        self.row = g.index.to_numpy(np.int64)
        self.call = g["a_call"].to_numpy(np.int64)
        self.end = g["a_end"].to_numpy(np.int64)
        self.bytes = g["bytes"].astype("Int64").fillna(-1).to_numpy(np.int64)

    def take(self, keep: np.ndarray) -> _Ops:
        out = object.__new__(_Ops)
        out.row, out.call, out.end, out.bytes = self.row[keep], self.call[keep], self.end[keep], self.bytes[keep]
        return out

    def shifted(self, d: int) -> _Ops:
        out = self.take(np.ones(len(self.row), bool))
        out.call, out.end = out.call + d, out.end + d
        return out

    def __len__(self) -> int:
        return len(self.row)


_EMPTY = pd.DataFrame({"a_call": [], "a_end": [], "bytes": []})
_SCALE = 1 << 32  # a matched pair outweighs any sum of end gaps (each capped at 1 s, in µs)


def _align(send: _Ops, recv: _Ops, tol: int) -> list[tuple[int, int]]:
    """The sends of one rank to one peer as an ordered subsequence of the peer's recvs (messages
    between two ranks arrive in the order sent): most pairs first, then the smallest sum of gaps
    between the two ends. A send and a recv can pair when both were called before either ended
    (the message moves while both wait; ``tol`` for the clocks) and their sizes agree. Returns
    (send position, recv position) pairs."""
    n, m = len(send), len(recv)
    if not n or not m:
        return []
    ok = np.maximum.outer(send.call, recv.call) <= np.minimum.outer(send.end, recv.end) + tol
    ok &= (send.bytes[:, None] == recv.bytes[None, :]) | (send.bytes[:, None] < 0) | (recv.bytes[None, :] < 0)
    gap = np.minimum(np.abs(send.end[:, None] - recv.end[None, :]) // 1000, 1_000_000)
    w = np.where(ok, _SCALE - gap, np.iinfo(np.int64).min // 4)
    f = np.zeros((n + 1, m + 1), np.int64)  # f[i, j]: best value of the first i sends in the first j recvs
    for i in range(1, n + 1):
        h = np.maximum(f[i - 1, 1:], f[i - 1, :-1] + w[i - 1])
        f[i, 1:] = np.maximum.accumulate(h)
    out = []
    i, j = n, m
    while i > 0 and j > 0:
        if f[i, j] == f[i, j - 1]:
            j -= 1
        elif f[i, j] == f[i - 1, j]:
            i -= 1
        else:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
    return out[::-1]


_NEG = -(1 << 60)


def _weights(send: _Ops, recv: _Ops, tol: int) -> np.ndarray:
    """Pair weights, send x recv: ``_SCALE`` less the rendezvous slack in µs (the time between the
    later call and the earlier end: the message moves once both are called and the first side
    returns when it has moved), ``_NEG`` where they cannot pair (one ended before the other was
    called, beyond ``tol``, or the sizes differ)."""
    if not len(send) or not len(recv):
        return np.full((len(send), len(recv)), _NEG, np.int64)
    later = np.maximum.outer(send.call, recv.call)
    first_end = np.minimum.outer(send.end, recv.end)
    ok = later <= first_end + tol
    ok &= (send.bytes[:, None] == recv.bytes[None, :]) | (send.bytes[:, None] < 0) | (recv.bytes[None, :] < 0)
    slack = np.minimum(np.abs(first_end - later) // 1000, 1_000_000)
    return np.where(ok, _SCALE - slack, _NEG)


Labels = tuple[np.ndarray, np.ndarray]  # a stage's (sends that go backward, recvs that come forward)


def _label(
    fwd: _Ops | None,
    bwd: _Ops | None,
    sends: _Ops,
    recvs: _Ops,
    tol: int,
    right: tuple[_Ops, _Ops] | None = None,
    last: bool | None = None,
    wrap: str | None = None,
    sends_prev_first: bool = True,
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """A stage's sends and recvs labelled from its neighbours' traffic (gloo's ranges name no
    peer): which recvs carry the previous stage's forward sends ``fwd`` (in order) and which sends
    its backward recvs ``bwd`` (in order); the others are the stage's own forward sends and
    backward recvs with the next stage, paired with ``right`` (that stage's backward sends and
    forward recvs) when it is known (``fwd`` and ``bwd`` None: labelled from the next stage
    alone). Every op gets a partner where one is known, each pair can
    meet in time (``_weights``), and the stage keeps causality in its own call order: it sends no
    more micro-batches forward than it has received forward, nor backward than it has received
    backward; a last stage (``last``; by default one with nothing left over) sends the j-th
    gradient only after its j-th forward recv. Among such labellings the one with the least
    rendezvous slack. In a ring (an interleaved pipeline, ``wrap``) the first rank (``"head"``)
    sends its first chunk's activations without receiving them, and the last rank (``"tail"``)
    sends its last chunk's gradients after that chunk's forward alone: the head's forward sends are
    not bounded by its forward recvs, the tail's backward sends by its forward recvs (as a last
    stage's). Returns the masks (sends that go backward, recvs that come forward) and the
    labelling's value (pairs x ``_SCALE`` less the slack), or None when no labelling fits."""
    if fwd is None or bwd is None:  # labelled from the next stage alone
        if right is None:
            return None
        nf, nb = len(recvs) - len(right[0]), len(sends) - len(right[1])
        if nf < 0 or nb < 0:
            return None
        wf, wb = np.zeros((nf, len(recvs)), np.int64), np.zeros((len(sends), nb), np.int64)
    else:
        nf, nb = len(fwd), len(bwd)
        wf = _weights(fwd, recvs, tol)  # fwd i x recv
        wb = _weights(sends, bwd, tol)  # send x bwd j
    if last is None:
        last = right is None and len(recvs) <= nf and len(sends) <= nb
    if last and (len(recvs) != nf or len(sends) != nb):
        return None
    if right is not None and (len(recvs) != nf + len(right[0]) or len(sends) != nb + len(right[1])):
        return None
    lead_s, trail_s, lead_r, trail_r = _posted_first(sends, recvs, sends_prev_first) if wrap else (0, 0, 0, 0)
    wrb = _weights(right[0], recvs, tol) if right is not None else None  # right's backward send x recv
    wrf = _weights(sends, right[1], tol) if right is not None else None  # send x right's forward recv
    # in a ring a recv counts from its end (a recv still under way when a send is called fed nothing
    # it sends: Megatron posts a send and the next recv together), elsewhere from its call
    at = recvs.end if wrap is not None else recvs.call
    order = sorted([(int(c), 1, k) for k, c in enumerate(at)] + [(int(c), 0, k) for k, c in enumerate(sends.call)])
    ii = np.arange(nf + 1)[:, None]
    jj = np.arange(nb + 1)[None, :]
    v = np.full((nf + 1, nb + 1), _NEG, np.int64)
    v[0, 0] = 0
    live = _NEG // 2
    choices = []
    n_r = n_s = 0
    for _, is_recv, k in order:
        new = np.full_like(v, _NEG)
        pick = np.zeros(v.shape, np.int8)  # 1: paired with the previous stage, 2: with the next
        if is_recv:
            ok = (v[:-1, :] > live) & (wf[:, k][:, None] > live)
            if wrap in ("head", "middle"):  # in a ring each activation received is sent on after it arrived
                ok &= n_s - jj <= len(sends) - nb - nf + ii[:-1]
            new[1:, :] = np.where(ok, v[:-1, :] + wf[:, k][:, None] + _at(lead_r, k), _NEG)
            pick[1:, :] = np.where(ok, 1, 0)
            if not last:  # a backward recv from the next stage: its (n_r - i)-th
                own = v.copy()
                if wrb is not None:
                    kk = n_r - ii[:, 0]
                    valid = (kk >= 0) & (kk < wrb.shape[0])
                    w = np.where(valid, wrb[np.clip(kk, 0, max(wrb.shape[0] - 1, 0)), k] if wrb.size else _NEG, _NEG)
                    own = np.where((v > live) & (w[:, None] > live), v + w[:, None], _NEG)
                own = np.where(own > live, own + _at(trail_r, k), _NEG)
                if wrap in ("tail", "middle"):  # and each gradient received, sent back after it arrived
                    own = np.where(jj <= nb - len(recvs) + nf + n_r - ii, own, _NEG)
                better = own > new
                new = np.where(better, own, new)
                pick = np.where(better, 2, pick)
            n_r += 1
        else:
            causal = (jj[:, 1:] <= ii) if last or wrap == "tail" else (jj[:, 1:] <= (n_r - ii))  # after its input
            ok = (v[:, :-1] > live) & (wb[k, :][None, :] > live) & causal
            new[:, 1:] = np.where(ok, v[:, :-1] + wb[k, :][None, :] + _at(lead_s, k), _NEG)
            pick[:, 1:] = np.where(ok, 1, 0)
            if not last:  # a forward send to the next stage (its (n_s - j)-th), of a micro-batch received
                own = np.where((v > live) & ((n_s - jj + 1 <= ii) | (wrap == "head")), v, _NEG)
                if wrf is not None:
                    ll = n_s - jj[0]
                    valid = (ll >= 0) & (ll < wrf.shape[1])
                    w = np.where(valid, wrf[k, np.clip(ll, 0, max(wrf.shape[1] - 1, 0))] if wrf.size else _NEG, _NEG)
                    own = np.where((own > live) & (w[None, :] > live), own + w[None, :], _NEG)
                own = np.where(own > live, own + _at(trail_s, k), _NEG)
                better = own > new
                new = np.where(better, own, new)
                pick = np.where(better, 2, pick)
            n_s += 1
        v = new
        choices.append(pick)
    if v[nf, nb] <= live:
        return None
    send_b = np.zeros(len(sends), bool)
    recv_f = np.zeros(len(recvs), bool)
    i, j = nf, nb
    for (_, is_recv, k), pick in zip(reversed(order), reversed(choices)):
        if pick[i, j] == 1:
            if is_recv:
                i -= 1
                recv_f[k] = True
            else:
                j -= 1
                send_b[k] = True
    return send_b, recv_f, int(v[nf, nb])


FIRST = _SCALE // 4  # an exchange's order: below one pair, above any sum of slack


def _at(bonus: np.ndarray | int, k: int) -> int:
    return int(bonus[k]) if isinstance(bonus, np.ndarray) else 0


def _posted_first(
    sends: _Ops, recvs: _Ops, sends_prev_first: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where the timing cannot tell, the order of an exchange: the ops a stage posts together (each
    called before any of them ended: Megatron's ``_communicate`` posts them all, then waits) trade
    with the previous stage first (Megatron's batched p2p: send_prev, recv_prev, send_next,
    recv_next). Returns the bonus (``FIRST``) of a send with the previous stage, of one with the
    next, and the same for the recvs: in an exchange with two sends, the first gets the bonus as
    the previous stage's, the other as the next's; a send alone in its exchange, none."""
    call = np.concatenate([sends.call, recvs.call])
    is_recv = np.concatenate([np.zeros(len(sends), bool), np.ones(len(recvs), bool)])
    order = np.argsort(call, kind="stable")
    group = posted_together(call, np.concatenate([sends.end, recvs.end]))
    out = []
    for kind in (False, True):
        idx = order[is_recv[order] == kind]
        first = np.zeros(len(call), bool)
        many = np.zeros(len(call), bool)
        seen: dict[int, int] = {}
        for i in idx:
            seen[group[i]] = seen.get(group[i], 0) + 1
            first[i] = seen[group[i]] == 1
        for i in idx:
            many[i] = seen[group[i]] > 1
        sl = slice(len(sends), None) if kind else slice(0, len(sends))
        lead = first if kind or sends_prev_first else ~first
        out += [np.where(many & lead, FIRST, 0)[sl], np.where(many & ~lead, FIRST, 0)[sl]]
    return out[0], out[1], out[2], out[3]


def _link(
    fwd: _Ops, bwd: _Ops, nxt_send: _Ops, nxt_recv: _Ops, tol: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], _Ops, _Ops]:
    """One link of a pipeline seen from the stage before it (``_label``; when no labelling fits,
    e.g. a step cut short, each direction aligned alone, ``_align``). Returns the forward pairs
    (send row, recv row), the backward pairs, and what the next stage has left: its forward sends
    and backward recvs."""
    got = _label(fwd, bwd, nxt_send, nxt_recv, tol)
    if got is not None:
        send_b, recv_f = got[0], got[1]
    else:
        send_b, recv_f = np.zeros(len(nxt_send), bool), np.zeros(len(nxt_recv), bool)
        send_b[[i for i, _ in _align(nxt_send, bwd, tol)]] = True
        recv_f[[j for _, j in _align(fwd, nxt_recv, tol)]] = True
    fr, bs = nxt_recv.take(recv_f), nxt_send.take(send_b)
    f = [(int(fwd.row[i]), int(fr.row[j])) for i, j in _align(fwd, fr, tol)]
    b = [(int(bs.row[i]), int(bwd.row[j])) for i, j in _align(bs, bwd, tol)]
    return f, b, nxt_send.take(~send_b), nxt_recv.take(~recv_f)


MAX_SCAN = 80
SHIFT_STEPS = 8  # steps a link's clock shift is chosen on
REFINE = 2  # backward-and-forward passes labelling each middle stage from both neighbours


def _shift(sides: list[tuple[_Ops, _Ops, _Ops, _Ops]], raw: int, spread: int) -> int:
    """The shift of the next stage's clock against the stage's under which their traffic pairs
    best over the steps ``sides`` (forward sends, backward recvs, next stage's sends, next stage's
    recvs; ``_label`` with ``TOLERANCE_NS``). Candidates: none (the fitted clock offsets), ``raw``
    (the ranks' own clocks), and, when the fit is uncertain (``spread``, both ranks' residuals,
    above the tolerance: a fit from a few collectives can be off by milliseconds, more than the
    rendezvous of two ops), a scan of ±spread. Of the candidates that pair the most: the ranks'
    own clocks when the fit is uncertain (no shift without evidence for it: ranks of one host share
    a clock), else the fit, else the middle one of the scan: the true shift lies inside the range
    where every pair can meet, and its edges are where a wrong labelling starts to fit as well (the
    slack is no guide: it shrinks towards an edge)."""
    cands = [0, raw]
    if spread > TOLERANCE_NS:
        step = max(TOLERANCE_NS // 2, (2 * spread) // MAX_SCAN)
        cands += list(range(-spread, spread + 1, step))
    count = {}
    for d in dict.fromkeys(cands):
        n = 0
        for fwd, bwd, snd, rcv in sides:
            got = _label(fwd, bwd, snd.shifted(d), rcv.shifted(d), TOLERANCE_NS)
            n += int(got[0].sum() + got[1].sum()) if got is not None else 0
        count[d] = n
    most = max(count.values())
    if spread > TOLERANCE_NS and count[raw] == most:
        return raw
    if count[0] == most:
        return 0
    best = sorted(d for d in count if count[d] == most)
    return best[(len(best) - 1) // 2]


def _chain_pairs(
    chain: list[int], side: dict[int, list[dict[str, _Ops]]], offset: dict[int, int], resid: dict[int, int]
) -> list[tuple[int, int, int, int]]:
    """The pairs of one pipeline: (stage, direction code 0 = forward / 1 = backward, send row,
    recv row).

    1. Clocks, link by link from the first stage (``_shift``).
    2. Labels: the first stage only sends forward and receives backward, the last the reverse;
       each middle stage of the first half is labelled from the stage before it (``_label``), of
       the second half from the stage after it, then, ``REFINE`` times, from both neighbours,
       backward then forward: a middle stage's traffic can fit one neighbour's more than one
       way (a neighbour waiting long in an exchange overlaps everything), the other's tells which.
    3. Pairs: per link and direction the labelled sends and recvs in order (``_align``)."""
    steps = sorted(side)
    n = len(chain)
    sample = steps[:: max(1, len(steps) // SHIFT_STEPS)][:SHIFT_STEPS]
    shift = [0] * n

    def ops(s: int, m: int, d: int) -> tuple[_Ops, _Ops]:
        return side[s][m]["send"].shifted(d), side[s][m]["recv"].shifted(d)

    state = {s: (side[s][0]["send"], side[s][0]["recv"]) for s in steps}  # on the first stage's clock
    for st in range(n - 1):
        a, z = chain[st], chain[st + 1]
        raw = offset.get(z, 0) - offset.get(a, 0)  # the two ranks on their own clocks
        sides = [(*state[s], *ops(s, st + 1, shift[st])) for s in sample]
        shift[st + 1] = shift[st] + _shift(sides, raw, resid.get(a, 0) + resid.get(z, 0))
        for s in steps:
            _, _, fwd, bwd = _link(*state[s], *ops(s, st + 1, shift[st + 1]), TOLERANCE_NS)
            state[s] = (fwd, bwd)
    mine = {s: [ops(s, m, shift[m]) for m in range(n)] for s in steps}
    per_step = {s: _step_pairs(mine[s]) for s in steps}
    rows = [r for s in steps for r in per_step[s]]
    if n < 3 or all(len(per_step[s]) * 2 == sum(len(x) + len(y) for x, y in mine[s]) for s in steps):
        return rows
    # the first stage's or the last's ops left over: an interleaved pipeline? (``_ring_step_pairs``,
    # with either order of an exchange's sends, the one that pairs the most)
    best: tuple[int, int, list[tuple[int, int, int, int]]] = (len(rows), 0, rows)
    for prev_first in (True, False):
        ring: list[tuple[int, int, int, int]] = []
        value = 0
        for s in steps:
            got = _ring_step_pairs(mine[s], prev_first)
            ring += got[0]
            value += got[1]
        if any(st == n - 1 for st, *_ in ring) and (len(ring), value) > best[:2]:
            best = (len(ring), value, ring)
    return best[2]


def _step_pairs(mine: list[tuple[_Ops, _Ops]]) -> list[tuple[int, int, int, int]]:
    """Steps 2 and 3 of ``_chain_pairs`` for one step: per stage its (sends, recvs) on the
    pipeline's clock. The middle stages are first labelled from one side (those before ``split``
    from the first stage on, the others from the last stage back), then refined; of the splits
    (half and half, all from the first, all from the last stage) the one whose labels pair the
    most ops in time and order: one stage labelled wrongly from one side can hold its neighbour's
    refinement to the same mistake, which then leaves ops without a partner."""
    n = len(mine)
    best: list[tuple[int, int, int, int]] = []
    for split in dict.fromkeys((n // 2, n - 1, 1)):
        rows = _pairs_from(mine, split)
        if len(rows) > len(best):
            best = rows
    return best


def _pairs_from(mine: list[tuple[_Ops, _Ops]], split: int) -> list[tuple[int, int, int, int]]:
    """``_step_pairs`` for one ``split``."""
    n = len(mine)
    lab: list[Labels] = [(np.zeros(len(mine[0][0]), bool), np.zeros(len(mine[0][1]), bool))]
    lab += [(np.ones(len(snd), bool), np.ones(len(rcv), bool)) for snd, rcv in mine[1:]]

    def fwd_of(m: int) -> tuple[_Ops, _Ops]:  # a stage's forward sends and backward recvs
        return mine[m][0].take(~lab[m][0]), mine[m][1].take(~lab[m][1])

    def bwd_of(m: int) -> tuple[_Ops, _Ops]:  # a stage's backward sends and forward recvs
        return mine[m][0].take(lab[m][0]), mine[m][1].take(lab[m][1])

    for m in [*range(1, split), *range(n - 2, split - 1, -1)]:
        if m < split:
            got = _label(*fwd_of(m - 1), *mine[m], TOLERANCE_NS, last=False)
            if got is None:
                f, b, _, _ = _link(*fwd_of(m - 1), *mine[m], TOLERANCE_NS)
                got = (np.isin(mine[m][0].row, [x for x, _ in b]), np.isin(mine[m][1].row, [y for _, y in f]), 0)
        else:
            got = _label(None, None, *mine[m], TOLERANCE_NS, right=bwd_of(m + 1), last=False)
            if got is None:
                bs, fr = bwd_of(m + 1)
                s_f = np.isin(mine[m][0].row, [mine[m][0].row[i] for i, _ in _align(mine[m][0], fr, TOLERANCE_NS)])
                r_b = np.isin(mine[m][1].row, [mine[m][1].row[j] for _, j in _align(bs, mine[m][1], TOLERANCE_NS)])
                got = (~s_f, ~r_b, 0)
        lab[m] = (got[0], got[1])
    for _ in range(REFINE):
        for m in [*range(n - 2, 0, -1), *range(1, n - 1)]:
            got = _label(*fwd_of(m - 1), *mine[m], TOLERANCE_NS, right=bwd_of(m + 1), last=False)
            if got is not None:
                lab[m] = (got[0], got[1])
    rows = []
    for m in range(n - 1):
        fs, br = fwd_of(m)
        bs, fr = bwd_of(m + 1)
        rows += [(m, 0, int(fs.row[i]), int(fr.row[j])) for i, j in _align(fs, fr, TOLERANCE_NS)]
        rows += [(m, 1, int(bs.row[i]), int(br.row[j])) for i, j in _align(bs, br, TOLERANCE_NS)]
    return rows


def _ring_step_pairs(
    mine: list[tuple[_Ops, _Ops]], sends_prev_first: bool = True
) -> tuple[list[tuple[int, int, int, int]], int]:
    """The pairs of one step of an interleaved pipeline (``_chain_pairs``): the stages form a ring,
    the last sending activations to the first (its next chunk) and the first gradients back to the
    last; every rank then trades with both neighbours and none is known to send only forward.
    On every link as many gradients go back as activations went forward, so the counts leave one
    unknown, ``w``: the messages each way across the wrap; from it, each rank's count with its
    previous neighbour. For each ``w`` every rank is labelled alone (``_alone``: by the order of its
    exchanges and causality), and for the ``WRAPS`` values whose labellings fit best, refined,
    ``REFINE`` + 1 times, from both neighbours (``_label``, the first rank ``"head"``, the last
    ``"tail"``); kept: the labelling that pairs the most, then with the best value. Rows as
    ``_pairs_from``'s, the wrap link's stage the last one, and the labelling's value.
    ``sends_prev_first``: the order of an exchange's sends (``_posted_first``)."""
    n = len(mine)
    if any(len(s) != len(r) for s, r in mine):  # a link's sends and recvs do not balance: no ring
        return [], 0
    fits = []
    for w in _wraps([len(r) for _, r in mine]):
        prev, labs, total = w, [], 0
        for m in range(n):
            got = _alone(mine[m], prev, WRAP_MODES[(m > 0) + (m == n - 1)], sends_prev_first)
            if got is None:
                break
            labs.append((got[0], got[1]))
            total += got[2]
            prev = len(mine[m][1]) - prev  # the next rank's count with this one
        if len(labs) == n and prev == w:
            fits.append((total, w, labs))
    best: tuple[int, int, list[tuple[int, int, int, int]]] = (0, 0, [])
    for _, _, labs in sorted(fits, key=lambda x: (-x[0], x[1]))[:WRAPS]:
        rows, value = _ring_pairs_from(mine, labs, sends_prev_first)
        if (len(rows), value) > best[:2]:
            best = (len(rows), value, rows)
    return best[2], best[1]


WRAPS = 3  # starts tried for an interleaved pipeline's step


def _wraps(recvs: list[int]) -> list[int]:
    """The messages each way across the wrap of an interleaved pipeline whose ranks receive
    ``recvs`` messages in a step: every chunk crosses every inner link, all but the last the wrap,
    so each inner link carries ``v * m`` each way and the wrap ``(v - 1) * m`` (``v`` >= 2 chunks,
    ``m`` micro-batches); a rank receives from its previous neighbour what it sends back, so with
    ``w`` across the wrap the next link carries ``recvs[0] - w``, the one after ``recvs[1]`` less
    that, and so on round the ring."""
    out = []
    for w in range(1, recvs[0]):
        links, prev = [], w
        for r in recvs[:-1]:
            prev = r - prev
            links.append(prev)
        inner = links[0]
        if inner > w and all(x == inner for x in links) and recvs[-1] - inner == w and inner % (inner - w) == 0:
            out.append(w)
    return out


WRAP_MODES = ("head", "middle", "tail")


def _anything(n: int) -> _Ops:
    """``n`` ops that can meet any op (a neighbour not known yet)."""
    far = np.iinfo(np.int64).max // 2
    out = object.__new__(_Ops)
    out.row, out.call, out.end, out.bytes = np.full(n, -1), np.full(n, -far), np.full(n, far), np.full(n, -1)
    return out


def _alone(
    mine: tuple[_Ops, _Ops], w: int, mode: str, sends_prev_first: bool = True
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """A rank of a ring labelled without its neighbours: ``w`` sends back to the previous rank and
    ``w`` recvs from it, by the order of its exchanges and causality alone (``_label``)."""
    snd, rcv = mine
    if w > len(snd) or w > len(rcv):
        return None
    right = (_anything(len(rcv) - w), _anything(len(snd) - w))
    return _label(
        _anything(w),
        _anything(w),
        snd,
        rcv,
        TOLERANCE_NS,
        right=right,
        last=False,
        wrap=mode,
        sends_prev_first=sends_prev_first,
    )


def _ring_pairs_from(
    mine: list[tuple[_Ops, _Ops]], lab: list[Labels], sends_prev_first: bool = True
) -> tuple[list[tuple[int, int, int, int]], int]:
    """``_ring_step_pairs`` from the ranks' labels ``lab``: the rows and the labelling's value."""
    n = len(mine)
    lab = list(lab)
    value = [0] * n
    wrap = ["head"] + ["middle"] * (n - 2) + ["tail"]
    kw = {"last": False, "sends_prev_first": sends_prev_first}

    def fwd_of(m: int) -> tuple[_Ops, _Ops]:  # a stage's forward sends and backward recvs
        return mine[m][0].take(~lab[m][0]), mine[m][1].take(~lab[m][1])

    def bwd_of(m: int) -> tuple[_Ops, _Ops]:  # a stage's backward sends and forward recvs
        return mine[m][0].take(lab[m][0]), mine[m][1].take(lab[m][1])

    for _ in range(REFINE + 1):
        for m in [0, *range(n - 1, 0, -1), *range(1, n)]:
            left, right = fwd_of((m - 1) % n), bwd_of((m + 1) % n)
            got = _label(*left, *mine[m], TOLERANCE_NS, right=right, wrap=wrap[m], **kw)
            if got is None:  # a neighbour labelled wrongly: from the other alone
                one = [
                    _label(*left, *mine[m], TOLERANCE_NS, wrap=wrap[m], **kw),
                    _label(None, None, *mine[m], TOLERANCE_NS, right=right, wrap=wrap[m], **kw),
                ]
                got = max((x for x in one if x is not None), key=lambda x: x[2], default=None)
            if got is not None:
                lab[m], value[m] = (got[0], got[1]), got[2]
    rows = []
    for m in range(n):
        fs, br = fwd_of(m)
        bs, fr = bwd_of((m + 1) % n)
        rows += [(m, 0, int(fs.row[i]), int(fr.row[j])) for i, j in _align(fs, fr, TOLERANCE_NS)]
        rows += [(m, 1, int(bs.row[i]), int(br.row[j])) for i, j in _align(bs, br, TOLERANCE_NS)]
    return rows, sum(value)


SHORTLIST = 4  # next-stage candidates labelled in full when the traffic stages a pipeline


def _shortlist(per: dict, state: dict, free: list[int], tol: int) -> list[int]:
    """The few ranks most likely next in a pipeline read off the traffic: most of the current
    stage's forward sends with a recv of theirs that could meet them in time, and backward recvs
    with such a send (any order; cheap beside ``_label``, which then decides among them)."""
    live = _NEG // 2
    score = {}
    for b in free:
        n = 0
        for s, (fwd, bwd) in state.items():
            mine = per.get((b, s))
            if mine:
                n += int((_weights(fwd, mine["recv"], tol) > live).any(axis=1).sum())
                n += int((_weights(mine["send"], bwd, tol) > live).any(axis=0).sum())
        if n:
            score[b] = n
    return sorted(score, key=lambda b: (-score[b], b))[:SHORTLIST]


def _per_step(
    store: Store, run: str
) -> tuple[pd.DataFrame, dict[tuple[int, int], dict[str, _Ops]], dict[int, int], dict[int, int], int]:
    """The p2p ops (with ``a_call`` / ``a_end`` on the aligned clock), per (rank, step) its sends
    and recvs in call order, the clock offsets and residuals, and the tolerance of a rendezvous."""
    ops = _p2p_ops(store, run)
    offset, resid = _offsets(store, run) if not ops.empty else ({}, {})
    per: dict[tuple[int, int], dict[str, _Ops]] = {}
    if not ops.empty:
        shift = ops["rank"].map(lambda r: offset.get(int(r), 0))
        ops["a_call"], ops["a_end"] = ops["call"] - shift, ops["end_ns"] - shift
        ops["_step"] = ops["step"].astype("Int64").fillna(-1)
        for (r, s), g in ops.groupby(["rank", "_step"], sort=True):
            g = g.sort_values("a_call", kind="stable")
            per[(int(r), int(s))] = {k: _Ops(g[g["op_type"] == k]) for k in ("send", "recv")}
    return ops, per, offset, resid, TOLERANCE_NS + 2 * max(resid.values(), default=0)


def traffic_chains(store: Store, run: str) -> list[list[int]]:
    """The pipelines the send/recv traffic of ``run`` forms, each its ranks by stage
    (``_traffic_chains``), whatever the layout says: how ``parallel_layout`` finds the PP
    dimension of a job whose only group is the world."""
    ops, per, _offset, _resid, tol = _per_step(store, run)
    return _traffic_chains(per, sorted({int(r) for r in ops["rank"]}), tol, _named_peers(ops)) if per else []


def _named_peers(ops: pd.DataFrame) -> np.ndarray | None:
    """The peer (global rank) of every p2p op (by row), when the trace names the peer of each
    (``collectives.with_call_times``: torch's c10d::send / recv_ with record_shapes), else None."""
    if ops.empty or "peer" not in ops or ops["peer"].isna().any():
        return None
    out = np.full(int(ops.index.max()) + 1, -1, np.int64)
    out[ops.index.to_numpy(np.int64)] = ops["peer"].astype("int64").to_numpy()
    return out


def _first_is_send(per: dict, r: int, steps: list[int]) -> bool:
    """Whether most of the rank's steps start with a send (a pipeline's first stage: it sends the
    first micro-batch's activations; every other stage first waits for its input)."""
    votes = [
        per[(r, s)]["send"].call[0] < per[(r, s)]["recv"].call[0]
        if len(per[(r, s)]["recv"]) and len(per[(r, s)]["send"])
        else bool(len(per[(r, s)]["send"]))
        for s in steps
        if (r, s) in per
    ]
    return bool(votes) and sum(votes) * 2 > len(votes)


def _traffic_chains(per: dict, ranks: list[int], tol: int, peers: np.ndarray | None = None) -> list[list[int]]:
    """Pipelines read off the traffic when the layout has none: a first stage is a rank whose
    step starts with a send (``_first_is_send``); the next stage is the rank whose recvs take most
    of the current stage's forward sends in order (and whose sends its backward recvs), and so on
    while sends are left. With the peer of every op named (``peers``), the next stage is the peer
    of the stage's first send, then each stage's other neighbour (``_peer_chains``)."""
    steps = sorted({s for (_, s) in per})
    if peers is not None:
        return _peer_chains(per, ranks, steps, peers)
    empty = _Ops(_EMPTY)
    free = [r for r in ranks if not _first_is_send(per, r, steps)]
    chains = []
    for head in (r for r in ranks if _first_is_send(per, r, steps)):
        chain = [head]
        state = {s: (per[(head, s)]["send"], per[(head, s)]["recv"]) for s in steps if (head, s) in per}
        while any(len(f) for f, _ in state.values()) and free:
            best: tuple[int, int] | None = None  # (pairs, rank)
            for b in _shortlist(per, state, free, tol):
                n = 0
                for s, (fwd, bwd) in state.items():
                    mine = per.get((b, s))
                    if mine:
                        fp, bp, _, _ = _link(fwd, bwd, mine["send"], mine["recv"], tol)
                        n += len(fp) + len(bp)
                if n and (best is None or n > best[0]):
                    best = (n, b)
            if best is None:
                break
            b = best[1]
            free.remove(b)
            chain.append(b)
            nxt = {}
            for s, (fwd, bwd) in state.items():
                mine = per.get((b, s), {"send": empty, "recv": empty})
                _, _, left_s, left_r = _link(fwd, bwd, mine["send"], mine["recv"], tol)
                nxt[s] = (left_s, left_r)
            state = nxt
        if len(chain) > 1:
            chains.append(chain)
    return chains


def _peer_chains(per: dict, ranks: list[int], steps: list[int], peers: np.ndarray) -> list[list[int]]:
    """``_traffic_chains`` from the named peers: from each first stage (``_first_is_send``) to
    the peer of its first send, then on to each stage's other neighbour while it has exactly one
    (a pipeline's stages trade with their two neighbours; an interleaved one's last stage with the
    first, where the walk ends)."""
    near: dict[int, set[int]] = {r: set() for r in ranks}
    first: dict[int, int] = {}
    for (r, _s), d in sorted(per.items(), key=lambda kv: kv[0]):
        for kind in ("send", "recv"):
            near[r].update(int(p) for p in peers[d[kind].row] if p != r)
        if len(d["send"]) and r not in first:
            first[r] = int(peers[d["send"].row[0]])
    chains: list[list[int]] = []
    taken: set[int] = set()
    for head in (r for r in ranks if _first_is_send(per, r, steps) and r in first):
        if head in taken:
            continue
        chain, nxt = [head], first[head]
        while nxt not in chain and nxt not in taken and nxt in near:
            chain.append(nxt)
            others = sorted(near[nxt] - {chain[-2]})
            if len(others) != 1:
                break
            nxt = others[0]
        if len(chain) > 1:
            chains.append(chain)
            taken.update(chain)
    return chains


def _peer_pairs(
    chain: list[int], side: dict[int, list[dict[str, _Ops]]], peers: np.ndarray
) -> list[tuple[int, int, int, int]]:
    """The pairs of one pipeline when the trace names every op's peer (``_chain_pairs``' rows):
    per link (and the wrap, last stage to first, when they trade: an interleaved pipeline) and
    direction, the sender's sends to the receiver pair in order with the receiver's recvs from the
    sender (messages between two ranks arrive in the order sent), over the whole run when both
    counts agree, else step by step (a profiling window that cut a link), where counts differ
    aligned in time (``_align``)."""
    n = len(chain)
    steps = sorted(side)
    links = [(st, (st + 1) % n) for st in range(n - 1 if n == 2 else n)]
    rows: list[tuple[int, int, int, int]] = []
    for st, nx in links:
        for back, (a, b) in ((0, (st, nx)), (1, (nx, st))):
            src, dst = chain[a], chain[b]
            sends = [side[s][a]["send"].take(peers[side[s][a]["send"].row] == dst) for s in steps]
            recvs = [side[s][b]["recv"].take(peers[side[s][b]["recv"].row] == src) for s in steps]
            if sum(map(len, sends)) == sum(map(len, recvs)):
                got = list(zip(np.concatenate([x.row for x in sends]), np.concatenate([x.row for x in recvs])))
            else:
                got = []
                for x, y in zip(sends, recvs):
                    got += (
                        zip(x.row, y.row)
                        if len(x) == len(y)
                        else [(x.row[i], y.row[j]) for i, j in _align(x, y, TOLERANCE_NS)]
                    )
            rows += [(st, back, int(i), int(j)) for i, j in got]
    return rows


@per_run
def _pairing(store: Store, run: str | None = None) -> pd.DataFrame:
    """``send_recv_pairs`` plus the rows of the send and the recv in ``_p2p_ops`` (``_send``, ``_recv``).

    Per pipeline (the layout's PP groups by stage, else ``_traffic_chains``) and step, from the
    first stage on: its sends are all forward and its recvs all backward; they take their pairs
    among the next stage's recvs and sends (``_align``); what the next stage has left are its own
    forward sends and backward recvs, which pair with the stage after it, and so on."""
    ops, per, offset, resid, tol = _per_step(store, run)
    if ops.empty:
        return pd.DataFrame(columns=[*PAIR_COLUMNS, "_send", "_recv"])
    ranks = sorted({int(r) for r in ops["rank"]})
    chains = [c for c in _layout_chains(store, run) if len(set(c) & set(ranks)) > 1]
    if not chains:
        chains = _traffic_chains(per, ranks, tol, _named_peers(ops))
    empty = _Ops(_EMPTY)
    rows = []
    for gi, chain in enumerate(chains):
        steps = sorted({s for (r, s) in per if r in chain})
        side = {s: [per.get((r, s), {"send": empty, "recv": empty}) for r in chain] for s in steps}
        peers = _named_peers(ops[ops["rank"].isin(chain)])
        found = _peer_pairs(chain, side, peers) if peers is not None else _chain_pairs(chain, side, offset, resid)
        for st, back, i, j in found:
            nx = (st + 1) % len(chain)  # the last stage's next: the first (an interleaved pipeline's wrap)
            a, z = chain[st], chain[nx]
            rows.append((z, a, nx, st, gi, "backward", i, j) if back else (a, z, st, nx, gi, "forward", i, j))
    got = pd.DataFrame(
        rows, columns=["src_rank", "dst_rank", "src_stage", "dst_stage", "pp_group", "direction", "_send", "_recv"]
    )
    s_rows, r_rows = ops.loc[got["_send"]], ops.loc[got["_recv"]]
    got["step"] = s_rows["step"].to_numpy()
    got["bytes"] = s_rows["bytes"].to_numpy()
    got["send_ts_ns"], got["send_end_ns"] = s_rows["ts_ns"].to_numpy(), s_rows["end_ns"].to_numpy()
    got["recv_ts_ns"], got["recv_end_ns"] = r_rows["ts_ns"].to_numpy(), r_rows["end_ns"].to_numpy()
    got["send_name"], got["recv_name"] = s_rows["name"].astype(str).to_numpy(), r_rows["name"].astype(str).to_numpy()
    df = got[[*PAIR_COLUMNS, "_send", "_recv"]].copy()
    for c in ("step", "bytes"):
        df[c] = pd.to_numeric(df[c]).astype("Int64")
    for c in ("src_rank", "dst_rank", "src_stage", "dst_stage", "pp_group", "_send", "_recv"):
        df[c] = df[c].astype("int64")
    return df.sort_values(["send_ts_ns", "src_rank"], kind="stable").reset_index(drop=True)


def _stages(store: Store, run: str) -> dict[int, tuple[int, int, int]]:
    """rank -> (stage, pipeline index, stages in the pipeline) of every rank with a paired op."""
    pairs = _pairing(store, run)
    out: dict[int, tuple[int, int, int]] = {}
    for col, st in (("src_rank", "src_stage"), ("dst_rank", "dst_stage")):
        for r, s, g in zip(pairs[col], pairs[st], pairs["pp_group"]):
            out[int(r)] = (int(s), int(g), 0)
    n = {}
    for s, g, _ in out.values():
        n[g] = max(n.get(g, 0), s + 1)
    return {r: (s, g, n[g]) for r, (s, g, _) in out.items()}


def _directed_ops(store: Store, run: str) -> tuple[pd.DataFrame, dict[int, tuple[int, int, int]]]:
    """The p2p ops of ranks in a pipeline with their direction and peer (from the pairs)."""
    ops = _p2p_ops(store, run)
    pairs = _pairing(store, run)
    stages = _stages(store, run) if len(ops) else {}
    ops["direction"] = None
    ops["peer"] = pd.array([None] * len(ops), dtype="Int64")
    for col, peer in (("_send", "dst_rank"), ("_recv", "src_rank")):
        idx = pairs[col].to_numpy(np.int64)
        ops.loc[idx, "direction"] = pairs["direction"].to_numpy(object)
        ops.loc[idx, "peer"] = pairs[peer].to_numpy(np.int64)
    return ops[ops["direction"].notna()].reset_index(drop=True), stages


def _interleaving(store: Store, run: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(pipeline, step) -> (chunks per rank, micro-batches) of the steps of interleaved pipelines:
    those whose last stage sends activations to the first (the wrap), from the counts of
    activations over the first link and over the wrap (``interleaved.chunks_from_traffic``)."""
    pairs = _pairing(store, run)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    if pairs.empty:
        return out
    stages = _stages(store, run)
    n = {g: k for _, g, k in stages.values()}
    fwd = pairs[pairs["direction"] == "forward"].assign(_step=pairs["step"].fillna(-1).astype("int64"))
    for (g, step), sub in fwd.groupby(["pp_group", "_step"]):
        k = n.get(int(g), 0)
        inner = int(((sub["src_stage"] == 0) & (sub["dst_stage"] == 1)).sum())
        wrap = int(((sub["src_stage"] == k - 1) & (sub["dst_stage"] == 0)).sum())
        got = chunks_from_traffic(inner, wrap) if k >= 3 else None
        if got is not None:
            out[(int(g), int(step))] = got
    return out


@per_run
def pipeline(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per segment of a pipeline stage's step: forward / backward / forward+backward work of
    micro-batch k, bubble (blocked in a send or recv, with its peer), other (see the module doc)."""
    ops, stages = _directed_ops(store, run)
    if ops.empty:
        return pd.DataFrame(columns=SEGMENT_COLUMNS)
    offset, _ = _offsets(store, run)
    steps = run_host_steps(store, run)
    with store.read_connection(run=run) as con:
        bw = _backward_ops(con, run)
    ends = {(int(r), int(s)): (int(a), int(b)) for r, s, a, b in steps.itertuples(index=False)}
    shapes = _interleaving(store, run)
    every = run_alignment(store, run).ops
    colls = every.loc[~every["is_p2p"], ["rank", "ts_ns"]]
    coll_starts = {int(r): np.sort(g["ts_ns"].to_numpy(np.int64)) for r, g in colls.groupby("rank")}
    rows: list[dict] = []
    ops["_step"] = ops["step"].astype("Int64").fillna(-1)
    for (rank, step), g in ops.groupby(["rank", "_step"], sort=True):
        rank, step = int(rank), int(step)
        stage, group, n_stages = stages[rank]
        g = g.sort_values("call", kind="stable")
        win = ends.get((rank, step))
        first_start = int(g["call"].iloc[0])
        step_start = win[0] if win else first_start
        last_end = int(g["end_ns"].max())
        later = coll_starts.get(rank, np.empty(0, np.int64))
        later = later[later >= last_end]
        bounds = [x for x in (win[1] if win else None, int(later[0]) if later.size else None) if x is not None]
        phase_end = max(min(bounds or [last_end]), last_end)
        base = {"rank": rank, "stage": stage, "pp_group": group, "n_stages": n_stages}
        base["step"] = step if step >= 0 else None
        got = None
        if (group, step) in shapes:  # an interleaved pipeline: the model's computations, when its exchanges fit
            v, m = shapes[(group, step)]
            mine = list(zip(g["op_type"], g["direction"], g["call"], g["end_ns"], g["peer"]))
            split = functools.partial(_boundary, bw.get(rank), backward_first=False)
            got = cut_interleaved(mine, min(step_start, first_start), phase_end, stage, n_stages, v, m, split)
        if got is None:
            got = [
                (kd, k, None, a, b, op, p)
                for kd, k, a, b, op, p in _cut(g, min(step_start, first_start), phase_end, bw.get(rank))
            ]
        for kind, k, c, a, b, op, peer in got:
            rows.append(
                {**base, "kind": kind, "micro_batch": k, "chunk": c, "start_ns": a, "end_ns": b, "op": op, "peer": peer}
            )
    df = pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
    df["dur_ns"] = df["end_ns"] - df["start_ns"]
    df["aligned_start_ns"] = df["start_ns"] - df["rank"].map(lambda r: offset.get(int(r), 0))
    for c in ("step", "micro_batch", "peer", "chunk"):
        df[c] = pd.to_numeric(df[c]).astype("Int64")
    for c in ("start_ns", "end_ns", "dur_ns", "aligned_start_ns"):
        df[c] = df[c].astype("int64")
    return df.sort_values(["pp_group", "stage", "rank", "start_ns"], kind="stable").reset_index(drop=True)


Segment = tuple[str, "int | None", int, int, "str | None", "int | None"]
BACKWARD_OP = "autograd::engine::evaluate_function:%"  # torch's autograd engine, one per backward node


def _backward_ops(con: object, run: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per rank, the autograd engine's backward nodes on its host threads (any thread: on a device
    the engine runs them on its own thread) as (starts, ends) sorted by start."""
    df = con.execute(  # type: ignore[attr-defined]
        "SELECT rank, ts_ns, ts_ns + dur_ns AS end_ns FROM operators "
        "WHERE run = ? AND ts_ns IS NOT NULL AND dur_ns >= 0 AND name LIKE ? ORDER BY rank, ts_ns",
        [run, BACKWARD_OP],
    ).df()
    return {int(r): (g["ts_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)) for r, g in df.groupby("rank")}


def _boundary(bw: tuple[np.ndarray, np.ndarray] | None, a: int, b: int, backward_first: bool) -> int | None:
    """Where forward turns into backward (the first backward node starting in [a, b)) or backward
    into forward (the end of the last one), None when no backward node runs there."""
    if bw is None:
        return None
    starts, ends = bw
    i0, i1 = np.searchsorted(starts, a, "left"), np.searchsorted(starts, b, "left")
    if i0 >= i1:
        return None
    return min(int(ends[i0:i1].max()), b) if backward_first else int(starts[i0])


def _cut(g: pd.DataFrame, start: int, phase_end: int, bw: tuple[np.ndarray, np.ndarray] | None = None) -> list[Segment]:
    """The segments (kind, micro-batch, start, end, op, peer) of one stage's step from its p2p ops
    in call order, forward and backward met without a p2p op between split at the autograd
    engine's first (or after its last) backward node ``bw`` (see the module doc)."""
    out: list[Segment] = []

    def add(kind: str, k: int | None, a: int, b: int, op: str | None = None, peer: int | None = None) -> None:
        if b > a:
            out.append((kind, k, a, b, op, peer))

    mb = g.groupby(["op_type", "direction"]).cumcount().to_numpy()
    prev: tuple[str, str, int] | None = None  # (op_type, direction, micro-batch) of the previous op
    t = start
    for kind_n, dir_n, call, end, peer, k in zip(g["op_type"], g["direction"], g["call"], g["end_ns"], g["peer"], mb):
        kind_n, dir_n, a, k = str(kind_n), str(dir_n), int(call), int(k)
        if kind_n == "send":
            if prev and prev[0] == "recv" and prev[1] != dir_n:  # both, no p2p op between
                cut = _boundary(bw, t, a, backward_first=prev[1] == "backward")
                if cut is None:
                    add("forward+backward", k, t, a, f"{prev[1]} {prev[2]} + {dir_n} {k}")
                else:
                    add(prev[1], prev[2], t, cut)
                    add(dir_n, k, cut, a)
            else:
                add(dir_n, k, t, a)
        elif prev and prev[0] == "recv":
            add(prev[1], prev[2], t, a)
        else:
            add("other", None, t, a)
        add("bubble", k, max(a, t), int(end), f"{kind_n} {dir_n}", int(peer))
        t = max(t, int(end))
        prev = (kind_n, dir_n, k)
    if prev and prev[0] == "recv":
        add(prev[1], prev[2], t, phase_end)
    return out


@per_run
def pipeline_stages(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per (rank, step) of a pipeline stage: micro-batches seen forward and backward, time
    in forward, backward, forward+backward, other work and bubbles, the bubble's share of the phase."""
    seg = pipeline(store, run)
    if seg.empty:
        return pd.DataFrame(columns=STAGE_COLUMNS)
    seg = seg.assign(_step=seg["step"].fillna(-1))
    keys = ["rank", "stage", "pp_group", "n_stages", "_step"]
    t = seg.pivot_table(index=keys, columns="kind", values="dur_ns", aggfunc="sum", fill_value=0)
    for k in ("forward", "backward", "forward+backward", "other", "bubble"):
        if k not in t.columns:
            t[k] = 0
    # micro-batches from the traffic: a direction's sends or recvs in the step, whichever more
    ops, _ = _directed_ops(store, run)
    ops["_step"] = ops["step"].astype("Int64").fillna(-1)
    n = ops.groupby(["rank", "_step", "direction", "op_type"]).size().groupby(["rank", "_step", "direction"]).max()
    n = n.unstack("direction").reindex(columns=["forward", "backward"]).fillna(0).astype("int64")
    at = pd.MultiIndex.from_arrays([t.index.get_level_values("rank"), t.index.get_level_values("_step")])
    fwd = pd.Series(n["forward"].reindex(at).fillna(0).to_numpy(), index=t.index)
    bwd = pd.Series(n["backward"].reindex(at).fillna(0).to_numpy(), index=t.index)
    # an interleaved pipeline's step (from its traffic): each micro-batch passes a rank once per chunk
    shapes = _interleaving(store, run)
    groups, at_steps = t.index.get_level_values("pp_group"), t.index.get_level_values("_step")
    v = [shapes.get((int(g), int(s)), (None, None))[0] for g, s in zip(groups, at_steps)]
    chunks = pd.Series(pd.array(v, dtype="Int64"), index=t.index)
    fwd, bwd = fwd // chunks.fillna(1).astype("int64"), bwd // chunks.fillna(1).astype("int64")
    span = seg.groupby(keys).agg(a=("start_ns", "min"), b=("end_ns", "max"))
    out = pd.DataFrame(
        {
            "forward_micro_batches": fwd.reindex(t.index).fillna(0).astype("int64"),
            "backward_micro_batches": bwd.reindex(t.index).fillna(0).astype("int64"),
            "forward_ns": t["forward"].astype("int64"),
            "backward_ns": t["backward"].astype("int64"),
            "forward_backward_ns": t["forward+backward"].astype("int64"),
            "other_ns": t["other"].astype("int64"),
            "bubble_ns": t["bubble"].astype("int64"),
            "phase_ns": (span["b"] - span["a"]).reindex(t.index).astype("int64"),
        }
    ).reset_index()
    out["bubble_pct"] = (100.0 * out["bubble_ns"] / out["phase_ns"].where(out["phase_ns"] > 0)).round(2)
    out["step"] = out["_step"].where(out["_step"] >= 0).astype("Int64")
    out["chunks"] = chunks.reset_index(drop=True).astype("Int64")
    return out[STAGE_COLUMNS].sort_values(["pp_group", "stage", "step", "rank"]).reset_index(drop=True)
