"""Tiny real MindSpore CPU training driven by the collector (run as a process, in the MindSpore venv).

    python ms_train.py --config JSON [--steps N] [--mode pynative|graph]
                       [--crash exception|sigterm|sigint|exit --crash-at K]
                       [--loop manual|model --sink] [--pause-at 2,4 --sync DIR] [--dist]

--loop manual: a hand-written loop calling ``prof.step(loss=...)``; --loop model: ``Model.train`` with
``collector.mindspore_callback(config)`` (one batch = one step; --sink: dataset sink mode, where
the host sees one step per sink, i.e. per epoch). --dist: ``mindspore.communication.init()``
(run under msrun) and an AllReduce of the gradients in every step. --crash makes step K fail
after its forward/backward pass, before the optimizer update. The process prints one line per
finished step, ``step N t0_ns t1_ns``, with the step's host-clock bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def _crash(mode: str, step: int) -> None:
    if mode == "exception":
        raise RuntimeError(f"boom at step {step}")
    if mode == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    if mode == "sigint":
        os.kill(os.getpid(), signal.SIGINT)
    if mode == "exit":
        os._exit(3)
    time.sleep(5)  # the signal is delivered before this returns


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--mode", choices=["pynative", "graph"], default="pynative")
    ap.add_argument("--loop", choices=["manual", "model"], default="manual")
    ap.add_argument("--sink", action="store_true")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--crash", choices=["exception", "sigterm", "sigint", "exit"])
    ap.add_argument("--crash-at", type=int, default=-1)
    ap.add_argument("--pause-at", default="")
    ap.add_argument("--sync")
    ap.add_argument("--dist", action="store_true")
    args = ap.parse_args()

    import mindspore as ms
    import numpy as np
    from mindspore import nn

    import collector

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE if args.mode == "pynative" else ms.GRAPH_MODE)
    ms.set_seed(0)
    if args.dist:
        from mindspore.communication import init

        init()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    net = nn.SequentialCell(nn.Dense(32, 64), nn.ReLU(), nn.Dense(64, 4))
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=0.05)
    rng = np.random.default_rng(0)
    config = json.loads(args.config)

    if args.loop == "model":
        import mindspore.dataset as ds
        from mindspore.train import Callback, Model

        batches = [
            (rng.standard_normal((16, 32)).astype(np.float32), rng.integers(0, 4, 16).astype(np.int32))
            for _ in range(args.steps)
        ]
        data = ds.GeneratorDataset(batches, ["x", "y"], shuffle=False)

        class Crash(Callback):
            def on_train_step_end(self, run_context: object) -> None:
                n = run_context.original_args().cur_step_num
                print(f"step {n} {time.time_ns()}", flush=True)
                if args.crash and n == args.crash_at:
                    _crash(args.crash, n)

        cb = collector.mindspore_callback(config, granularity="epoch" if args.sink else "step")
        Model(net, loss_fn, opt).train(args.epochs, data, callbacks=[cb, Crash()], dataset_sink_mode=args.sink)
        print("trained", flush=True)
        return

    def forward(x: object, y: object) -> object:
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)
    reducer = nn.DistributedGradReducer(opt.parameters) if args.dist else None
    pauses = {int(s) for s in args.pause_at.split(",") if s}
    prof = collector.Profiler(config)
    prof.start()
    for step in range(args.steps):
        t0 = time.time_ns()
        x = ms.Tensor(rng.standard_normal((16, 32)).astype(np.float32))
        y = ms.Tensor(rng.integers(0, 4, 16).astype(np.int32))
        loss, grads = grad_fn(x, y)
        if reducer is not None:
            grads = reducer(grads)
        if args.crash and step == args.crash_at:
            _crash(args.crash, step)
        opt(grads)
        value = float(loss.asnumpy())
        print(f"step {step} {t0} {time.time_ns()}", flush=True)
        prof.step(loss=value)
        if step in pauses and args.sync:
            sync = Path(args.sync)
            (sync / f"ready_{step}").write_text(str(prof.step_num))
            deadline = time.time() + 120
            while not (sync / f"go_{step}").exists():
                if time.time() > deadline:
                    raise SystemExit(f"no go_{step} from the test")
                time.sleep(0.02)
    prof.stop()
    print("trained", flush=True)


if __name__ == "__main__":
    sys.exit(main())
