"""The sentences the analyses write for people (advisor findings, straggler causes), in English and
Simplified Chinese, in one table: a finding carries a message — a key and its parameters (numbers,
ranks, names from traces as data) — and the text is rendered where it is shown, in the language
of the reader: the CLI in English, the web app in the request's language.

``message(key, **params)`` makes a message; ``render(msg, lang)`` writes it. A parameter is
rendered by its format spec: ``ms`` (nanoseconds as "1.234 ms"), ``pct`` ("5.4%"), ``pct0``
("5%"), ``gbps`` (bytes/s as "1.23 GB/s"), ``ns`` / ``bytes`` (in the unit that suits the value),
``signed_ns`` / ``signed_bytes`` (with "+" or "−"), any Python spec, none; a parameter that is itself a
message is rendered in the same language, a list is its items joined (``, `` or, with the spec
``semicolon``, ``; `` in the language's punctuation). Names are filled in as text and never parsed again (a
``{`` in an operator name stays a ``{``). The web app's own labels are in ``webapp.labels``; a
test checks both tables have both texts with the same fields.

Some texts are stored or used as keys in English: the sentences a reader writes on what a
collection lacks (``collections.missing``, ``missing.*``) and the names of compared rank and group
classes (``label.*``). They are written with ``english(key, **params)`` from this table, so the
English text is a stable key: ``translate(text, lang, family)`` finds the template of ``family``
that wrote it and renders it in ``lang`` (stores written before keep their English sentences, and
those are read back the same way; a text no template wrote is shown as it is).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .format import fmt_bytes, fmt_ns

LANGS = ("en", "zh")

# key -> (English, 简体中文)
MESSAGES: dict[str, tuple[str, str]] = {
    # -- errors a page shows (AnalyzerError.said) ------------------------------------------------
    "error.no_runs": (
        "the store has no runs yet: run `analyze ingest <folder>` first",
        "存储中还没有运行：请先运行 `analyze ingest <folder>`",
    ),
    "error.no_run": ("no run named {run}{runs}", "没有名为 {run} 的运行{runs}"),
    "error.runs_in_store": ("; runs in the store: {shown}{more}", "；存储中的运行：{shown}{more}"),
    "error.no_runs_in_store": ("; the store has no runs", "；存储中没有运行"),
    "error.and_more": (" and {n} more", " 等另外 {n} 个"),
    # -- straggler causes (analyses.blame CAUSES) ---------------------------------------------
    "cause.untraced": (
        "outside its profiled steps (the profiler writing its output between steps)",
        "在采集的迭代之外（性能数据采集工具在迭代之间写出数据）",
    ),
    "cause.dataloader": ("a slow input pipeline (DataLoader / GetNext)", "数据输入慢（DataLoader / GetNext）"),
    "cause.device_sync": ("waiting for the device (synchronize, .item())", "等待 Device（synchronize、.item()）"),
    "cause.communication": ("waiting in other communication", "在其他通信中等待"),
    "cause.compute": ("computing longer", "计算时间更长"),
    "cause.idle": (
        "host time outside any operator (Python code, a sleep, a late launch)",
        "Host 侧算子之外的时间（Python 代码、sleep、下发晚）",
    ),
    "cause.unexplained": (
        "no cause stands out (the peers spent the interval the same way)",
        "没有突出的原因（其他卡在这段时间里的分布相同）",
    ),
    # the same causes named in a word (a table's cell, a chain of ranks)
    "cause_name.untraced": ("outside the profiled steps", "采集迭代之外"),
    "cause_name.dataloader": ("input pipeline", "数据输入"),
    "cause_name.device_sync": ("device sync", "Device 同步"),
    "cause_name.communication": ("other communication", "其他通信"),
    "cause_name.compute": ("computing", "计算"),
    "cause_name.idle": ("host idle", "Host 空闲"),
    "cause_name.unexplained": ("unexplained", "无突出原因"),
    "cause.not_explained": ("cause not explained", "原因不明"),
    "cause.nothing": ("nothing that stands out", "没有突出的部分"),
    # -- why communication was not matched across ranks (analyses.matching "notes") -------------
    "matching.no_group": (
        "{ops} op(s) name no group and none could be attributed (a gloo send/recv in a rank with several groups "
        "names neither its group nor its peer): not matched across ranks",
        "{ops} 个通信算子没有通信组且无法归属（在有多个通信组的卡上，gloo 的 send/recv 既不写通信组也不写对端）："
        "未跨卡匹配",
    ),
    "matching.one_rank": (
        "only rank {rank} of the group's {members} was profiled: nothing to match with (no wait/transit split, no "
        "arrival order)",
        "通信组的 {members} 张卡中只采集了卡 {rank}：无可匹配（无等待/传输拆分，无到达顺序）",
    ),
    "matching.some_ranks": (
        "{profiled} of the group's {members} ranks profiled: matched among those",
        "通信组的 {members} 张卡中采集了 {profiled} 张：在这些卡之间匹配",
    ),
    "matching.incomplete": (
        "{n} instance(s) seen by fewer than the {need} profiled members (those calls are missing from a rank's "
        "trace: sampled or cut traces, or different profiling windows); they are left out of the cross-rank "
        "analyses",
        "{n} 个实例被少于 {need} 个已采集成员看到（这些调用在某张卡的 trace 中缺失：采样或截断的 trace，或不同的"
        "采集窗口）；它们不参与跨卡分析",
    ),
    "matching.by_time": (
        "{n} instance(s) re-paired by their corrected end times (matching by order paired different calls)",
        "{n} 个实例按校正后的结束时间重新配对（按顺序匹配配错了调用）",
    ),
    "matching.no_size": (
        "matched by order without message sizes ({missing} of {ops} ops have none: the export records no size "
        "for them)",
        "按顺序匹配，无消息大小（{ops} 个通信算子中 {missing} 个没有：导出数据未记录其大小）",
    ),
    "matching.no_step": (
        "matched by order across the trace, not within steps ({missing} of {ops} ops carry no step id: no step "
        "marker around them, or a producer that writes none)",
        "在整个 trace 中按顺序匹配，而非在迭代内（{ops} 个通信算子中 {missing} 个没有迭代号：周围没有迭代标记，"
        "或采集工具不写迭代号）",
    ),
    "sep.semicolon": ("; ", "；"),
    # -- straggler verdicts (analyses.straggler: a rank's "verdict") ---------------------------
    "straggler.verdict.named": (
        "straggler: arrives last{where} by a median {median:ms} per {unit}, above the others' random lateness "
        "({factor:g} × p90 {p90:ms}) and the floor {floor:ms}",
        "慢卡：{where}最后到达，每{unit}晚到的中位数为 {median:ms}，高于其他卡的随机晚到（{factor:g} × p90 {p90:ms}）"
        "和下限 {floor:ms}",
    ),
    "straggler.verdict.not_named": (
        "not a straggler: median gain{where} {median:ms} per {unit} {why}",
        "不是慢卡：{where}每{unit}晚到的中位数为 {median:ms}，{why}",
    ),
    "straggler.verdict.not_judged": ("not judged: {why}", "未判定：{why}"),
    "straggler.too_few": (
        "{n} {unit}(s) with a matched collective{where}, {needed} needed",
        "{where}有匹配集合通信的{unit}为 {n} 个，需要 {needed} 个",
    ),
    "straggler.below_noise": ("≤ {factor:g} × the others' p90 {p90:ms}", "≤ {factor:g} × 其他卡的 p90 {p90:ms}"),
    "straggler.below_floor": ("≤ the floor {floor:ms}", "≤ 下限 {floor:ms}"),
    "straggler.in_group": (" in group {group}", "在通信组 {group} 中"),
    "unit.step": ("step", "迭代"),
    "unit.collective": ("collective", "集合通信"),
    "unit.none": ("none", "无"),
    # -- step-breakdown columns -----------------------------------------------------------------
    "column.computing_ns": ("Computing", "计算"),
    "column.communication_ns": ("Communication", "通信"),
    "column.free_ns": ("Free", "空闲"),
    # -- how many steps a figure covers ---------------------------------------------------------
    "over.trace": ("over the whole trace (no step markers)", "基于整个 trace（没有迭代标记）"),
    "over.mean_1": ("mean over 1 step", "1 个迭代的平均"),
    "over.mean_n": ("mean over {n} steps", "{n} 个迭代的平均"),
    "over.sum_1": ("over 1 step", "在 1 个迭代中"),
    "over.sum_n": ("over {n} steps", "在 {n} 个迭代中"),
    # -- advisor: slow rank (msprof-analyze's vote) ----------------------------------------------
    "advisor.slow_rank.title": ("Rank {rank} is the slow rank", "卡 {rank} 是慢卡"),
    "advisor.slow_rank.detail": (
        "rank {rank} arrived last (shortest elapsed time) in {votes} of the {instances} collectives it took part "
        "in (Dixon's Q at 99.5 % / 3σ vote); the others waited for it.",
        "卡 {rank} 在其参与的 {instances} 个集合通信中有 {votes} 个最后到达（耗时最短；Dixon Q 检验 99.5 % / 3σ "
        "投票）；其他卡在等待它。",
    ),
    # -- advisor: straggler ---------------------------------------------------------------------
    "advisor.straggler.title": ("Rank {rank} holds the others back: {cause}", "卡 {rank} 拖慢了其他卡：{cause}"),
    "advisor.straggler.detail": (
        "rank {rank} arrives last at the collectives of group {group} by a median {median_gain:ms} per step "
        "(threshold {threshold:ms}: twice the others' random lateness, at least the clock and step-time floor). "
        "Before each late collective its extra time went to {cause}{ops}. Had it taken its peers' time, the "
        "profiled steps would be {whatif_gain:ms} shorter{share}{votes}.",
        "卡 {rank} 在通信组 {group} 的集合通信中最后到达，每个迭代晚到的中位数为 {median_gain:ms}（阈值 "
        "{threshold:ms}：其他卡随机晚到的两倍，且不低于时钟和迭代时间的下限）。在每次晚到的集合通信之前，它多出的"
        "时间用于{cause}{ops}。若它与其他卡用时相同，采集的迭代将缩短 {whatif_gain:ms}{share}{votes}。",
    ),
    "advisor.straggler.ops": (" ({ops})", "（{ops}）"),
    "advisor.straggler.share": (" ({share:pct} of the profiled step time)", "（占采集迭代时间的 {share:pct}）"),
    "advisor.straggler.votes_yes": (
        "; msprof-analyze's vote convicts it in {votes} collective(s)",
        "；msprof-analyze 的投票在 {votes} 个集合通信中判定它为慢卡",
    ),
    "advisor.straggler.votes_no": (
        "; msprof-analyze's vote does not convict it (Dixon's test needs 4 members and an outlying elapsed time)",
        "；msprof-analyze 的投票未判定它为慢卡（Dixon 检验需要 4 个成员和一个离群的耗时）",
    ),
    # -- advisor: step-breakdown spread across ranks ---------------------------------------------
    "advisor.spread.title": ("{column} differs across ranks by {ratio:pct}", "各卡的{column}相差 {ratio:pct}"),
    "advisor.spread.detail": (
        "{column} per step (mean over steps) ranges from {low:ms} (rank {low_rank}) to {high:ms} (rank "
        "{high_rank}), {ratio:pct} of the mean {mean:ms} (threshold {threshold:pct0}), {z_found:.1f} standard "
        "errors of the step-to-step noise (needs {z_needed:.1f}) and above the run-to-run floor {floor:ms} "
        "({floor_share:pct0} of the median step){tail}",
        "每个迭代的{column}（各迭代平均）从 {low:ms}（卡 {low_rank}）到 {high:ms}（卡 {high_rank}），为平均值 "
        "{mean:ms} 的 {ratio:pct}（阈值 {threshold:pct0}），是迭代间波动标准误差的 {z_found:.1f} 倍（需要 "
        "{z_needed:.1f} 倍），且高于运行间的下限 {floor:ms}（迭代时间中位数的 {floor_share:pct0}）{tail}",
    ),
    "advisor.spread.end": (".", "。"),
    "advisor.spread.end_wait": (
        "; in synchronous training the rank that waits least is the one the others wait for (see the straggler "
        "analysis).",
        "；同步训练中等待最少的卡就是其他卡在等待的卡（见慢卡分析）。",
    ),
    # -- advisor: slow links --------------------------------------------------------------------
    "advisor.slow_link_rank.title": ("Rank {rank} is slow on {transport}", "卡 {rank} 的 {transport} 慢"),
    "advisor.slow_link_rank.detail": (
        "step {step}, group {group}: {transport} bandwidth {slow_bw:gbps} on rank {rank} vs {fast_bw:gbps} on "
        "rank {fast_rank} (gap {gap:pct} of the mean, threshold {threshold:pct0}).",
        "迭代 {step}，通信组 {group}：卡 {rank} 的 {transport} 带宽为 {slow_bw:gbps}，卡 {fast_rank} 为 "
        "{fast_bw:gbps}（差距为平均值的 {gap:pct}，阈值 {threshold:pct0}）。",
    ),
    "advisor.slow_link.title": ("Slow {transport} link {src} → {dst}", "{transport} 链路 {src} → {dst} 慢"),
    "advisor.slow_link.detail": (
        "{op} in group {group}: link {src} → {dst} reaches {bw:gbps}, {gap:pct} below the median of its {n} peer "
        "links.",
        "通信组 {group} 中的 {op}：链路 {src} → {dst} 的带宽为 {bw:gbps}，比其 {n} 条同类链路的中位数低 {gap:pct}。",
    ),
    # -- advisor: idle time ---------------------------------------------------------------------
    "advisor.high_free.title": (
        "Rank {rank} is idle {share:pct} of the step",
        "卡 {rank} 有 {share:pct} 的迭代时间空闲",
    ),
    "advisor.high_free.detail": (
        "Free (no task on {where}) is {free:ms} of {step:ms} step time on rank {rank} ({over}; {share:pct}, "
        "threshold {threshold:pct0}); {tail}",
        "卡 {rank} 的空闲时间（{where}上没有任务）为 {free:ms}，迭代时间为 {step:ms}（{over}；{share:pct}，阈值 "
        "{threshold:pct0}）；{tail}",
    ),
    "advisor.high_free.where_device": ("the device", "Device"),
    "advisor.high_free.where_cpu": (
        "the CPU threads (no operator, no collective running)",
        "CPU 线程（没有算子、没有集合通信在运行）",
    ),
    "advisor.high_free.no_tasks": (
        "the figures are the producer's own (step_trace_time.csv): this rank's files hold no device task, so the "
        "idle gaps cannot be shown.",
        "这些数值来自采集工具自身（step_trace_time.csv）：该卡的文件中没有 Device 任务，因此无法显示空闲间隙。",
    ),
    "advisor.high_free.biggest": ("the biggest idle gap is {gap:ms}.", "最大的空闲间隙为 {gap:ms}。"),
    "advisor.host_bound.title": ("Rank {rank} is host-bound", "卡 {rank} 受 Host 侧下发限制"),
    "advisor.host_bound.detail": (
        "on rank {rank} the device waited {total:ms} {over} ({share:pct} of the step time, threshold "
        "{threshold:pct0}) in {gaps} idle gaps for tasks the host launched only after the device had gone idle: "
        "speed up dispatch (fewer, fused ops; graph mode; CPU binding).",
        "卡 {rank} 的 Device {over}在 {gaps} 个空闲间隙中共等待 {total:ms}（占迭代时间的 {share:pct}，阈值 "
        "{threshold:pct0}），等待的任务在 Device 空闲之后才由 Host 下发：请加快下发（更少、融合的算子；图模式；"
        "绑核）。",
    ),
    # -- advisor: communication sizes, AI CPU ---------------------------------------------------
    "advisor.small_packets.title": (
        "Small {transport} communication ({ratio:pct} of the ops)",
        "{transport} 小包通信（占 {ratio:pct}）",
    ),
    "advisor.small_packets.detail": (
        "{small} of {ops} {transport} ops move less than {limit_mib:.0f} MiB (ratio {ratio:pct}, threshold "
        "{threshold:pct0}), {transit:ms} of transit time: bucket gradients (larger DDP buckets, fused "
        "collectives) or raise the batch size.",
        "{ops} 个 {transport} 通信中有 {small} 个传输量小于 {limit_mib:.0f} MiB（比例 {ratio:pct}，阈值 "
        "{threshold:pct0}），传输时间共 {transit:ms}：请合并梯度（更大的 DDP bucket、融合的集合通信）或增大 "
        "batch size。",
    ),
    "advisor.aicpu.title": (
        "{names} AI CPU operator(s) longer than {min_us:.0f} µs",
        "{names} 个 AI CPU 算子超过 {min_us:.0f} µs",
    ),
    "advisor.aicpu.detail": (
        "{tasks} AI CPU tasks longer than {min_us:.0f} µs, {total:ms} in total (longest {longest:ms}, {name}): AI "
        "CPU runs operators the AI Core cannot (often int64/double inputs); change the dtype or use an AI Core "
        "operator.",
        "{tasks} 个 AI CPU 任务超过 {min_us:.0f} µs，共 {total:ms}（最长 {longest:ms}，{name}）：AI CPU 执行 "
        "AI Core 不能执行的算子（常因 int64/double 输入）；请更换数据类型或使用 AI Core 算子。",
    ),
    # -- the verdict of a comparison (analyses.verdict: one message per finding) -----------------
    "verdict.no_step": ("no step time to compare", "没有可比较的迭代时间"),
    "verdict.same": (
        "{new} takes as long per step as {base} ({base_ns:ns})",
        "{new} 每个迭代与 {base} 耗时相同（{base_ns:ns}）",
    ),
    "verdict.slower": (
        "{new} is {pct:.1f} % slower per step than {base} ({base_ns:ns} → {new_ns:ns}{noise})",
        "{new} 每个迭代比 {base} 慢 {pct:.1f} %（{base_ns:ns} → {new_ns:ns}{noise}）",
    ),
    "verdict.faster": (
        "{new} is {pct:.1f} % faster per step than {base} ({base_ns:ns} → {new_ns:ns}{noise})",
        "{new} 每个迭代比 {base} 快 {pct:.1f} %（{base_ns:ns} → {new_ns:ns}{noise}）",
    ),
    "verdict.noise": (", within the step-to-step noise", "，在迭代间波动范围内"),
    "verdict.share": (
        "{share:.0f} % of it is {column}{where} ({delta:signed_ns})",
        "其中 {share:.0f} % 来自{where}{column}（{delta:signed_ns}）",
    ),
    "verdict.beyond": (
        "{column} {delta:signed_ns}{where}, more than the whole change",
        "{where}{column} {delta:signed_ns}，超过了整体变化",
    ),
    "verdict.where_all": (" on every rank", "所有卡上的"),
    "verdict.where": (" on {ranks}", "{ranks} 上的"),
    "verdict.rank": ("rank {rank}", "卡 {rank}"),
    "verdict.ranks": ("ranks {ranks}", "卡 {ranks}"),
    "verdict.all_ranks": ("all ranks", "所有卡"),
    "verdict.stands_out": (
        "{who} stands out: {column} {delta:signed_ns} per step (other ranks {rest})",
        "{who} 突出：每个迭代{column} {delta:signed_ns}（其他卡 {rest}）",
    ),
    "verdict.range1": ("{value:signed_ns}", "{value:signed_ns}"),
    "verdict.range": ("{low:signed_ns} to {high:signed_ns}", "{low:signed_ns} 至 {high:signed_ns}"),
    "verdict.contributors": ("top contributors per step: {items}", "每个迭代变化最大的：{items}"),
    "verdict.contributor": ("{name}{kind}{status} {delta:signed_ns}", "{name}{kind}{status} {delta:signed_ns}"),
    "verdict.kernel": (" kernel", " kernel"),
    "verdict.new": (" (new)", "（新增）"),
    "verdict.vanished": (" (vanished)", "（消失）"),
    "verdict.shapes_1": (
        "input shapes changed for 1 operator ({items:semicolon})",
        "1 个算子的输入 shape 变了（{items:semicolon}）",
    ),
    "verdict.shapes_n": (
        "input shapes changed for {n} operators ({items:semicolon})",
        "{n} 个算子的输入 shape 变了（{items:semicolon}）",
    ),
    "verdict.calls_factor": (
        "operator calls per step ×{factor:.2f} ({n} operators, e.g. {name} {base:g} → {new:g})",
        "每个迭代的算子调用次数 ×{factor:.2f}（{n} 个算子，例如 {name} {base:g} → {new:g}）",
    ),
    "verdict.calls": ("calls per step changed: {items}", "每个迭代的调用次数变了：{items}"),
    "verdict.comm": ("{op}: {items}", "{op}：{items}"),
    "verdict.comm_calls": ("{base:g} → {new:g} calls per step", "每个迭代调用 {base:g} → {new:g} 次"),
    "verdict.comm_per_call": ("{base:bytes} → {new:bytes} per call", "每次调用 {base:bytes} → {new:bytes}"),
    "verdict.comm_bytes": (
        "bytes per step {base:bytes} → {new:bytes}{factor}",
        "每个迭代字节数 {base:bytes} → {new:bytes}{factor}",
    ),
    "verdict.factor": (" (×{factor:.2f})", "（×{factor:.2f}）"),
    "verdict.comm_bytes_same": ("bytes per step unchanged", "每个迭代字节数不变"),
    "verdict.comm_elapsed": ("elapsed {delta:signed_ns} per step{wait}", "每个迭代耗时 {delta:signed_ns}{wait}"),
    "verdict.comm_wait": (" (wait {delta:signed_ns})", "（等待 {delta:signed_ns}）"),
    "verdict.stragglers": ("stragglers: {new}; {base}", "慢卡：{new}；{base}"),
    "verdict.stragglers_in": ("{ranks} in {run}", "{run} 中 {ranks}"),
    "verdict.stragglers_none": ("none in {run}", "{run} 中无"),
    "verdict.straggler": (
        "rank {rank} ({votes} of {instances} collectives)",
        "卡 {rank}（{instances} 个集合通信中 {votes} 个）",
    ),
    "verdict.memory": (
        "peak memory {delta:signed_bytes} ({pct}, {base:bytes} → {new:bytes})",
        "内存峰值 {delta:signed_bytes}（{pct}，{base:bytes} → {new:bytes}）",
    ),
    "verdict.pct": ("{pct:+.1f} %", "{pct:+.1f} %"),
    "verdict.pct_na": ("n/a", "无"),
    "verdict.pct_new": ("new", "新增"),
    "verdict.producers": (
        "different formats ({base_formats} vs {new_formats}): {only_base} operators and kernels only in {base}, "
        "{only_new} only in {new}",
        "格式不同（{base_formats} 与 {new_formats}）：{only_base} 个算子和 kernel 只在 {base} 中，{only_new} 个只在 "
        "{new} 中",
    ),
    "verdict.unchanged": (
        "no operator, kernel or collective changed in calls, shapes or bytes",
        "没有算子、kernel 或集合通信在调用次数、shape 或字节数上发生变化",
    ),
    "verdict.column.computing_ns": ("computing", "计算"),
    "verdict.column.comm_not_overlapped_ns": ("communication not overlapped", "未被掩盖的通信"),
    "verdict.column.memory_not_overlapped_ns": ("memory copies not overlapped", "未被掩盖的内存拷贝"),
    "verdict.column.free_ns": ("free", "空闲"),
    "verdict.column.preparing_ns": ("preparing", "准备"),
    "verdict.column.host_tail_ns": ("host time after the last task", "最后一个任务之后的 Host 时间"),
    # -- how a parallel dimension was found (analyses.parallel_layout "source") --------------------
    "layout.declared": ("declared ({origin})", "声明（{origin}）"),
    "layout.composite": ("declared as composite ({labels})", "以组合名称声明（{labels}）"),
    "layout.p2p": ("inferred (point-to-point traffic)", "推断（点对点通信）"),
    "layout.p2p_chain": (
        "inferred (send/recv along a chain of ranks, in the world group)",
        "推断（全部卡的通信组中沿一条卡链的 send/recv）",
    ),
    "layout.only_family": ("inferred (only family carrying collectives)", "推断（唯一承载集合通信的一族通信组）"),
    "layout.family": ("inferred (collective family, stride {stride})", "推断（集合通信的一族通信组，步长 {stride}）"),
    "layout.no_collectives": (
        "inferred (no collectives; outermost stride, send/recv not attributed)",
        "推断（无集合通信；最外层步长，send/recv 未归属）",
    ),
    "layout.world": (
        "inferred (the world is the only group and carries the collectives)",
        "推断（全部卡是唯一的通信组，承载集合通信）",
    ),
    # -- short terms of a comparison (analyses.diff: row labels, statuses, kinds, how ranks matched) --
    "term.total": ("total", "合计"),
    "term.status.new": ("new", "新增"),
    "term.status.vanished": ("vanished", "消失"),
    "term.status.changed": ("changed", "变化"),
    "term.status.same": ("same", "不变"),
    "term.status.both": ("both", "两者都有"),
    "term.kind.operator": ("operator", "算子"),
    "term.kind.kernel": ("kernel", "kernel"),
    "term.memory.peak_allocated_bytes": ("peak allocated", "分配峰值"),
    "term.memory.peak_reserved_bytes": ("peak reserved", "预留峰值"),
    "term.match.rank": ("rank", "卡号"),
    "term.match.layout": ("layout", "并行布局"),
    "term.match.position": ("position", "位置"),
    "term.steps_1": ("step {steps}", "迭代 {steps}"),
    "term.steps_n": ("steps {steps}", "迭代 {steps}"),
    "term.no_steps": ("the whole profile (no steps)", "整个采集（无迭代）"),
    # -- the columns of a finding's evidence (analyses.advisor: the keys of its rows) ------------
    "term.evidence.rank": ("rank", "卡"),
    "term.evidence.step": ("step", "迭代"),
    "term.evidence.steps": ("steps", "迭代数"),
    "term.evidence.start_ns": ("start", "开始"),
    "term.evidence.end_ns": ("end", "结束"),
    "term.evidence.dur_ns": ("dur", "时长"),
    "term.evidence.task_before": ("task before", "之前的任务"),
    "term.evidence.task_after": ("task after", "之后的任务"),
    "term.evidence.next_task": ("next task", "下一个任务"),
    "term.evidence.launch_call": ("launch call", "下发调用"),
    "term.evidence.launch_ns": ("launch", "下发时刻"),
    "term.evidence.launch_after_idle_ns": ("launch after idle", "空闲后才下发"),
    "term.evidence.cause": ("cause", "原因"),
    "term.evidence.margin_ns": ("margin", "余量"),
    "term.evidence.excess_ns": ("excess", "多出的时间"),
    "term.evidence.op_type": ("op type", "通信类型"),
    "term.evidence.op_name": ("op name", "通信算子"),
    "term.evidence.instance": ("instance", "实例"),
    "term.evidence.highlights": ("highlights", "时间线区间"),
    "term.evidence.group_name": ("group name", "通信组"),
    "term.evidence.statistic": ("statistic", "统计量"),
    "term.evidence.critical": ("critical", "临界值"),
    "term.evidence.test": ("test", "检验"),
    "term.evidence.elapsed_by_rank": ("elapsed by rank", "各卡耗时"),
    "term.evidence.bytes": ("bytes", "字节数"),
    "term.evidence.free_ns": ("free", "空闲"),
    "term.evidence.communication_ns": ("communication", "通信"),
    "term.evidence.transit_ns": ("transit", "传输时间"),
    "term.evidence.transport": ("transport", "传输方式"),
    "term.evidence.name": ("name", "名称"),
    "term.evidence.count": ("count", "次数"),
    "term.evidence.total_ns": ("total", "总耗时"),
    "term.evidence.max_ns": ("max", "最长"),
    # -- clock alignment (analyses.clock_alignment "warning"; statuses) ---------------------------
    "clock.not_aligned": (
        "rank {rank} cannot be aligned: only {n} blocking collective(s) matched with other ranks (need {need}); its "
        "timeline keeps its own clock{coarse}",
        "卡 {rank} 无法对齐：只有 {n} 个阻塞型集合通信与其他卡匹配（需要 {need} 个）；其时间线保持自身时钟{coarse}",
    ),
    "clock.coarse": (" (coarse estimate from step starts: {ms:.3f} ms)", "（由迭代开始时刻粗略估计：{ms:.3f} ms）"),
    "clock.poorly_aligned": (
        "rank {rank}: collectives still disagree by {ms:.3f} ms (median) after alignment; its offset is uncertain",
        "卡 {rank}：对齐后集合通信仍相差 {ms:.3f} ms（中位数）；其偏移不确定",
    ),
    "term.clock.reference": ("reference", "参考"),
    "term.clock.aligned": ("aligned", "已对齐"),
    "term.clock.not_aligned": ("not aligned", "未对齐"),
    "term.clock.poorly_aligned": ("poorly aligned", "对齐较差"),
    # -- what a collection lacks and why (the readers' notes, collections.missing: English, read back) --
    "missing.hint.torch_npu_raw": (
        "run torch_npu.profiler.profiler.analyse(profiler_path=...) on a host with torch_npu and the CANN toolkit (an "
        "Ascend machine), then ingest again",
        "请在装有 torch_npu 和 CANN 工具包的主机（昇腾机器）上运行 "
        "torch_npu.profiler.profiler.analyse(profiler_path=...)，然后重新导入",
    ),
    "missing.hint.msprof_export": (
        "export it with `msprof --export=on --output=<this PROF_ folder>` on a host with the CANN toolkit (an Ascend "
        "machine), then ingest again",
        "请在装有 CANN 工具包的主机（昇腾机器）上用 `msprof --export=on --output=<this PROF_ folder>` 导出，"
        "然后重新导入",
    ),
    "missing.hint.mindspore_offline": (
        "parse it with `from mindspore.profiler.profiler import analyse; analyse('<this folder>')` on a host with "
        "MindSpore (and the CANN toolkit for NPU data), then ingest again",
        "请在装有 MindSpore（NPU 数据还需 CANN 工具包）的主机上用 `from mindspore.profiler.profiler import analyse; "
        "analyse('<this folder>')` 解析，然后重新导入",
    ),
    "missing.rank_assigned": (
        "no rank found (no rank_{{id}} folder, sidecar or producer metadata): numbered {rank} in discovery order",
        "未找到卡号（没有 rank_{{id}} 目录、sidecar 或采集工具元数据）：按发现顺序编号为 {rank}",
    ),
    "missing.window_open": (
        "the profiling window was still open (sidecar status running: the job is still profiling, or was killed "
        "without clean-up){last}: later steps were not captured",
        "采集窗口仍未关闭（sidecar 状态为 running：作业仍在采集，或被杀死而未清理）{last}：之后的迭代未采集",
    ),
    "missing.window_stopped": (
        "the job stopped during the profiling window{why}{last}: later steps were not captured",
        "作业在采集窗口中途停止{why}{last}：之后的迭代未采集",
    ),
    "missing.part.reason": (" ({reason})", "（{reason}）"),
    "missing.part.last_step": (", last complete step {step}", "，最后一个完整的迭代为 {step}"),
    "missing.part.no_step": (", no step completed", "，没有完成任何迭代"),
    "missing.bad_number": (
        "{what} {value} read from the files is no possible value; left empty",
        "从文件读到的{what} {value} 不是可能的值；留空",
    ),
    "missing.part.world_size": ("world size", "总卡数"),
    "missing.part.device_id": ("device id", "设备号"),
    # Kineto
    "missing.kineto.rebuilt_memory": (
        "memory totals rebuilt from the allocation sizes (old trace without Total Allocated): a lower bound, blocks "
        "allocated before the trace began are not counted",
        "内存总量由分配大小重建（旧版 trace 没有 Total Allocated）：为下限，trace 开始前分配的内存块未计入",
    ),
    "missing.kineto.cpu_only": (
        "no device kernels: CPU-only trace (torch.profiler without a CUDA activity)",
        "没有 Device kernel：仅 CPU 的 trace（torch.profiler 未开启 CUDA activity）",
    ),
    "missing.kineto.no_memory": ("no memory events: profile_memory was off", "没有内存事件：profile_memory 未开启"),
    "missing.kineto.no_stacks": ("no call stacks: with_stack was off", "没有调用栈：with_stack 未开启"),
    "missing.kineto.no_shapes": ("no input shapes: record_shapes was off", "没有输入 shape：record_shapes 未开启"),
    "missing.kineto.no_steps": (
        "no ProfilerStep ranges: the profiler was used without prof.step()",
        "没有 ProfilerStep 区间：使用 profiler 时没有调用 prof.step()",
    ),
    "missing.kineto.no_comm": (
        "no communication: single process or no collective in the window",
        "没有通信：单进程，或窗口内没有集合通信",
    ),
    "missing.kineto.no_matrix": (
        "no communication matrix: Kineto does not record per-link transfers",
        "没有通信矩阵：Kineto 不记录逐链路的传输",
    ),
    # torch_npu / MindSpore / msprof output (ascend)
    "missing.ascend.level0_comm": (
        "Level0: no communication matrix and no wait/transit split (communication.json and communication_matrix.json "
        "are written from Level1)",
        "Level0：没有通信矩阵，也没有等待/传输拆分（communication.json 和 communication_matrix.json 从 Level1 起才写）",
    ),
    "missing.ascend.level0_kernels": (
        "Level0: kernels have no op type, shapes or AI Core PMU metrics (reduced kernel details)",
        "Level0：kernel 没有算子类型、shape 或 AI Core PMU 指标（精简的 kernel 详情）",
    ),
    "missing.ascend.level0_cann": (
        "Level0: no CANN API (AscendCL/Runtime) events on the host timeline",
        "Level0：Host 时间线上没有 CANN API（AscendCL/Runtime）事件",
    ),
    "missing.ascend.level1_runtime": (
        "Level1: no Runtime API events (recorded at Level2 only)",
        "Level1：没有 Runtime API 事件（仅 Level2 记录）",
    ),
    "missing.ascend.level_none": (
        "Level_none: no CANN-level data (kernels, communication) was collected",
        "Level_none：未采集 CANN 层数据（kernel、通信）",
    ),
    "missing.ascend.no_npu": (
        "activities without NPU: no device kernels or communication",
        "activities 不含 NPU：没有 Device kernel 和通信",
    ),
    "missing.ascend.no_cpu": ("activities without CPU: no framework operators", "activities 不含 CPU：没有框架算子"),
    "missing.ascend.memory_off": (
        "profile_memory was off: no memory curves and no operator memory",
        "profile_memory 未开启：没有内存曲线和算子内存",
    ),
    "missing.ascend.stack_off": ("with_stack was off: no call stacks", "with_stack 未开启：没有调用栈"),
    "missing.ascend.shapes_off": ("record_shapes was off: no input shapes", "record_shapes 未开启：没有输入 shape"),
    "missing.ascend.no_pmu": (
        "aic_metrics=AiCoreNone: no AI Core PMU metrics",
        "aic_metrics=AiCoreNone：没有 AI Core PMU 指标",
    ),
    "missing.ascend.l2_off": ("l2_cache was off: no L2 cache hit rates", "l2_cache 未开启：没有 L2 cache 命中率"),
    "missing.ascend.no_memory": ("no memory records in the export", "导出数据中没有内存记录"),
    "missing.ascend.no_comm": (
        "no communication operations: single card, or no collective ran in the window",
        "没有通信操作：单卡，或窗口内没有运行集合通信",
    ),
    "missing.ascend.no_matrix": ("no communication matrix in the export", "导出数据中没有通信矩阵"),
    "missing.ascend.rank_discovered": (
        "no rank found in profiler_info / db name / metadata: rank assigned by discovery",
        "在 profiler_info / db 文件名 / 元数据中未找到卡号：卡号由发现顺序分配",
    ),
    "missing.ascend.no_steps_file": (
        "no step ranges: trace_view.json, which holds the ProfilerStep ranges, is not in the export{scheduled}{known}",
        "没有迭代区间：导出数据中没有保存 ProfilerStep 区间的 trace_view.json{scheduled}{known}",
    ),
    "missing.ascend.no_steps_marker": (
        "no step ranges: the export holds no ProfilerStep marker although profiler_info records a schedule{known}",
        "没有迭代区间：虽然 profiler_info 记录了 schedule，导出数据中却没有 ProfilerStep 标记{known}",
    ),
    "missing.ascend.no_steps_schedule": (
        "no step ranges: the profiler ran without a schedule / prof.step(){known}",
        "没有迭代区间：profiler 运行时没有 schedule / prof.step(){known}",
    ),
    "missing.part.scheduled": (" (profiler_info records a schedule)", "（profiler_info 记录了 schedule）"),
    "missing.part.known_1": ("; step id {ids} known from its other files", "；由其他文件得知迭代号 {ids}"),
    "missing.part.known_n": ("; step ids {ids} known from its other files", "；由其他文件得知迭代号 {ids}"),
    "missing.ascend.unparsed": (
        "no parsed torch_npu output in {folder}/: {hint}",
        "{folder}/ 中没有解析后的 torch_npu 输出：{hint}",
    ),
    "missing.ascend.loose_trace_view": (
        "trace_view.json found on its own (no *_ascend_pt/{folder}/ around it): the timeline and operators only",
        "单独找到 trace_view.json（外层没有 *_ascend_pt/{folder}/）：只有时间线和算子",
    ),
    "missing.ascend.no_trace_view": (
        "no trace_view.json: no timeline, no operator timestamps or self time from nesting",
        "没有 trace_view.json：没有时间线，没有算子时间戳，也无法由嵌套得出自身耗时",
    ),
    "missing.ascend.kernels_from_trace": (
        "no kernel_details.csv: kernels taken from trace_view.json's Ascend Hardware lanes (no op types, shapes or PMU "
        "metrics)",
        "没有 kernel_details.csv：kernel 取自 trace_view.json 的 Ascend Hardware 泳道"
        "（没有算子类型、shape 或 PMU 指标）",
    ),
    "missing.ascend.no_kernel_details": (
        "no kernel_details.csv: no device kernels",
        "没有 kernel_details.csv：没有 Device kernel",
    ),
    "missing.ascend.no_start_info": (
        "device {device}: no start_info.{device}, so its timeline stays on the device's monotonic clock (not wall "
        "time)",
        "设备 {device}：没有 start_info.{device}，其时间线保持设备的单调时钟（非墙上时间）",
    ),
    "missing.torch_npu.no_db": (
        "no ascend_pytorch_profiler_{{rank}}.db in ASCEND_PROFILER_OUTPUT/",
        "ASCEND_PROFILER_OUTPUT/ 中没有 ascend_pytorch_profiler_{{rank}}.db",
    ),
    "missing.torch_npu.no_analysis_db": (
        "no analysis.db: no wait/transit split, bandwidth or communication matrix",
        "没有 analysis.db：没有等待/传输拆分、带宽和通信矩阵",
    ),
    "missing.torch_npu.raw": (
        "not parsed: this folder holds only raw {what} ({why}), no ASCEND_PROFILER_OUTPUT/; {hint}",
        "未解析：该目录只有原始的 {what}（{why}），没有 ASCEND_PROFILER_OUTPUT/；{hint}",
    ),
    "missing.part.no_profiler_data": ("no profiler data", "没有性能数据"),
    "missing.part.stopped_early": (
        "the job stopped before the profiler finished (no profiler_info file)",
        "作业在 profiler 结束前停止（没有 profiler_info 文件）",
    ),
    "missing.part.analyse_skipped": (
        "parsing was skipped (e.g. dynamic profiling with analyse=false)",
        "跳过了解析（例如动态采集设置了 analyse=false）",
    ),
    # msprof
    "missing.msprof.empty": (
        "nothing to read: every file of {folder}/ is empty (0 bytes), msprof exported no data",
        "无可读取的内容：{folder}/ 中的每个文件都为空（0 字节），msprof 没有导出数据",
    ),
    "missing.msprof.not_exported": (
        "not exported: this PROF folder holds raw data only, no {folder}/; {hint}",
        "未导出：该 PROF 目录只有原始数据，没有 {folder}/；{hint}",
    ),
    "missing.msprof.no_analyzer_db": (
        "no analyze/communication_analyzer.db (msprof --analyze=on): no wait/transit split, bandwidth or communication "
        "matrix",
        "没有 analyze/communication_analyzer.db（msprof --analyze=on）：没有等待/传输拆分、带宽和通信矩阵",
    ),
    "missing.msprof.no_framework": (
        "no framework operators: msprof records CANN and device activity only",
        "没有框架算子：msprof 只记录 CANN 和 Device 活动",
    ),
    "missing.msprof.no_timeline_db": (
        "no timeline: the db has no TASK / CANN_API rows",
        "没有时间线：db 中没有 TASK / CANN_API 行",
    ),
    "missing.msprof.no_timeline": (
        "no timeline: the export has no msprof_*.json (or task_time) file",
        "没有时间线：导出数据中没有 msprof_*.json（或 task_time）文件",
    ),
    "missing.msprof.no_kernels_db": (
        "no device kernels: the db has no COMPUTE_TASK_INFO rows",
        "没有 Device kernel：db 中没有 COMPUTE_TASK_INFO 行",
    ),
    "missing.msprof.no_kernels": (
        "no device kernels: the export has no op_summary / task_time file",
        "没有 Device kernel：导出数据中没有 op_summary / task_time 文件",
    ),
    "missing.msprof.no_steps_db": (
        "no step ranges: msprof's db export has no step table",
        "没有迭代区间：msprof 的 db 导出没有迭代表",
    ),
    "missing.msprof.no_steps": (
        "no step ranges: the export has no step_trace file",
        "没有迭代区间：导出数据中没有 step_trace 文件",
    ),
    "missing.msprof.no_memory_db": (
        "no memory records: the db has no NPU_MEM / MEMORY_RECORD / OP_MEMORY rows (memory collection was off)",
        "没有内存记录：db 中没有 NPU_MEM / MEMORY_RECORD / OP_MEMORY 行（未开启内存采集）",
    ),
    "missing.msprof.no_memory": (
        "no memory records: the export has no npu_mem / memory_record / operator_memory file (memory collection was "
        "off)",
        "没有内存记录：导出数据中没有 npu_mem / memory_record / operator_memory 文件（未开启内存采集）",
    ),
    "missing.msprof.no_comm": (
        "no communication operations: single card, or no HCCL op in the window",
        "没有通信操作：单卡，或窗口内没有 HCCL 算子",
    ),
    "missing.msprof.no_matrix": (
        "no communication matrix: msprof --analyze output is read only with a db export",
        "没有通信矩阵：msprof --analyze 的输出只在 db 导出时读取",
    ),
    # MindSpore
    "missing.mindspore.not_analysed": (
        "not analysed: the job ended {when}, so there is no ASCEND_PROFILER_OUTPUT/; the host CPU ops were read from "
        "the raw FRAMEWORK/ text files (no timeline of scopes, no steps)",
        "未分析：作业在{when}结束，因此没有 ASCEND_PROFILER_OUTPUT/；Host CPU 算子读自原始的 FRAMEWORK/ 文本文件"
        "（没有作用域时间线，没有迭代）",
    ),
    "missing.part.after_stop": (
        "after the profiler stopped but before analyse()",
        "profiler 停止之后、analyse() 之前",
    ),
    "missing.part.before_analyse": ("before analyse()", "analyse() 之前"),
    "missing.mindspore.cann_only": (
        "MindSpore did not finish parsing (no ASCEND_PROFILER_OUTPUT/): CANN data read from "
        "PROF_*/mindstudio_profiler_output/, without framework operators",
        "MindSpore 未完成解析（没有 ASCEND_PROFILER_OUTPUT/）：CANN 数据读自 PROF_*/mindstudio_profiler_output/，"
        "没有框架算子",
    ),
    "missing.mindspore.not_parsed": (
        "not parsed: this folder holds only raw FRAMEWORK/ or PROF_*/ data, no ASCEND_PROFILER_OUTPUT/; {hint}",
        "未解析：该目录只有原始的 FRAMEWORK/ 或 PROF_*/ 数据，没有 ASCEND_PROFILER_OUTPUT/；{hint}",
    ),
    "missing.mindspore.exited_early": (
        "no profiling data: the job exited before the profiler stopped (only logs/ were written: no FRAMEWORK/ data "
        "and no ASCEND_PROFILER_OUTPUT/), so there is nothing to parse",
        "没有性能数据：作业在 profiler 停止前退出（只写了 logs/：没有 FRAMEWORK/ 数据和 ASCEND_PROFILER_OUTPUT/），"
        "无可解析",
    ),
    "missing.mindspore.no_data": (
        "no profiling data: the folder holds no FRAMEWORK/ data and no ASCEND_PROFILER_OUTPUT/",
        "没有性能数据：该目录没有 FRAMEWORK/ 数据和 ASCEND_PROFILER_OUTPUT/",
    ),
    "missing.mindspore.no_analyzer_db": (
        "no communication_analyzer.db: no wait/transit split, bandwidth or communication matrix",
        "没有 communication_analyzer.db：没有等待/传输拆分、带宽和通信矩阵",
    ),
    "missing.mindspore.cpu_only": (
        "CPU-only profile: no device kernels and no CANN data; {comm}",
        "仅 CPU 的采集：没有 Device kernel 和 CANN 数据；{comm}",
    ),
    "missing.part.cpu_collectives": (
        "collectives read from the CPU ops, without sizes or groups",
        "集合通信读自 CPU 算子，没有大小和通信组",
    ),
    "missing.part.no_collective": ("no collective ran in the window", "窗口内没有运行集合通信"),
    "missing.mindspore.no_steps": (
        "no step ranges: MindSpore writes step markers only for Ascend runs with a schedule / step(){window}",
        "没有迭代区间：MindSpore 只在带 schedule / step() 的昇腾运行中写迭代标记{window}",
    ),
    "missing.part.window": (
        " (this dynamic-profiling window covered steps {first}-{last})",
        "（该动态采集窗口覆盖迭代 {first}-{last}）",
    ),
    "missing.mindspore.no_memory": (
        "no memory records: profile_memory was off (or the job died before they were written)",
        "没有内存记录：profile_memory 未开启（或作业在写出前已终止）",
    ),
    "missing.mindspore.no_info": (
        "no profiler_info file (MindSpore writes none on CPU): version and switches unknown",
        "没有 profiler_info 文件（MindSpore 在 CPU 上不写）：版本和开关未知",
    ),
    "missing.mindspore.no_framework": ("no framework operators", "没有框架算子"),
    "missing.legacy.relative_times": (
        "times are relative to the first op (no output_timeline_data file with device times)",
        "时间相对于第一个算子（没有带设备时间的 output_timeline_data 文件）",
    ),
    "missing.legacy.device_clock": (
        "times are on the device clock (the legacy files carry no wall-clock reference)",
        "时间为设备时钟（旧版文件没有墙上时间参考）",
    ),
    "missing.legacy.assumed_hz": (
        "step times assume the 100 MHz system counter of Ascend 910 (no info.json with hwts_frequency found)",
        "迭代时间假定为昇腾 910 的 100 MHz 系统计数器（未找到带 hwts_frequency 的 info.json）",
    ),
    "missing.legacy.no_steps": ("no step ranges: no step_trace_raw file", "没有迭代区间：没有 step_trace_raw 文件"),
    "missing.legacy.no_comm": (
        "no communication operations or matrix: legacy hccl files are not ingested by this version",
        "没有通信操作和通信矩阵：此版本不导入旧版 hccl 文件",
    ),
    "missing.legacy.no_host_ops": (
        "no host operators: the legacy files hold device ops only",
        "没有 Host 算子：旧版文件只有 Device 算子",
    ),
    "missing.legacy.no_memory": ("no memory records in the legacy files", "旧版文件中没有内存记录"),
    # the rankscope collector
    "missing.collector.no_output": (
        "profiling window started (status {status}) but no profiler output was written",
        "采集窗口已开始（状态 {status}），但没有写出性能数据",
    ),
    "missing.collector.no_markers": (
        "this folder holds steps {first}-{last} (collector sidecar) but the producer wrote no step markers: its "
        "events are not split by step",
        "该目录包含迭代 {first}-{last}（采集器 sidecar），但采集工具没有写迭代标记：其事件未按迭代拆分",
    ),
    "missing.collector.one_step": (
        "step {step} from the collector's sidecar (this folder holds that step; the producer writes no step markers "
        "here): the step spans the folder's events",
        "迭代 {step} 来自采集器的 sidecar（该目录包含这一步；采集工具在此不写迭代标记）：该迭代覆盖该目录的所有事件",
    ),
    "missing.collector.not_completed": (
        "not a completed step of the collector's window (its sidecar lists {n} folder(s), not this one): the job "
        "stopped{after} while the profiler was writing this step's data (status {status}{why})",
        "不是采集器窗口中完成的迭代（其 sidecar 列出 {n} 个目录，不含本目录）：作业在{after} profiler "
        "写出这一步的数据时停止（状态 {status}{why}）",
    ),
    "missing.part.after_step": (" after step {step}", "迭代 {step} 之后"),
    "missing.part.comma_reason": (", {reason}", "，{reason}"),
    # -- a run's and a file's status at ingest (collections.status, source_files.status) ---------
    "term.run_status.complete": ("complete", "完整"),
    "term.run_status.partial": ("partial", "不完整"),
    "term.run_status.unparsed": ("unparsed", "未解析"),
    "term.run_status.error": ("error", "错误"),
    "term.file_status.ok": ("ok", "正常"),
    "term.file_status.warning": ("warning", "警告"),
    "term.file_status.error": ("error", "错误"),
    "term.file_status.ignored": ("ignored", "已忽略"),
    # -- where a collective's wait / transit split comes from (analyses.communication wait_source) --
    "term.wait_source.producer": ("producer", "profiler 测得"),
    "term.wait_source.estimated": ("estimated", "估计"),
    # -- how the step breakdown's Communication was computed (step_breakdown comm_definition) ------
    "term.comm_definition.op spans": ("op spans", "通信算子区间"),
    "term.comm_definition.task union": ("task union", "HCCL 任务并集"),
    "term.comm_definition.host ranges": ("host ranges", "Host 侧区间"),
    # -- how two runs' steps and ranks were paired (analyses.run_pairing notes: English, read back) --
    "pairing.steps_1": ("step {steps}", "迭代 {steps}"),
    "pairing.steps_n": ("steps {steps}", "迭代 {steps}"),
    "pairing.no_steps": ("the whole profile (no steps)", "整个采集（无迭代）"),
    "pairing.common_steps": (
        "steps compared: {steps}, the numbers both runs profiled",
        "比较的迭代：{steps}，即两个运行都采集了的迭代号",
    ),
    "pairing.no_common_step": (
        "no step number in common ({base_run}: {base_steps}; {new_run}: {new_steps}): every profiled step of each "
        "run compared, per step (--base-step / --new-step to choose one of each)",
        "没有共同的迭代号（{base_run}：{base_steps}；{new_run}：{new_steps}）：比较每个运行采集的所有迭代，按每步计"
        "（用 --base-step / --new-step 各选一个）",
    ),
    "pairing.by_layout": (
        "world sizes differ ({base_run}: {base_world}, {new_run}: {new_world}): ranks matched by layout coordinate "
        "(the same place in every dimension but data parallelism), each class compared as its mean",
        "总卡数不同（{base_run}：{base_world}，{new_run}：{new_world}）：按并行布局坐标匹配卡（除数据并行外每个维度的"
        "位置相同），每类按其平均值比较",
    ),
    "pairing.by_number": (
        "world sizes differ ({base_run}: {base_world}, {new_run}: {new_world}) and no layout in common: ranks "
        "matched by number",
        "总卡数不同（{base_run}：{base_world}，{new_run}：{new_world}）且没有共同的并行布局：按卡号匹配",
    ),
    "pairing.in_order": (
        "no rank number in common ({base_run}: {base_ranks}; {new_run}: {new_ranks}): ranks paired in order",
        "没有共同的卡号（{base_run}：{base_ranks}；{new_run}：{new_ranks}）：按顺序配对",
    ),
    "pairing.unmatched": ("ranks of {run} without a match: {ranks}", "{run} 中没有匹配的卡：{ranks}"),
    # -- names of the rank classes and communication groups a comparison pairs (English, read back) --
    "label.rank": ("rank {rank}", "卡 {rank}"),
    "label.ranks": ("ranks {ranks}", "卡 {ranks}"),
    "label.all_ranks": ("all ranks", "所有卡"),
    "label.rank_pair": ("rank {base} ↔ {new}", "卡 {base} ↔ 卡 {new}"),
    "label.group": ("{role} (ranks {ranks})", "{role}（卡 {ranks}）"),
    "label.pair": ("{a} ↔ {b}", "{a} ↔ {b}"),
    "sep.comma": (", ", "，"),
    "sep.end": (".", "。"),
    # -- what was wrong with one file (source_files.error: stored in English, read back by
    # ``translate(text, lang, "problem")``; ``problem(...)`` writes them; {kind} names a file kind,
    # {detail} is the system's or the library's own words)
    "problem.cannot_read": ("cannot read: {detail}", "无法读取：{detail}"),
    "problem.cannot_read_kind": ("cannot read {kind}: {detail}", "无法读取 {kind}：{detail}"),
    "problem.empty": ("empty file", "空文件"),
    "problem.empty_whitespace": ("empty file (only whitespace)", "空文件（只有空白字符）"),
    "problem.empty_kind": ("empty file: no {kind} data", "空文件：没有 {kind} 数据"),
    "problem.empty_zero_kind": ("empty file (0 bytes): no {kind} data", "空文件（0 字节）：没有 {kind} 数据"),
    "problem.empty_no_header": ("empty file (no header): no {kind} data", "空文件（没有表头）：没有 {kind} 数据"),
    "problem.empty_expected": ("empty file (0 bytes; expected: {kind})", "空文件（0 字节；应为：{kind}）"),
    "problem.not_json_kind": ("not valid JSON ({kind}): {detail}", "不是有效的 JSON（{kind}）：{detail}"),
    "problem.not_object.a": ("not a {kind} file: the JSON is not an object", "不是 {kind} 文件：JSON 不是对象"),
    "problem.not_object.an": ("not an {kind} file: the JSON is not an object", "不是 {kind} 文件：JSON 不是对象"),
    "problem.csv_binary.a": ("not a {kind}: binary content, not CSV text", "不是 {kind}：二进制内容，不是 CSV 文本"),
    "problem.csv_binary.an": ("not an {kind}: binary content, not CSV text", "不是 {kind}：二进制内容，不是 CSV 文本"),
    "problem.csv_no_header.a": ("not a {kind}: the first line is not a CSV header", "不是 {kind}：第一行不是 CSV 表头"),
    "problem.csv_no_header.an": (
        "not an {kind}: the first line is not a CSV header",
        "不是 {kind}：第一行不是 CSV 表头",
    ),
    "problem.csv_columns.a": (
        "not a {kind}: the header lacks {missing} (expected columns {expected}; found {found})",
        "不是 {kind}：表头缺少 {missing}（应有的列：{expected}；实际的列：{found}）",
    ),
    "problem.csv_columns.an": (
        "not an {kind}: the header lacks {missing} (expected columns {expected}; found {found})",
        "不是 {kind}：表头缺少 {missing}（应有的列：{expected}；实际的列：{found}）",
    ),
    "problem.csv_unreadable": ("not a readable CSV ({kind}): {detail}", "不是可读的 CSV（{kind}）：{detail}"),
    "problem.not_sqlite": (
        "not a SQLite database (no SQLite header; expected: {kind})",
        "不是 SQLite 数据库（没有 SQLite 文件头；应为：{kind}）",
    ),
    "problem.sqlite_corrupt": ("corrupt SQLite database ({kind}): {detail}", "SQLite 数据库已损坏（{kind}）：{detail}"),
    "problem.gz_cut": (
        "compressed stream ends early (cut after {n} decompressed bytes)",
        "压缩数据流提前结束（解压出 {n} 字节后被截断）",
    ),
    "problem.gz_trailing": (
        "bytes after the compressed data ignored (from byte {n})",
        "压缩数据之后的字节已忽略（从第 {n} 字节起）",
    ),
    "problem.gz_corrupt": (
        "compressed data is corrupt after {n} decompressed bytes ({detail})",
        "解压出 {n} 字节后压缩数据损坏（{detail}）",
    ),
    "problem.gz_bomb": (
        "decompresses to more than {ratio} times its size ({mib} MiB from the first {kib} KiB): not read "
        "(a decompression bomb, or not profiler data)",
        "解压后超过自身大小的 {ratio} 倍（前 {kib} KiB 解压出 {mib} MiB）：未读取（解压炸弹，或不是性能数据）",
    ),
    "problem.not_json_start": ("not JSON (does not start with '{{' or '[')", "不是 JSON（开头不是 '{{' 或 '['）"),
    "problem.not_json_text": (
        "not JSON: the file holds text (starts with {start})",
        "不是 JSON：文件内容为文本（开头为 {start}）",
    ),
    "problem.not_json_binary": (
        "not JSON: the file holds binary data (starts with {start})",
        "不是 JSON：文件内容为二进制数据（开头为 {start}）",
    ),
    "problem.not_a_trace": (
        "JSON but not a Kineto/Chrome trace (no traceEvents array)",
        "是 JSON，但不是 Kineto/Chrome trace（没有 traceEvents 数组）",
    ),
    "problem.no_trace_events": (
        "no traceEvents array: not a Chrome/Kineto trace",
        "没有 traceEvents 数组：不是 Chrome/Kineto trace",
    ),
    "problem.trace_events_not_array": ("traceEvents is not an array", "traceEvents 不是数组"),
    "problem.no_events": ("trace has no events", "trace 中没有事件"),
    "problem.unterminated": (
        "file ends inside the event list (unterminated JSON array): kept {kept} complete events, dropped the "
        "last {dropped} bytes (from byte {at})",
        "文件在事件列表中途结束（JSON 数组未闭合）：保留了 {kept} 个完整事件，"
        "丢弃了最后 {dropped} 字节（从第 {at} 字节起）",
    ),
    "problem.kept_before": ("{problem}; kept the events before it", "{problem}；保留了此前的事件"),
    "problem.trailing_bytes": (
        "{n} unexpected bytes after the event array ignored",
        "事件数组之后的 {n} 个多余字节已忽略",
    ),
    "problem.object_not_closed": ("trace object is not closed ('}}' missing)", "trace 对象没有闭合（缺少 '}}'）"),
    "problem.bad_header": (
        "unreadable trace header ({detail}); event data still read",
        "trace 文件头无法读取（{detail}）；事件数据仍已读取",
    ),
    "problem.rank_mismatch": (
        "{field} is {found} but the folder says rank {rank}; kept {rank}",
        "{field} 为 {found}，但文件夹表明是卡 {rank}；按卡 {rank} 处理",
    ),
    "problem.collector_incomplete": (
        "last line is incomplete (the job stopped while writing it); dropped",
        "最后一行不完整（作业在写入时停止）；已丢弃",
    ),
    "problem.collector_bad_lines": (
        "{n} unreadable line(s) skipped (the first: line {line})",
        "跳过了 {n} 行无法读取的内容（第一处：第 {line} 行）",
    ),
    "problem.collector_no_steps": ("no step records", "没有迭代记录"),
    "problem.empty_op_timeline": ("empty file: no op timeline", "空文件：没有算子时间线"),
    "problem.empty_cpu_timestamps": ("empty file: no CPU op timestamps", "空文件：没有 CPU 算子时间戳"),
    "problem.empty_cpu_shapes": ("empty file: no CPU op shapes", "空文件：没有 CPU 算子 shape"),
    "problem.not_output_timeline": (
        "not an output_timeline_data file: header {header}",
        "不是 output_timeline_data 文件：表头为 {header}",
    ),
    "problem.malformed_lines": ("{n} malformed line(s) skipped", "跳过了 {n} 行格式错误的内容"),
    "problem.malformed_records": ("{n} malformed record(s) skipped", "跳过了 {n} 条格式错误的记录"),
    "problem.not_in_framework_raw": (
        "{n} op(s) not found in framework_raw: no op type / shapes for them",
        "{n} 个算子在 framework_raw 中找不到：它们没有算子类型和 shape",
    ),
    "problem.cells_no_numbers": (
        "{n} cell(s) of column {column} are no numbers (e.g. {example}); read as empty",
        "{column} 列有 {n} 个单元格不是数字（例如 {example}）；按空值读取",
    ),
    "problem.ends_mid_line": (
        "file ends mid-line (the job stopped while writing it); the last op's last record may be incomplete",
        "文件在一行的中途结束（作业在写入时停止）；最后一个算子的最后一条记录可能不完整",
    ),
    "problem.no_cpu_records": (
        "not a cpu_op_execute_timestamp file: no 'name;type;start,dur,tid' records",
        "不是 cpu_op_execute_timestamp 文件：没有 'name;type;start,dur,tid' 记录",
    ),
    "problem.trace_object": (
        "trace_view.json is a trace object, not the bare event array torch_npu writes; read anyway",
        "trace_view.json 是 trace 对象，而不是 torch_npu 写出的纯事件数组；仍已读取",
    ),
    "problem.rows_without_iteration": (
        "{n} row(s) without iteration id, end or time skipped",
        "跳过了 {n} 行没有迭代号、结束时间或时间的记录",
    ),
    "problem.no_group": ("no communication group in the file", "文件中没有通信组"),
    "problem.no_comm_op": (
        "no communication operation in the file (empty collective / p2p sections)",
        "文件中没有通信算子（collective / p2p 部分为空）",
    ),
    "problem.no_comm_link": (
        "no communication link in the file (empty collective / p2p sections)",
        "文件中没有通信链路（collective / p2p 部分为空）",
    ),
    "problem.not_keyed_by_step.a": (
        "not a {kind}: the JSON is not an object keyed by step",
        "不是 {kind}：JSON 不是按迭代组织的对象",
    ),
    "problem.not_keyed_by_step.an": (
        "not an {kind}: the JSON is not an object keyed by step",
        "不是 {kind}：JSON 不是按迭代组织的对象",
    ),
    "problem.no_comm_sections.a": (
        "not a {kind}: no step with 'collective' / 'p2p' sections",
        "不是 {kind}：没有含 'collective' / 'p2p' 部分的迭代",
    ),
    "problem.no_comm_sections.an": (
        "not an {kind}: no step with 'collective' / 'p2p' sections",
        "不是 {kind}：没有含 'collective' / 'p2p' 部分的迭代",
    ),
    "problem.no_trace_view": (
        "trace_view.json is missing: operators written from this file, without timestamps",
        "缺少 trace_view.json：算子由此文件写入，没有时间戳",
    ),
    "problem.start_info_clock": (
        "not a start_info file: a clock that is no number ({detail})",
        "不是 start_info 文件：时钟不是数字（{detail}）",
    ),
    "problem.start_info_fields": (
        "not a start_info file: no collectionTimeBegin / clockMonotonicRaw",
        "不是 start_info 文件：没有 collectionTimeBegin / clockMonotonicRaw",
    ),
    # rows kept out because a time cannot be true (units.time_problems): {where} names them (``where.*``)
    "problem.time_overflow.row": (
        "{table}: {n} row(s) not stored, {column} beyond what 64-bit ns hold (overflow, or not a number) ({where})",
        "{table}：{n} 行未存储，{column} 超出 64 位纳秒所能表示的范围（溢出或不是数字）（{where}）",
    ),
    "problem.time_overflow.event": (
        "{table}: {n} event(s) not stored, {column} beyond what 64-bit ns hold (overflow, or not a number) ({where})",
        "{table}：{n} 个事件未存储，{column} 超出 64 位纳秒所能表示的范围（溢出或不是数字）（{where}）",
    ),
    "problem.time_negative.row": (
        "{table}: {n} row(s) not stored, {column} negative ({where})",
        "{table}：{n} 行未存储，{column} 为负数（{where}）",
    ),
    "problem.time_negative.event": (
        "{table}: {n} event(s) not stored, {column} negative ({where})",
        "{table}：{n} 个事件未存储，{column} 为负数（{where}）",
    ),
    "problem.time_after_2100.row": (
        "{table}: {n} row(s) not stored, {column} after the year 2100 ({where})",
        "{table}：{n} 行未存储，{column} 晚于 2100 年（{where}）",
    ),
    "problem.time_after_2100.event": (
        "{table}: {n} event(s) not stored, {column} after the year 2100 ({where})",
        "{table}：{n} 个事件未存储，{column} 晚于 2100 年（{where}）",
    ),
    "problem.time_longer_130y.row": (
        "{table}: {n} row(s) not stored, {column} longer than 130 years ({where})",
        "{table}：{n} 行未存储，{column} 长于 130 年（{where}）",
    ),
    "problem.time_longer_130y.event": (
        "{table}: {n} event(s) not stored, {column} longer than 130 years ({where})",
        "{table}：{n} 个事件未存储，{column} 长于 130 年（{where}）",
    ),
    "problem.time_metric_not_stored.row": (
        "{table}: {n} row(s) not stored, a time metric negative or not a time ({where})",
        "{table}：{n} 行未存储，时间类指标为负数或不是时间（{where}）",
    ),
    "problem.time_metric_not_stored.event": (
        "{table}: {n} event(s) not stored, a time metric negative or not a time ({where})",
        "{table}：{n} 个事件未存储，时间类指标为负数或不是时间（{where}）",
    ),
    "problem.ending_after_2100.row": (
        "{table}: {n} row(s) not stored, ending after the year 2100 ({where})",
        "{table}：{n} 行未存储，结束时间晚于 2100 年（{where}）",
    ),
    "problem.ending_after_2100.event": (
        "{table}: {n} event(s) not stored, ending after the year 2100 ({where})",
        "{table}：{n} 个事件未存储，结束时间晚于 2100 年（{where}）",
    ),
    # values the store cannot hold as given (factwriter.conform)
    "problem.not_text": (
        "{column}: values that are not UTF-8 text (bytes, numbers) stored as text",
        "{column}：不是 UTF-8 文本的值（字节、数字）已按文本存储",
    ),
    "problem.not_numbers": (
        "{column}: {n} value(s) that are not numbers or do not fit 64 bits, stored as empty (e.g. {example})",
        "{column}：{n} 个值不是数字或超出 64 位，已按空值存储（例如 {example}）",
    ),
    # MindSpore's legacy AI CPU rows without a time
    "problem.rows_without_time": (
        "{n} row(s) skipped, without a start or an end time that is a number ({rows})",
        "跳过了 {n} 行开始或结束时间不是数字的记录（{rows}）",
    ),
    "problem.rows_without_time_eg": (
        "{n} row(s) skipped, without a start or an end time that is a number ({rows}; e.g. {example})",
        "跳过了 {n} 行开始或结束时间不是数字的记录（{rows}；例如 {example}）",
    ),
    # the Ascend readers
    "problem.l2_unmatched": (
        "{n} of {total} rows match no kernel of kernel_details.csv (by stream/task id or name); skipped",
        "{total} 行中有 {n} 行匹配不到 kernel_details.csv 中的 kernel（按 stream/task id 或名称）；已跳过",
    ),
    "problem.op_device_times": (
        "device times of {attached} of {n} operators attached: {unmatched} row(s) match no trace operator by name "
        "and order, {bad} disagree with the trace's host duration by more than 1 µs",
        "{n} 个算子中 {attached} 个附上了 Device 时间：{unmatched} 行按名称和顺序匹配不到 trace 中的算子，"
        "{bad} 行与 trace 中的 Host 耗时相差超过 1 µs",
    ),
    "problem.db_table_missing": (
        "table {tables} missing: no {holds} (not recorded, or the db is incomplete); the other tables were read",
        "缺少表 {tables}：没有{holds}（未采集，或 db 不完整）；其他表已读取",
    ),
    "problem.db_tables_missing": (
        "tables {tables} missing: no {holds} (not recorded, or the db is incomplete); the other tables were read",
        "缺少表 {tables}：没有{holds}（未采集，或 db 不完整）；其他表已读取",
    ),
    "problem.rank_device_map": (
        "RANK_DEVICE_MAP says rank {found} but the collection is rank {rank}; kept {rank}",
        "RANK_DEVICE_MAP 表明是卡 {found}，但该采集是卡 {rank}；按卡 {rank} 处理",
    ),
    "problem.schema_damaged": (
        "the db's schema is damaged ({detail}); read with SQLite's schema checks off: {n} table(s) found ({names})",
        "db 的 schema 已损坏（{detail}）；已关闭 SQLite 的 schema 检查读取：找到 {n} 个表（{names}）",
    ),
    "problem.schema_damaged_none": (
        "the db's schema is damaged ({detail}); read with SQLite's schema checks off: {n} table(s) found (none)",
        "db 的 schema 已损坏（{detail}）；已关闭 SQLite 的 schema 检查读取：找到 {n} 个表（无）",
    ),
    "problem.table_unreadable": (
        "{table}: table unreadable ({detail}); skipped",
        "{table}：表无法读取（{detail}）；已跳过",
    ),
    "problem.table_bad_value": (
        "{table}: a value of the wrong type or out of range ({detail}); skipped",
        "{table}：有值类型错误或超出范围（{detail}）；已跳过",
    ),
    "problem.table_cut": (
        "{table}: {detail} after row {n}; the rows before it were read, the rest of the table is lost",
        "{table}：第 {n} 行之后{detail}；此前的行已读取，表的其余部分丢失",
    ),
    "problem.not_utf8": (
        "{table}: {n} text value(s) not valid UTF-8 (e.g. {example}), kept with U+FFFD for the bad bytes",
        "{table}：{n} 个文本值不是有效的 UTF-8（例如 {example}），坏字节以 U+FFFD 保留",
    ),
    "problem.not_utf8_row": (
        "{table}: {n} text value(s) not valid UTF-8 in row {numbers} (e.g. {example}), kept with U+FFFD for the bad "
        "bytes",
        "{table}：第 {numbers} 行有 {n} 个文本值不是有效的 UTF-8（例如 {example}），坏字节以 U+FFFD 保留",
    ),
    "problem.not_utf8_rows": (
        "{table}: {n} text value(s) not valid UTF-8 in rows {numbers} (e.g. {example}), kept with U+FFFD for the bad "
        "bytes",
        "{table}：第 {numbers} 行有 {n} 个文本值不是有效的 UTF-8（例如 {example}），坏字节以 U+FFFD 保留",
    ),
    "problem.l2_kind_unread": (
        "not read: {kind} could not be read, so L2 rates cannot be joined",
        "未读取：{kind} 无法读取，因此无法关联 L2 命中率",
    ),
    "problem.l2_no_kernel_details": (
        "not read: kernel_details.csv is missing, so L2 rates cannot be joined to kernels",
        "未读取：缺少 kernel_details.csv，因此无法将 L2 命中率关联到 kernel",
    ),
    "problem.bad_rank_list": ("not {kind}: a rank list holds {detail}", "不是 {kind}：rank 列表中有 {detail}"),
    "problem.no_string_ids": (
        "not {kind}: no STRING_IDS table (expected tables STRING_IDS, TASK, COMPUTE_TASK_INFO, CANN_API, ...)",
        "不是 {kind}：没有 STRING_IDS 表（应有 STRING_IDS、TASK、COMPUTE_TASK_INFO、CANN_API 等表）",
    ),
    "problem.not_analysis_db": (
        "not a torch_npu analysis.db: none of the tables {tables}",
        "不是 torch_npu 的 analysis.db：{tables} 中的表一个都没有",
    ),
    # CSV tables and traces read in a stream
    "problem.cells_not.numbers": (
        "{n} cell(s) of column {column} are not numbers (e.g. {example}); read as empty",
        "{column} 列有 {n} 个单元格不是数字（例如 {example}）；按空值读取",
    ),
    "problem.cells_not.us": (
        "{n} cell(s) of column {column} are not µs values (e.g. {example}); read as empty",
        "{column} 列有 {n} 个单元格不是 µs 数值（例如 {example}）；按空值读取",
    ),
    "problem.cells_not.integers": (
        "{n} cell(s) of column {column} are not integers (e.g. {example}); read as empty",
        "{column} 列有 {n} 个单元格不是整数（例如 {example}）；按空值读取",
    ),
    "problem.quote_not_closed": (
        "a quote opened in record {record} is never closed: the {lines} line(s) after it were read as one cell; "
        "that record dropped",
        "第 {record} 条记录中的引号没有闭合：其后的 {lines} 行被读成了一个单元格；该记录已丢弃",
    ),
    "problem.ends_mid_row": (
        "file ends mid-row (last row incomplete: {n} of {ncols} cells); dropped it",
        "文件在一行的中途结束（最后一行不完整：{ncols} 个单元格中只有 {n} 个）；已丢弃该行",
    ),
    "problem.ends_mid_row_newline": (
        "file ends mid-row (last row incomplete: no final newline); dropped it",
        "文件在一行的中途结束（最后一行不完整：没有结尾的换行符）；已丢弃该行",
    ),
    "problem.cell_count": (
        "{n} record(s) with a cell count different from the header's {ncols} skipped (record {records})",
        "跳过了 {n} 条单元格数与表头的 {ncols} 个不同的记录（第 {records} 条）",
    ),
    "problem.bytes_replaced": (
        "{n} byte sequence(s) that are not UTF-8 (replaced)",
        "{n} 处字节序列不是 UTF-8（已替换）",
    ),
    "problem.header_only": ("header only: no data rows", "只有表头：没有数据行"),
    "problem.array_not_closed": (
        "file ends after the last event without closing the JSON array",
        "文件在最后一个事件之后结束，JSON 数组没有闭合",
    ),
    "problem.keys_after_events": ("unreadable keys after traceEvents ignored", "traceEvents 之后无法读取的键已忽略"),
    # -- a trace stream's malformed events (readers.chrome.stream): why each was skipped, as the
    # decoder said it ({why}: items of 'why.*' joined by "; ", msgspec's words; one no template wrote stays as it is)
    "problem.events_skipped": (
        "{n} malformed event(s) skipped ({why}; at byte {at} of the file)",
        "跳过了 {n} 个格式错误的事件（{why}；位于文件的第 {at} 字节）",
    ),
    "problem.events_skipped_decompressed": (
        "{n} malformed event(s) skipped ({why}; at byte {at} of the decompressed data)",
        "跳过了 {n} 个格式错误的事件（{why}；位于解压后数据的第 {at} 字节）",
    ),
    "problem.events_utf8_replaced": (
        "{n} event(s) with bytes that are not UTF-8, kept with them replaced by U+FFFD (at byte {at})",
        "{n} 个事件含有不是 UTF-8 的字节，已保留并以 U+FFFD 替换这些字节（位于第 {at} 字节）",
    ),
    # -- SQLite's own words (readers.ascend.db.sqlite.sqlite_problem), read back in Chinese
    "problem.sqlite.not_utf8": ("{detail} (text that is not valid UTF-8)", "{detail}（不是有效 UTF-8 的文本）"),
    "problem.sqlite.schema": ("malformed database schema ({table})", "数据库 schema 格式错误（{table}）"),
    "problem.sqlite.schema_detail": (
        "malformed database schema ({table}) - {detail}",
        "数据库 schema 格式错误（{table}）- {detail}",
    ),
    "problem.sqlite.malformed": ("database disk image is malformed", "数据库磁盘映像已损坏"),
    "problem.sqlite.not_a_db": ("file is not a database", "文件不是数据库"),
    "problem.sqlite.no_table": ("no such table: {table}", "没有表：{table}"),
    "problem.sqlite.no_column": ("no such column: {column}", "没有列：{column}"),
    "problem.sqlite.cannot_open": ("unable to open database file", "无法打开数据库文件"),
    "problem.sqlite.syntax": ("near {token}: syntax error", "{token} 附近：语法错误"),
    # -- why a file was not read (source_files.status 'ignored')
    "problem.ignored.not_used": ("not used by the reader", "读取器未使用"),
    "problem.ignored.no_reader": ("no reader for producer {producer}", "没有 {producer} 的读取器"),
    "problem.ignored.unknown": ("not a known profiler output", "不是已知的性能数据采集工具输出"),
    "problem.ignored.json_not_trace": ("JSON file that is not a profiler trace", "不是性能数据 trace 的 JSON 文件"),
    "problem.ignored.op_args": (
        "operator-argument dump for AOE (record_op_args), not profiling data",
        "AOE 的算子参数转储（record_op_args），不是性能数据",
    ),
    "problem.ignored.sidecar_not_json": (
        "collector sidecar is not valid JSON (or not a JSON object)",
        "采集器的 sidecar 文件不是有效的 JSON（或不是 JSON 对象）",
    ),
    "problem.ignored.legacy_copy": (
        "legacy copy of rank {rank}'s data; the *_ascend_ms folder next to it was read",
        "卡 {rank} 数据的旧格式副本；已读取其旁边的 *_ascend_ms 文件夹",
    ),
    "problem.ignored.ms_raw_cann": (
        "raw CANN data of the MindSpore run; the *_ascend_ms folder next to it was read",
        "MindSpore 运行的 CANN 原始数据；已读取其旁边的 *_ascend_ms 文件夹",
    ),
    "problem.ignored.run_file_no_collection": (
        "a file of the whole run, but the run has no collection to read it with",
        "属于整个运行的文件，但该运行没有可用来读取它的采集数据",
    ),
    "problem.ignored.run_file_again": ("another {file} of this run was read", "已读取本次运行的另一个 {file}"),
    "problem.ignored.msprof_older_db": (
        "older msprof db export ({file} is read)",
        "较旧的 msprof db 导出（已读取 {file}）",
    ),
    "problem.ignored.not_in_prof": ("not part of the PROF folder", "不属于 PROF 文件夹"),
    "problem.ignored.msprof_done": ("msprof completion marker", "msprof 完成标记"),
    "problem.ignored.msprof_notes": ("msprof export notes", "msprof 导出说明"),
    "problem.ignored.msprof_export_other": (
        "not a file of the msprof export this version reads",
        "不是此版本读取的 msprof 导出文件",
    ),
    "problem.ignored.msprof_log": ("msprof export log", "msprof 导出日志"),
    "problem.ignored.msprof_analyze": (
        "msprof --analyze output is not ingested by this version (read the per-op communication from the timeline)",
        "此版本不导入 msprof --analyze 的输出（逐算子的通信从时间线读取）",
    ),
    "problem.ignored.msprof_db_of_text": (
        "the same data as the text export in {folder}/, which was read",
        "与 {folder}/ 中的文本导出数据相同，已读取后者",
    ),
    "problem.ignored.msprof_raw": (
        "raw msprof data; its exported form is in {folder}/",
        "msprof 原始数据；其导出形式在 {folder}/ 中",
    ),
    "problem.ignored.msprof_other": ("msprof raw or intermediate file, not ingested", "msprof 原始或中间文件，未导入"),
    "problem.ignored.msprof_empty_kind": (
        "0-byte file: msprof exported no data of this kind",
        "0 字节文件：msprof 没有导出此类数据",
    ),
    "problem.ignored.step_trace_json": (
        "step timeline (JSON): the steps are read from step_trace_*.csv",
        "迭代时间线（JSON）：迭代从 step_trace_*.csv 读取",
    ),
    "problem.ignored.step_trace_json_no_csv": (
        "step timeline (JSON): the steps are read from step_trace_*.csv, which this export lacks",
        "迭代时间线（JSON）：迭代从 step_trace_*.csv 读取，而此导出中没有该文件",
    ),
    "problem.ignored.summary_json": (
        "{kind} as JSON (msprof --summary-format=json) is not ingested by this version; export CSV summaries",
        "此版本不导入 JSON 格式的 {kind}（msprof --summary-format=json）；请导出 CSV 汇总",
    ),
    "problem.ignored.summary": ("{kind} summary is not ingested by this version", "此版本不导入 {kind} 汇总"),
    "problem.ignored.msprof_tx": (
        "mstx/msproftx markers are not ingested by this version",
        "此版本不导入 mstx/msproftx 标记",
    ),
    "problem.ignored.fusion_op": ("graph fusion summary is not ingested by this version", "此版本不导入图融合汇总"),
    "problem.ignored.static_op_mem_plan": (
        "static graph memory plan (no timestamps) is not ingested by this version",
        "此版本不导入静态图内存规划（没有时间戳）",
    ),
    "problem.ignored.aicpu": ("AI CPU task details are not ingested by this version", "此版本不导入 AI CPU 任务详情"),
    "problem.ignored.aicpu_mi": (
        "AI CPU data-queue details are not ingested by this version",
        "此版本不导入 AI CPU 数据队列详情",
    ),
    "problem.ignored.dp": ("data-preprocess summary is not ingested by this version", "此版本不导入数据预处理汇总"),
    "problem.ignored.l2_cache_msprof": (
        "L2 cache rates of msprof exports are not ingested by this version",
        "此版本不导入 msprof 导出的 L2 Cache 命中率",
    ),
    "problem.ignored.task_time_read": (
        "device tasks already read from op_summary and the msprof json timeline",
        "Device 任务已从 op_summary 和 msprof json 时间线读取",
    ),
    "problem.ignored.msprof_same_events": (
        "same events as {file}, which was read",
        "与 {file} 中的事件相同，已读取后者",
    ),
    "problem.ignored.ai_core_utilisation": (
        "AI Core utilisation timeline is not ingested by this version",
        "此版本不导入 AI Core 利用率时间线",
    ),
    "problem.ignored.db_of_text": (
        "db export of the same data; the text export was read",
        "相同数据的 db 导出；已读取文本导出",
    ),
    "problem.ignored.not_ingested": ("not a file this version ingests", "不是此版本导入的文件"),
    "problem.ignored.data_preprocess": (
        "AI CPU pre-processing statistics are not ingested by this version",
        "此版本不导入 AI CPU 预处理统计",
    ),
    "problem.ignored.task_time_csv": (
        "task times duplicate kernel_details.csv; not ingested",
        "任务时间与 kernel_details.csv 重复；未导入",
    ),
    "problem.ignored.static_op_mem": ("static graph memory is not ingested by this version", "此版本不导入静态图内存"),
    "problem.ignored.interconnect": (
        "interconnect counters are not ingested by this version",
        "此版本不导入互联计数器",
    ),
    "problem.ignored.network": ("network counters are not ingested by this version", "此版本不导入网络计数器"),
    "problem.ignored.soc_pmu": ("SoC PMU counters are not ingested by this version", "此版本不导入 SoC PMU 计数器"),
    "problem.ignored.raw_profiler": (
        "raw profiler data; its parsed form is in {folder}/",
        "性能数据采集工具的原始数据；其解析结果在 {folder}/ 中",
    ),
    "problem.ignored.torch_npu_log": ("torch_npu parser log", "torch_npu 解析日志"),
    "problem.ignored.not_torch_npu": ("not a torch_npu output file", "不是 torch_npu 的输出文件"),
    "problem.ignored.db_other_rank": (
        "profiler db of another rank (rank {rank} read from {file})",
        "其他卡的性能数据 db（卡 {rank} 从 {file} 读取）",
    ),
    "problem.ignored.not_db_reader": ("not a file the db reader ingests", "不是 db 读取器导入的文件"),
    "problem.ignored.ms_log": ("MindSpore profiler log", "MindSpore 性能数据采集日志"),
    "problem.ignored.ms_cpu_same": (
        "same CPU ops as trace_view.json, which was read",
        "与 trace_view.json 中的 CPU 算子相同，已读取后者",
    ),
    "problem.ignored.ms_raw_framework": (
        "raw MindSpore framework data; its parsed form is in {folder}/",
        "MindSpore 框架原始数据；其解析结果在 {folder}/ 中",
    ),
    "problem.ignored.ms_raw_cann_parsed": (
        "raw CANN data; its parsed form is in {folder}/",
        "CANN 原始数据；其解析结果在 {folder}/ 中",
    ),
    "problem.ignored.legacy_same_ops": (
        "same ops as output_timeline_data, with times relative to the first op; that file was read",
        "与 output_timeline_data 中的算子相同，时间相对于第一个算子；已读取该文件",
    ),
    "problem.ignored.flops": ("FLOPs per op are not ingested by this version", "此版本不导入逐算子的 FLOPs"),
    "problem.ignored.flops_summary": ("FLOPs summary is not ingested by this version", "此版本不导入 FLOPs 汇总"),
    "problem.ignored.flops_scope": (
        "FLOPs per scope are not ingested by this version",
        "此版本不导入逐 scope 的 FLOPs",
    ),
    "problem.ignored.data_pipeline": (
        "data pipeline profiling is not ingested by this version",
        "此版本不导入数据处理流水线的性能数据",
    ),
    "problem.ignored.text_of_aicore": (
        "text rendering of aicore_intermediate (read instead)",
        "aicore_intermediate 的文本形式（已改为读取后者）",
    ),
    "problem.ignored.hwts": (
        "raw hardware task scheduler dump; output_timeline_data holds the same tasks",
        "硬件任务调度器（HWTS）原始转储；output_timeline_data 中有相同的任务",
    ),
    "problem.ignored.text_of_aicpu": (
        "text rendering of aicpu_intermediate (read instead)",
        "aicpu_intermediate 的文本形式（已改为读取后者）",
    ),
    "problem.ignored.task_list": (
        "intermediate task list; output_timeline_data holds the same tasks",
        "中间任务列表；output_timeline_data 中有相同的任务",
    ),
    "problem.ignored.min_cycle": (
        "first syscnt of the device; not needed (times stay on the device clock)",
        "Device 的第一个 syscnt；不需要（时间保持在 Device 时钟上）",
    ),
    "problem.ignored.dynamic_shape": (
        "dynamic-shape operator list is not ingested by this version",
        "此版本不导入动态 shape 算子列表",
    ),
    "problem.ignored.parallel_strategy": (
        "parallel strategy graph is not ingested by this version",
        "此版本不导入并行策略图",
    ),
    "problem.ignored.hccl_raw": (
        "legacy HCCL summary is not ingested by this version",
        "此版本不导入旧格式的 HCCL 汇总",
    ),
    "problem.ignored.timeline_summary": ("summary of the timeline (counts only)", "时间线汇总（只有计数）"),
    "problem.ignored.gpu_timeline": (
        "GPU timeline of a MindSpore GPU run is not ingested by this version",
        "此版本不导入 MindSpore GPU 运行的 GPU 时间线",
    ),
    "problem.ignored.step_trace_point": (
        "names of the ops that start and end a step; not needed (steps come from step_trace_raw)",
        "迭代开始和结束算子的名称；不需要（迭代来自 step_trace_raw）",
    ),
    "problem.ignored.cluster_summary": (
        "legacy cluster step summary (no per-rank rows); not ingested by this version",
        "旧格式的集群迭代汇总（没有逐卡的行）；此版本不导入",
    ),
    # why a malformed event was skipped (problem.events_skipped's {why}): the stream's own words and msgspec's
    "why.no_boundary": ("{mib} MiB without an event boundary", "{mib} MiB 内没有事件边界"),
    "why.nested": ("nested too deeply", "嵌套过深"),
    "why.not_object": ("not a JSON object", "不是 JSON 对象"),
    "why.at": ("{what} - at `{path}`", "{what}（位于 `{path}`）"),
    "why.expected_type": ("Expected `{want}`, got `{got}`", "应为 `{want}`，实际为 `{got}`"),
    "why.missing_field": ("Object missing required field `{field}`", "对象缺少必需字段 `{field}`"),
    # (a path after them: more literal text than the same without it, tried first)
    "why.expected_type_at": (
        "Expected `{want}`, got `{got}` - at `{path}`",
        "应为 `{want}`，实际为 `{got}`（位于 `{path}`）",
    ),
    "why.missing_field_at": (
        "Object missing required field `{field}` - at `{path}`",
        "对象缺少必需字段 `{field}`（位于 `{path}`）",
    ),
    "why.expected_either": ("expected {a} or {b}", "应为 {a} 或 {b}"),
    "why.expected": ("expected {what}", "应为 {what}"),
    "why.keys_strings": ("object keys must be strings", "对象的键必须是字符串"),
    "why.trailing": ("trailing characters", "多余的字符"),
    "why.invalid_character": ("invalid character", "无效字符"),
    "why.invalid_number": ("invalid number", "无效的数字"),
    "why.invalid_escape": ("invalid escape character in string", "字符串中有无效的转义字符"),
    "why.out_of_range": ("Number out of range", "数字超出范围"),
    "why.truncated": ("Input data was truncated", "输入数据被截断"),
    # the rows a problem names (its {where} / {rows}: items joined, see LIST_FIELDS)
    "where.row_value": ("row {n}: {value}", "第 {n} 行：{value}"),
    "where.event_value": ("event {n}: {value}", "第 {n} 个事件：{value}"),
    "where.row": ("row {n}", "第 {n} 行"),
    "where.event": ("event {n}", "第 {n} 个事件"),
    # what a torch_npu / msprof db table holds (a missing table's {holds})
    "hold.TASK": (
        "device tasks (kernels, communication tasks, the device timeline)",
        "Device 任务（kernel、通信任务、Device 时间线）",
    ),
    "hold.COMPUTE_TASK_INFO": ("kernel names, types and shapes", "kernel 的名称、类型和 shape"),
    "hold.CANN_API": (
        "CANN API calls (the host launch timeline, api statistics)",
        "CANN API 调用（Host 下发时间线、API 统计）",
    ),
    "hold.PYTORCH_API": ("framework operators (operators, the host timeline)", "框架算子（算子、Host 时间线）"),
    "hold.SESSION_TIME_INFO": ("session start and end times", "会话的开始和结束时间"),
}

# fields of a problem (``problem.*`` only) that hold items of another family joined by a separator (English, Chinese):
# the rows a problem names, the holdings of missing tables; "..." (more not named) stays as it is
LIST_FIELDS: dict[str, tuple[str, str, str]] = {
    "where": ("; ", "；", "where"),
    "rows": (", ", "，", "where"),
    "holds": ("; no ", "；没有", "hold"),
    "why": ("; ", "；", "why"),
}
# list fields whose items may be texts no template wrote (a decoder's own words): those stay as they are
OPEN_LIST_FIELDS = frozenset({"why"})

# the hint of a torch_npu folder not parsed (``missing.hint.torch_npu_raw``) as a file's reason, its text once
_HINT_EN, _HINT_ZH = MESSAGES["missing.hint.torch_npu_raw"]
MESSAGES["problem.ignored.torch_npu_raw"] = (
    "raw torch_npu data, not parsed: " + _HINT_EN,
    "torch_npu 原始数据，未解析：" + _HINT_ZH,
)

Message = dict[str, Any]  # {"key": str, "params": {name: number | str | Message | None}}


def _plain(v: Any) -> Any:
    """A parameter as plain data (numpy scalars as Python numbers): messages travel as JSON."""
    item = getattr(v, "item", None)
    return item() if callable(item) and not isinstance(v, (str, bytes)) else v


def message(key: str, **params: Any) -> Message:
    """A message: ``key`` of ``MESSAGES`` and the values of its fields."""
    if key not in MESSAGES:
        raise KeyError(f"no message {key!r} in analyzer.messages.MESSAGES")
    return {"key": key, "params": {k: _plain(v) for k, v in params.items()}}


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _signed(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda v: ("+" if v >= 0 else "−") + fmt(abs(v))


UNITS: dict[str, Callable[[Any], str]] = {
    "ms": _ms,
    "ns": fmt_ns,  # the unit that suits the value: "850 ns", "12.3 µs", "1.235 ms", "2.000 s"
    "signed_ns": _signed(fmt_ns),
    "bytes": fmt_bytes,
    "signed_bytes": _signed(fmt_bytes),
    "pct": lambda x: f"{x:.1%}",
    "pct0": lambda x: f"{x:.0%}",
    "gbps": lambda b: f"{b / 1e9:.2f} GB/s",
}


def is_message(v: Any) -> bool:
    return isinstance(v, Mapping) and isinstance(v.get("key"), str) and "params" in v


class _Formatter(string.Formatter):
    def __init__(self, lang: str) -> None:
        self.lang = lang

    def format_field(self, value: Any, format_spec: str) -> str:
        if is_message(value):
            return render(value, self.lang)
        if value is None:
            return "-"
        if isinstance(value, (list, tuple)):  # a list: its items joined (", " or, with :semicolon, "; ")
            sep = render(message("sep.semicolon" if format_spec == "semicolon" else "sep.comma"), self.lang)
            return sep.join(self.format_field(v, "") for v in value)
        if format_spec in UNITS:
            return UNITS[format_spec](value)
        if isinstance(value, str) and not format_spec:
            return value
        return super().format_field(value, format_spec)


def text(key: str, lang: str = "en") -> str:
    """The template of ``key`` in ``lang`` (English for a language without texts)."""
    en, zh = MESSAGES[key]
    return zh if lang == "zh" else en


def render(msg: Message, lang: str = "en") -> str:
    """A message written out in ``lang``."""
    return _Formatter(lang).vformat(text(msg["key"], lang), (), dict(msg.get("params") or {}))


def english(key: str, **params: Any) -> str:
    """The English text of a message (a sentence stored as it is, ``translate`` reads it back)."""
    return render(message(key, **params), "en")


def problem(key: str, **params: Any) -> str:
    """What was wrong with a file (``problem.<key>``), in English as it is stored; a key with an
    article before ``{kind}`` (``problem.<key>.a`` / ``.an``) is chosen by the kind's first letter."""
    if f"problem.{key}" not in MESSAGES:
        key = f"{key}.{'an' if str(params.get('kind', ''))[:1].lower() in 'aeiou' else 'a'}"
    return english(f"problem.{key}", **params)


def translate_problems(text: Any, lang: str) -> Any:
    """A file's problems (``source_files.error``: one, or several joined by "; ") in ``lang``; each
    a text no template wrote is left as it is. A reading whose field swallowed a "; " (that is not
    itself a problem) is taken for two problems side by side."""
    if lang == "en" or not isinstance(text, str) or not text:
        return text

    def one(part: str) -> str | None:
        msg = parse(part, "problem")
        if msg is None or any(
            not _items_ok(k, str(v)) if k in LIST_FIELDS else ("; " in str(v) and parse(str(v), "problem") is None)
            for k, v in msg["params"].items()
        ):
            return None
        return _translated(part, lang, "problem", split=False)

    parts, out, i = text.split("; "), [], 0
    while i < len(parts):
        for j in range(len(parts), i, -1):  # the longest run of parts that is one problem
            got = one("; ".join(parts[i:j]))
            if got is not None:
                out.append(got)
                i = j
                break
        else:
            out.append(parts[i])
            i += 1
    return render(message("sep.semicolon"), lang).join(out)


@functools.cache
def _patterns(family: str) -> list[tuple[re.Pattern[str], str]]:
    """The English templates of the keys ``family.*`` as patterns (each field any text; a field
    named twice the same text), the one with the most literal text first."""
    out: list[tuple[int, re.Pattern[str], str]] = []
    for key, (en, _zh) in MESSAGES.items():
        if not key.startswith(family + "."):
            continue
        parts, seen, literal = ["^"], set(), 0
        for lit, name, spec, _conv in string.Formatter().parse(en):
            parts.append(re.escape(lit))
            literal += len(lit)
            if name is None:
                continue
            if spec:
                raise ValueError(f"{key}: a field of a {family}.* text has no format spec (it is read back)")
            parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
            seen.add(name)
        out.append((literal, re.compile("".join(parts) + "$", re.DOTALL), key))
    return [(p, k) for _n, p, k in sorted(out, key=lambda x: -x[0])]


def parse(text: str, family: str) -> Message | None:
    """The message of ``family`` whose English text ``text`` is (its fields as text), or None."""
    for pattern, key in _patterns(family):
        m = pattern.match(text)
        if m:
            return {"key": key, "params": m.groupdict()}
    return None


# fields that hold names (runs, groups' roles): filled in as they are, never read as texts of a family
NAME_FIELDS = frozenset({"run", "base_run", "new_run", "role", "name", "origin", "reason", "status"})


def translate(text: Any, lang: str, family: str) -> Any:
    """``text`` (an English text of ``family``, see ``english``) in ``lang``; its fields that are
    texts of the family are translated too (not names: ``NAME_FIELDS``). Anything else is returned
    as it is (a name is data)."""
    if lang == "en" or not isinstance(text, str):
        return text
    out = _translated(text, lang, family, split=False)
    return text if out is None else out


def _translated(text: str, lang: str, family: str, split: bool = True) -> str | None:
    """``text`` in ``lang`` when it is a text of ``family``; with ``split`` also when it is texts of
    it one after the other (a field's value: two fields side by side, "{scheduled}{known}", are read
    back as one); else None."""
    if not text:
        return text
    msg = parse(text, family)
    if msg is not None:
        params = {
            k: v
            if k in NAME_FIELDS or not isinstance(v, str)
            else _items(v, lang, k)
            if k in LIST_FIELDS and family == "problem"
            else _translated(v, lang, family) or v
            for k, v in msg["params"].items()
        }
        return render({"key": msg["key"], "params": params}, lang)
    for i in range(len(text) - 1, 0, -1) if split else ():
        if parse(text[:i], family) is not None:
            rest = _translated(text[i:], lang, family)
            if rest is not None:
                return _translated(text[:i], lang, family) + rest
    return None


def _items_ok(field: str, text: str) -> bool:
    """Whether ``text`` (a field of ``LIST_FIELDS``) is items of its family (or "...")."""
    sep, _zh, family = LIST_FIELDS[field]
    return field in OPEN_LIST_FIELDS or all(p == "..." or parse(p, family) is not None for p in text.split(sep))


def _items(text: str, lang: str, field: str) -> str:
    """A field of ``LIST_FIELDS`` in ``lang``: each item by its template, the separator of the language."""
    sep, zh, family = LIST_FIELDS[field]
    out = [p if p == "..." else (_translated(p, lang, family, split=False) or p) for p in text.split(sep)]
    return (zh if lang == "zh" else sep).join(out)


def fields(template: str) -> set[str]:
    """The ``{name}`` fields of a template."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def sentence(msgs: Sequence[Message], lang: str = "en") -> str:
    """Messages written out in ``lang`` as one sentence: joined by semicolons, with a full stop."""
    sep, end = render(message("sep.semicolon"), lang), render(message("sep.end"), lang)
    return sep.join(render(m, lang) for m in msgs) + end
