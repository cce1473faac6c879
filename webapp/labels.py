"""Every user-visible label of the web app, in English and Simplified Chinese: ``t(key, **values)``
is the text of ``key`` in the request's language (``webapp.lang``), with ``{name}`` fields filled.

The Chinese follows the terms of MindStudio Insight and msprof-analyze's Chinese documentation
(通信 communication, 计算 computing, 空闲 free, 迭代 / 步 step, 算子 operator, 内存 memory, 慢卡
straggler, 集群 cluster, 时间线 timeline, 性能数据采集 profiling). Names from traces are never
labels: they are filled into a label as values, shown as text like any other value, and never
translated. Numbers and units are formatted the same in both languages (``webapp.format``).
A test checks every key has both texts with the same fields and that no page writes a label
outside this module.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from . import lang

# key -> (English, 简体中文)
LABELS: dict[str, tuple[str, str]] = {
    # -- navigation ---------------------------------------------------------------------------
    "nav.overview": ("Overview", "概览"),
    "nav.timeline": ("Timeline", "时间线"),
    "nav.operators": ("Operators", "算子"),
    "nav.memory": ("Memory", "内存"),
    "nav.communication": ("Communication", "通信"),
    "nav.training": ("Training", "训练"),
    "nav.advisor": ("Advisor", "专家建议"),
    "nav.compare": ("Compare", "对比"),
    "nav.cluster": ("Cluster", "集群"),
    "nav.pipeline": ("Pipeline", "流水线"),
    "nav.profiling": ("Profiling", "性能数据采集"),
    "nav.language": ("Language", "语言"),
    # -- shared controls and messages (ui.py, page.py) -----------------------------------------
    "ui.run": ("Run", "运行"),
    "ui.ranks": ("Ranks", "卡"),
    "ui.rank_n": ("rank {rank}", "卡 {rank}"),
    "ui.all_ranks": ("all ranks", "所有卡"),
    "ui.ranks_list": ("ranks {ranks}", "卡 {ranks}"),
    "ui.showing": ("{problem}; showing {shown}.", "{problem}；显示{shown}。"),
    "ui.empty_title": ("No profiling data yet", "尚无性能数据"),
    "ui.empty_text": (
        "This store has no run. Ingest the profiler output of every rank (Kineto traces, torch_npu *_ascend_pt "
        "folders, MindSpore *_ascend_ms folders, msprof PROF_* folders), then reload this page:",
        "此存储中还没有运行。请导入每张卡的性能数据（Kineto trace、torch_npu 的 *_ascend_pt 目录、MindSpore 的 "
        "*_ascend_ms 目录、msprof 的 PROF_* 目录），然后刷新本页：",
    ),
    "ui.empty_again": (
        "Every rank and format found below the folder is read; run it again after more data arrives (unchanged "
        "files are skipped). ",
        "该目录下找到的每张卡、每种格式都会被读取；有新数据时再次运行即可（未改变的文件会被跳过）。",
    ),
    "ui.empty_lists": (" lists what the store holds.", " 列出存储中的内容。"),
    "ui.internal_error": (
        "Internal error ({kind}: {error}). The server log has the details.",
        "内部错误（{kind}：{error}）。详情见服务器日志。",
    ),
    # -- URL parameters (params.py, errors.py) -------------------------------------------------
    "err.url_param": ("URL parameter {name}={value}: {problem}", "URL 参数 {name}={value}：{problem}"),
    "err.twice": ("given more than once with different values", "多次给出且取值不同"),
    "err.not_int": ("not an integer", "不是整数"),
    "err.at_least": ("must be at least {n}", "至少为 {n}"),
    "err.at_most": ("must be at most {n}", "至多为 {n}"),
    "err.one_of": ("must be one of {choices}", "必须是以下之一：{choices}"),
    "err.rank_numbers": ("expected rank numbers like 0,1,4-7", "应为卡号，如 0,1,4-7"),
    "err.bad_range": ("bad rank range {part}", "卡范围 {part} 无效"),
    "err.long_range": ("rank range {part} is too long", "卡范围 {part} 过长"),
    "err.no_rank": ("no rank given", "未给出卡号"),
    "err.run_no_rank": ("run {run} has no rank {ranks} (ranks: {have})", "运行 {run} 没有卡 {ranks}（现有卡：{have}）"),
    # -- advisor findings (findings.py) --------------------------------------------------------
    "sev.high": ("high", "高"),
    "sev.medium": ("medium", "中"),
    "sev.low": ("low", "低"),
    "rule.slow_rank": ("slow rank", "慢卡"),
    "rule.slow_link": ("slow link", "慢链路"),
    "rule.high_free": ("idle device", "设备空闲"),
    "rule.host_bound": ("host-bound dispatch", "下发瓶颈（Host 侧）"),
    "rule.small_packets": ("small packets", "小包通信"),
    "rule.aicpu": ("AI CPU operators", "AI CPU 算子"),
    "fd.in_total": ("{time} in total", "共 {time}"),
    "fd.tasks_longer": ("tasks longer than {time}", "长于 {time} 的任务"),
    "fd.votes": ("{n} votes", "{n} 票"),
    "fd.vote": ("{n} vote", "{n} 票"),
    "fd.at_least_votes": ("at least {n} vote", "至少 {n} 票"),
    "fd.timeline": ("timeline", "时间线"),
    "fd.collective": ("collective", "集合通信"),
    "fd.operator": ("operator", "算子"),
    "fd.see": ("see", "查看"),
    "fd.advisor_page": ("Advisor page", "专家建议页"),
    "fd.findings": ("Findings", "发现"),
    "fd.findings_n": ("Findings ({n})", "发现（{n}）"),
    "fd.none_fired": ("No advisor rule fired for this run (", "本次运行未触发任何建议规则（"),
    "fd.none_fired_end": (").", "）。"),
    "fd.in_timeline": ("In the timeline: ", "在时间线中："),
    "fd.evidence_k": ("evidence {k}", "证据 {k}"),
    "fd.and_more": (" (and {n} more)", "（另有 {n} 条）"),
    "fd.every_finding": (
        "Every finding with its numbers, threshold and evidence: the ",
        "每条发现的数值、阈值和证据见",
    ),
    "fd.every_finding_end": (".", "。"),
    # -- Advisor page -------------------------------------------------------------------------
    "adv.subtitle": (
        "What the rules found in this run, with the numbers, the thresholds they were held to, and the evidence "
        "behind each finding.",
        "规则在本次运行中发现的问题，及其数值、所依据的阈值和每条发现背后的证据。",
    ),
    "adv.bad_severity": ("{value} is not one of {choices}", "{value} 不是以下之一：{choices}"),
    "adv.every_severity": ("every severity", "所有严重程度"),
    "adv.every_rule": ("every rule", "所有规则"),
    "adv.severity": ("Severity", "严重程度"),
    "adv.rule": ("Rule", "规则"),
    "adv.none": ("No advisor rule fired for this run.", "本次运行未触发任何建议规则。"),
    "adv.count": ("{n} {severity}", "{severity} {n}"),
    "adv.summary": ("{n} findings ({counts}); {shown} shown.", "共 {n} 条发现（{counts}）；显示 {shown} 条。"),
    "adv.summary_1": ("{n} finding ({counts}); {shown} shown.", "共 {n} 条发现（{counts}）；显示 {shown} 条。"),
    "adv.no_match": ("No finding matches the filters.", "没有符合筛选条件的发现。"),
    "adv.measured": ("measured", "实测值"),
    "adv.threshold": ("threshold", "阈值"),
    "adv.ranks_layout": ("ranks (on the layout)", "卡（在集群布局中）"),
    "adv.evidence_rows": ("evidence rows", "证据行数"),
    "adv.evidence_n": ("evidence ({n})", "证据（{n}）"),
    "adv.no_rows": ("The rule keeps no rows for this finding.", "该规则没有为此发现保留数据行。"),
    "adv.link": ("link to this finding", "此发现的链接"),
    # -- Cluster page -------------------------------------------------------------------------
    "cl.subtitle": (
        "The parallel layout found in the run, every rank a cell coloured by a metric; slow links drawn on it. "
        "Click a cell to open that rank in the timeline.",
        "本次运行中推断出的并行布局，每张卡一个格子，按所选指标着色，并标出慢链路。点击格子可在时间线中打开该卡。",
    ),
    "cl.m.step_ns": ("step time (mean over steps)", "迭代时间（各步平均）"),
    "cl.m.computing_ns": ("computing (mean over steps)", "计算（各步平均）"),
    "cl.m.communication_ns": ("communication (mean over steps)", "通信（各步平均）"),
    "cl.m.comm_not_overlapped_ns": ("communication not overlapped (mean over steps)", "未被掩盖的通信（各步平均）"),
    "cl.m.wait_ns": ("communication wait (total)", "通信等待（总计）"),
    "cl.m.free_ns": ("free (mean over steps)", "空闲（各步平均）"),
    "cl.m.peak_memory": ("peak memory allocated", "内存分配峰值"),
    "cl.m.slow_rank_votes": ("slow-rank votes (the rank others waited for)", "慢卡票数（其他卡等待的卡）"),
    "cl.m.straggler_lateness_ns": (
        "straggler lateness (median per step, arrival order)",
        "慢卡迟到时间（每步中位数，按到达顺序）",
    ),
    "cl.showing_step": ("step time", "迭代时间"),
    "cl.rank_not_in_run": ("the run has ranks {ranks}", "该运行的卡为 {ranks}"),
    "cl.colour_by": ("Colour by", "着色依据"),
    "cl.no_data": ("no data", "无数据"),
    "cl.rank_order": ("rank order (no parallel layout found)", "卡序号（未找到并行布局）"),
    "cl.not_placed": ("not placed", "未定位"),
    "cl.x_title": ("{dim} (index in its {dim} group)", "{dim}（在其 {dim} 组中的序号）"),
    "cl.votes": ("votes", "票"),
    "cl.slow_link": (
        "slow {transport} link {src} → {dst}: {rate} GB/s, {gap} below the median of its {n} peer links",
        "{transport} 慢链路 {src} → {dst}：{rate} GB/s，比其 {n} 条同类链路的中位数低 {gap}",
    ),
    "cl.slow_rank": (
        "rank {rank} slow on {transport} in step {step}: {rate} GB/s vs {fast} GB/s on rank {fast_rank}",
        "卡 {rank} 在第 {step} 步的 {transport} 通信慢：{rate} GB/s，卡 {fast_rank} 为 {fast} GB/s",
    ),
    "cl.slow_mark": ("slow {transport}", "{transport} 慢"),
    "cl.no_dims": (
        "No parallel dimension found (no communication group structure to infer it from): ranks in order.",
        "未找到并行维度（没有可用于推断的通信组结构）：按卡序号排列。",
    ),
    "cl.layout": ("Layout: {dims}.", "布局：{dims}。"),
    "cl.spread": (
        " Highest: rank {hi} ({hi_value}); lowest: rank {lo} ({lo_value}).",
        "最高：卡 {hi}（{hi_value}）；最低：卡 {lo}（{lo_value}）。",
    ),
    "cl.no_slow": (
        "No slow link: {n} bandwidth set(s) judged (msprof-analyze's 5 % rule), none slow.",
        "无慢链路：已判断 {n} 组带宽（msprof-analyze 的 5 % 规则），均不慢。",
    ),
    "cl.ranks_by": ("Ranks by {metric}", "各卡的{metric}"),
    "cl.click": ("Click a cell: that rank in the timeline.", "点击格子：在时间线中查看该卡。"),
    "cl.slow_title": ("Slow links and ranks", "慢链路与慢卡"),
    "cl.dims_title": ("Parallel dimensions", "并行维度"),
    "cl.col.dim": ("dim", "维度"),
    "cl.col.size": ("size", "大小"),
    "cl.col.groups": ("groups", "组数"),
    "cl.col.stride": ("stride", "步长"),
    "cl.col.how": ("how it was found", "推断方式"),
    "cl.none_found": ("None found.", "未找到。"),
    # -- Pipeline page ------------------------------------------------------------------------
    "pp.subtitle": (
        "Each pipeline stage's forward and backward micro-batches and the bubbles between them, from the "
        "send/recv pairs (no instrumentation), on the aligned clock.",
        "各流水线阶段的前向、反向微批次及其间的气泡，由 send/recv 配对推断（无需打点），按对齐后的时钟显示。",
    ),
    "pp.step": ("Step", "迭代"),
    "pp.group": ("Pipeline group", "流水线组"),
    "pp.step_option": ("step {step}", "第 {step} 步"),
    "pp.group_option": ("group {group}: ranks {ranks}", "组 {group}：卡 {ranks}"),
    "pp.bad_step": (
        "URL parameter step={step}: the pipeline has steps {steps}",
        "URL 参数 step={step}：流水线的迭代为 {steps}",
    ),
    "pp.bad_group": (
        "URL parameter group={group}: the run has pipeline groups {groups}",
        "URL 参数 group={group}：该运行的流水线组为 {groups}",
    ),
    "pp.showing_step": ("{error}; showing step {step}.", "{error}；显示第 {step} 步。"),
    "pp.showing_group": ("{error}; showing group {group}.", "{error}；显示组 {group}。"),
    "pp.k.forward": ("forward", "前向"),
    "pp.k.backward": ("backward", "反向"),
    "pp.k.forward_backward": ("forward + backward (no marker between)", "前向 + 反向（其间无标记）"),
    "pp.k.bubble": ("bubble (blocked in send / recv)", "气泡（阻塞于 send / recv）"),
    "pp.k.other": ("other work", "其他工作"),
    "pp.axis": ("ms (aligned clock)", "毫秒（对齐后的时钟）"),
    "pp.row": ("stage {stage} · rank {rank}", "阶段 {stage} · 卡 {rank}"),
    "pp.micro_batch": ("micro-batch {k}", "微批次 {k}"),
    "pp.peer": ("peer rank {rank}", "对端卡 {rank}"),
    "pp.none": (
        "No pipeline found in this run: no send was paired with a recv between neighbouring stages of a pipeline "
        "group (the inferred layout has no PP dimension, or the ranks exchanged no point-to-point messages).",
        "该运行中未发现流水线：流水线组相邻阶段之间没有可配对的 send 与 recv"
        "（推断的并行布局没有 PP 维度，或各卡之间没有点对点通信）。",
    ),
    "pp.nothing": ("Nothing in this group and step.", "该组在此迭代中没有数据。"),
    "pp.title": ("Group {group}, step {step}", "组 {group}，第 {step} 步"),
    "pp.summary": (
        "{stages} stages, {forward} micro-batches forward and {backward} backward; the stages spend {share} % of "
        "the pipeline phase in bubbles (mean over stages).",
        "{stages} 个阶段，前向 {forward} 个微批次、反向 {backward} 个；"
        "各阶段在流水线阶段中平均有 {share} % 的时间处于气泡。",
    ),
    "pp.click": ("Click a bar: that stretch in the timeline. ", "点击色条：在时间线中查看该时段。"),
    "pp.open_step": ("Open the step in the timeline", "在时间线中打开该迭代"),
    "pp.per_stage": ("Per stage", "各阶段"),
    "pp.col.stage": ("stage", "阶段"),
    "pp.col.rank": ("rank", "卡"),
    "pp.col.fwd_mb": ("forward µb", "前向微批次"),
    "pp.col.bwd_mb": ("backward µb", "反向微批次"),
    "pp.col.forward": ("forward", "前向"),
    "pp.col.backward": ("backward", "反向"),
    "pp.col.fwd_bwd": ("forward+backward", "前向+反向"),
    "pp.col.bubble": ("bubble", "气泡"),
    "pp.col.share": ("bubble share", "气泡占比"),
    "pp.over_steps": ("Bubble share over every step: {shares}.", "所有迭代的气泡占比：{shares}。"),
    "pp.stage_share": ("stage {stage}: {share} %", "阶段 {stage}：{share} %"),
    "pp.explain": (
        "A bubble is the time from calling a send or recv to its end: the stage waits for its neighbour. Work "
        "before a send belongs to that send's micro-batch; work after a recv up to the next one consumed it; on "
        "the last stage a forward and the backward after it have no marker between them and show as one bar.",
        "气泡指从调用 send 或 recv 到其结束的时间：该阶段在等待相邻阶段。send 之前的工作属于该 send 的微批次；recv "
        "之后直到下一个 recv 的工作消费了该 recv；在最后一个阶段，前向与其后的反向之间没有标记，显示为同一色条。",
    ),
    # -- Profiling page (dynamic profiling) ---------------------------------------------------
    "pf.st.watching": ("watching the file, no window asked", "正在监视文件，未请求采集窗口"),
    "pf.st.armed": ("armed: will record", "已就绪：将采集"),
    "pf.st.not selected": ("not selected for", "未被选中："),
    "pf.st.recording": ("recording", "正在采集"),
    "pf.st.done": ("window stopped:", "窗口已结束："),
    "pf.st.stopped": ("collector stopped (the job ended or stopped profiling)", "采集器已停止（作业结束或停止了采集）"),
    "pf.off": (
        "Dynamic profiling from the browser is off. Start the server with `analyze serve --control CONFIG_DIR` "
        "(the training job's dynamic_param.config_path) and a token (--token or $RANKSCOPE_TOKEN).",
        "浏览器中的动态采集未开启。请用 `analyze serve --control CONFIG_DIR`（训练作业的 "
        "dynamic_param.config_path）并带上令牌（--token 或 $RANKSCOPE_TOKEN）启动服务。",
    ),
    "pf.subtitle": (
        "Start a profiling window in a running training job: the collector watches profiler_config.json and "
        "records the steps asked for at its next step boundary.",
        "在运行中的训练作业里启动一个采集窗口：采集器监视 profiler_config.json，"
        "并在下一个迭代边界开始采集所请求的迭代。",
    ),
    "pf.ask": ("Ask for a window", "请求采集窗口"),
    "pf.first": ("First step", "起始迭代"),
    "pf.last": ("Last step", "结束迭代"),
    "pf.ranks_ph": ("all (or 0,1,4-7)", "全部（或 0,1,4-7）"),
    "pf.level": ("Level", "采集级别"),
    "pf.write": ("Write profiler_config.json", "写入 profiler_config.json"),
    "pf.watched": ("Watched file: {path}", "监视的文件：{path}"),
    "pf.collectors": ("Collectors (from the log)", "采集器（来自日志）"),
    "pf.sw.with_stack": ("Python / operator call stacks", "Python / 算子调用栈"),
    "pf.sw.record_shapes": ("operator input shapes and dtypes", "算子输入的 shape 和数据类型"),
    "pf.sw.with_memory": ("tensor allocations and frees (profile_memory)", "张量的内存申请与释放（profile_memory）"),
    "pf.sw.with_modules": ("module hierarchy of operators", "算子的模块层级"),
    "pf.sw.with_flops": ("FLOP estimates of matmul / convolution", "矩阵乘 / 卷积的 FLOP 估计"),
    "pf.sw.with_cpu": ("host-side operators (the CPU activity)", "Host 侧算子（CPU 活动）"),
    "pf.sw.with_device": (
        "device activity: NPU with torch_npu, CUDA with torch when a GPU is present",
        "设备活动：torch_npu 下为 NPU，有 GPU 时 torch 下为 CUDA",
    ),
    "pf.whole_steps": ("give the first (and last) step as whole numbers", "请以整数给出起始（和结束）迭代"),
    "pf.last_before": (
        "the last step ({last}) is before the first ({first})",
        "结束迭代（{last}）早于起始迭代（{first}）",
    ),
    "pf.step_zero": (
        "step {step} cannot be asked for: start_step 0 means 'off' in profiler_config.json (torch_npu's "
        "convention), and steps before it are past; the first step that can be asked for is 1",
        "不能请求第 {step} 步：profiler_config.json 中 start_step 为 0 表示关闭（torch_npu 的约定），"
        "更早的迭代已经过去；可请求的第一步是 1",
    ),
    "pf.no_log": (
        "No collector has written to the log yet (it starts watching when the job calls prof.start()).",
        "尚无采集器写入日志（作业调用 prof.start() 时开始监视）。",
    ),
    "pf.pid": ("{host} pid {pid}", "{host} 进程 {pid}"),
    "pf.running": ("{n} collector(s) running; armed: {armed}.", "{n} 个采集器在运行；已就绪：{armed}。"),
    "pf.none": ("none", "无"),
    "pf.col.rank": ("rank", "卡"),
    "pf.col.state": ("state", "状态"),
    "pf.col.said": ("what it last said", "最近的日志"),
    "pf.col.process": ("process", "进程"),
    "pf.col.since": ("since", "起始时间"),
    "pf.no_file": (
        "(no {name} yet: the collector writes one, profiling off, when the job starts)",
        "（尚无 {name}：作业启动时采集器会写入一个关闭采集的文件）",
    ),
    "pf.no_log_file": ("(no {name} yet)", "（尚无 {name}）"),
    "pf.not_written": ("Not written: {problems}", "未写入：{problems}"),
    "pf.written": (
        "Written at {time}: {name} asks for steps {first}..{last}. The collector reads it at its next step "
        "boundary; the log below says whether it accepted it.",
        "已于 {time} 写入：{name} 请求迭代 {first}..{last}。采集器在下一个迭代边界读取它；下方日志会说明是否接受。",
    ),
    # -- step breakdown metrics (analyzer.analyses.run_metrics.LABELS, shared by the pages) -----
    "metric.step_ns": ("step time", "迭代时间"),
    "metric.computing_ns": ("computing", "计算"),
    "metric.comm_not_overlapped_ns": ("communication not overlapped", "未被掩盖的通信"),
    "metric.overlapped_ns": ("overlapped", "被掩盖的通信"),
    "metric.communication_ns": ("communication", "通信"),
    "metric.free_ns": ("free", "空闲"),
    "metric.preparing_ns": ("preparing", "准备"),
    "metric.stage_ns": ("stage", "阶段"),
    "metric.bubble_ns": ("bubble", "空泡"),
    "metric.comm_not_overlapped_excl_receive_ns": (
        "communication not overlapped, excluding receive",
        "未被掩盖的通信（不含接收）",
    ),
    "metric.memory_not_overlapped_ns": ("memory copies not overlapped", "未被掩盖的内存拷贝"),
    # -- Compare page -------------------------------------------------------------------------
    "cmp.one_run": (
        "The store holds one run ({run}): ingest another one to compare them (analyze ingest FOLDER --run NAME).",
        "存储中只有一个运行（{run}）：再导入一个运行即可对比（analyze ingest FOLDER --run NAME）。",
    ),
    "cmp.url_default": (
        "URL parameter {name}: {problem}; showing the default.",
        "URL 参数 {name}：{problem}；显示默认值。",
    ),
    "cmp.no_step": ("run {run} has no step {step}", "运行 {run} 没有第 {step} 步"),
    "cmp.aligned_note": ("{problem}; steps aligned by number.", "{problem}；按迭代号对齐。"),
    "cmp.subtitle": (
        "What got slower, where, and by how much: two runs' step breakdown per rank, the operators and kernels "
        "that changed most, communication and memory (the same as `analyze diff BASE NEW`).",
        "哪里变慢了、慢了多少：两个运行每张卡的迭代拆解、变化最大的算子和 kernel、通信与内存"
        "（与 `analyze diff BASE NEW` 相同）。",
    ),
    "cmp.base_run": ("Base run", "基线运行"),
    "cmp.base_step": ("Base step", "基线迭代"),
    "cmp.swap": ("⇄ swap", "⇄ 交换"),
    "cmp.new_run": ("New run", "新运行"),
    "cmp.new_step": ("New step", "新迭代"),
    "cmp.aligned": ("steps aligned by number", "按迭代号对齐"),
    "cmp.step_n": ("step {step}", "第 {step} 步"),
    "cmp.steps": (
        "{base}: {base_steps}; {new}: {new_steps}; ranks matched by {match}. Every value is per step (the mean "
        "over the compared steps).",
        "{base}：{base_steps}；{new}：{new_steps}；卡按 {match} 匹配。所有数值均为每步的值（所比较迭代的平均）。",
    ),
    "cmp.all_findings": ("all findings ({n})", "全部发现（{n}）"),
    "cmp.breakdown": ("Step breakdown per rank", "每张卡的迭代拆解"),
    "cmp.change_per_rank": ("Change per rank", "每张卡的变化"),
    "cmp.ops_title": ("Operators and kernels whose time changed most", "耗时变化最大的算子和 kernel"),
    "cmp.ops_note": (
        "Time per rank and step in each run, by name (and by name + input shapes); the links open each run's "
        "timeline at the step where the operator changed most.",
        "每个运行中每张卡每步的耗时，按名称（以及名称 + 输入 shape）统计；"
        "链接在各自运行的时间线中打开该算子变化最大的那一步。",
    ),
    "cmp.comm_title": ("Communication per rank and step", "每卡每步的通信"),
    "cmp.mem_title": ("Memory peaks and stragglers", "内存峰值与慢卡"),
    "cmp.ms_per_step": ("ms per step", "每步毫秒数"),
    "cmp.step_marker": ("step time", "迭代时间"),
    "cmp.col.ranks": ("ranks", "卡"),
    "cmp.col.step": ("step time", "迭代时间"),
    "cmp.col.change": ("change", "变化"),
    "cmp.col.noise": ("noise", "噪声"),
    "cmp.beyond": ("beyond", "超出"),
    "cmp.within": ("within", "之内"),
    "cmp.link": ("{side} rank {rank} step {step}", "{side} 卡 {rank} 第 {step} 步"),
    "cmp.side.base": ("base", "基线"),
    "cmp.side.new": ("new", "新"),
    "cmp.op.name": ("name", "名称"),
    "cmp.op.kind": ("kind", "类别"),
    "cmp.op.by": ("by", "统计方式"),
    "cmp.op.status": ("status", "状态"),
    "cmp.op.delta_ms": ("change (ms)", "变化 (ms)"),
    "cmp.op.delta_pct": ("change", "变化"),
    "cmp.op.base_ms": ("base (ms)", "基线 (ms)"),
    "cmp.op.new_ms": ("new (ms)", "新 (ms)"),
    "cmp.op.base_link": ("base timeline", "基线时间线"),
    "cmp.op.new_link": ("new timeline", "新时间线"),
    "cmp.op.base_calls": ("base calls", "基线调用次数"),
    "cmp.op.new_calls": ("new calls", "新调用次数"),
    "cmp.op.input_shapes": ("input shapes", "输入 shape"),
    "cmp.by_name": ("name", "名称"),
    "cmp.by_shapes": ("name + shapes", "名称 + shape"),
    "cmp.no_comm": ("Neither run recorded communication.", "两个运行都没有记录通信。"),
    "cmp.cc.op": ("op", "算子"),
    "cmp.cc.group": ("group", "通信组"),
    "cmp.cc.status": ("status", "状态"),
    "cmp.cc.calls": ("calls", "调用次数"),
    "cmp.cc.bytes": ("bytes per call", "每次字节数"),
    "cmp.cc.elapsed": ("elapsed", "耗时"),
    "cmp.cc.wait": ("wait", "等待"),
    "cmp.cc.transit": ("transit", "传输"),
    "cmp.cc.bandwidth": ("bandwidth", "带宽"),
    "cmp.no_mem": ("Neither run recorded memory.", "两个运行都没有记录内存。"),
    "cmp.mc.ranks": ("ranks", "卡"),
    "cmp.mc.peak": ("peak", "峰值"),
    "cmp.mc.change": ("base → new", "基线 → 新"),
    "cmp.votes": ("rank {rank} ({n} votes)", "卡 {rank}（{n} 票）"),
    "cmp.none": ("none", "无"),
    "cmp.slow_ranks": ("Slow ranks (msprof-analyze's vote)", "慢卡（msprof-analyze 投票）"),
    "cmp.same_run": ("Base and new are the same run: pick two runs.", "基线与新运行是同一个：请选择两个运行。"),
    # -- Operators page -----------------------------------------------------------------------
    "op.source": ("Source", "来源"),
    "op.group": ("Group", "分组"),
    "op.scope": ("Scope", "范围"),
    "op.src.operators": ("Host operators", "Host 侧算子"),
    "op.src.kernels": ("Device kernels", "Device 侧 kernel"),
    "op.what.operators": ("host operators", "个 Host 侧算子"),
    "op.what.kernels": ("device kernels", "个 Device 侧 kernel"),
    "op.grp.type": ("by type", "按类型"),
    "op.grp.name": ("by name", "按名称"),
    "op.grp.shape": ("by name + input shape", "按名称 + 输入 shape"),
    "op.scp.across": ("across ranks", "跨卡"),
    "op.scp.rank": ("per rank", "每卡"),
    "op.m.total_ns": ("total time", "总耗时"),
    "op.m.self_ns": ("self time", "自身耗时"),
    "op.m.avg_ns": ("average", "平均"),
    "op.m.max_ns": ("max", "最大"),
    "op.m.count": ("calls", "调用次数"),
    "op.m.spread_pct": ("spread between ranks", "卡间差异"),
    "op.using": ("{problem}; using {default}.", "{problem}；使用 {default}。"),
    "op.subtitle": (
        "Where the time goes, by operator, on every rank: sort, filter, search; select a row to compare it across "
        "ranks.",
        "按算子查看每张卡的耗时去向：排序、筛选、搜索；选中一行可跨卡对比该算子。",
    ),
    "op.search": ("Search", "搜索"),
    "op.search_ph": ("name, shape…", "名称、shape…"),
    "op.top": ("Top operators", "Top 算子"),
    "op.across": ("Across ranks", "跨卡对比"),
    "op.select": (
        "Select a row of the grid to see that operator on every rank.",
        "在表格中选中一行，查看该算子在每张卡上的情况。",
    ),
    "op.none": ("No {what} for the selected ranks{hint}.", "所选卡上没有{what}{hint}。"),
    "op.no_kernels": (
        " (this run has no device kernels: CPU-only trace?)",
        "（本次运行没有 Device 侧 kernel：仅 CPU 的 trace？）",
    ),
    "op.col.type": ("type", "类型"),
    "op.col.category": ("category", "类别"),
    "op.col.name": ("name", "名称"),
    "op.col.shape": ("input shapes", "输入 shape"),
    "op.col.rank": ("rank", "卡"),
    "op.col.count": ("calls", "调用次数"),
    "op.col.total_ms": ("total (ms)", "总耗时 (ms)"),
    "op.col.self_ms": ("self (ms)", "自身耗时 (ms)"),
    "op.col.avg_ms": ("avg (ms)", "平均 (ms)"),
    "op.col.min_ms": ("min (ms)", "最小 (ms)"),
    "op.col.max_ms": ("max (ms)", "最大 (ms)"),
    "op.col.ranks": ("ranks", "卡数"),
    "op.col.rank_min_ms": ("rank min total (ms)", "单卡最小总耗时 (ms)"),
    "op.col.rank_max_ms": ("rank max total (ms)", "单卡最大总耗时 (ms)"),
    "op.col.spread_pct": ("spread", "差异"),
    "op.col.spread_tip": ("(max - min) / mean of the per-rank totals", "各卡总耗时的 (最大 - 最小) / 平均"),
    "op.col.max_rank": ("slowest rank", "最慢卡"),
    "op.col.timeline": ("slowest call", "最慢调用"),
    "op.col.timeline_tip": ("the longest call (max), in the timeline", "在时间线中查看最长的一次调用（最大值）"),
    "op.cut": (" (the {n} with the largest total of {total})", "（共 {total} 个中总耗时最大的 {n} 个）"),
    "op.scope_across": ("across ranks {ranks}", "跨卡 {ranks}"),
    "op.status": ("{n} {what} {group}, {scope}{cut}.", "{n} {what}，{group}，{scope}{cut}。"),
    "op.nothing": ("Nothing to rank.", "没有可排序的数据。"),
    "op.not_available": ("{metric} is not available for this view.", "此视图没有{metric}。"),
    "op.unit.calls": ("calls", "次"),
    "op.all_shapes": (" (all input shapes)", "（所有输入 shape）"),
    "op.not_found": ("{name}: not found on the selected ranks", "{name}：在所选卡上未找到"),
    "op.per_call_axis": ("duration per call (ms)", "每次调用耗时 (ms)"),
    "op.per_call": ("per call", "每次调用"),
    "op.total_axis": ("total (ms)", "总耗时 (ms)"),
    "op.drill_title": (" — {n} rank(s), spread of totals {spread} %", " — {n} 张卡，总耗时差异 {spread} %"),
    "op.dc.rank": ("rank", "卡"),
    "op.dc.calls": ("calls", "调用次数"),
    "op.dc.total": ("total", "总耗时"),
    "op.dc.avg": ("avg", "平均"),
    "op.dc.min": ("min", "最小"),
    "op.dc.median": ("median", "中位数"),
    "op.dc.p99": ("p99", "p99"),
    "op.dc.max": ("max", "最大"),
    "op.dc.fastest": ("vs fastest", "相对最快"),
    "op.shown.search": ("search \u201c{q}\u201d", "搜索“{q}”"),
    "op.shown.filters": ("column filters", "列筛选"),
    "op.shown": (" Showing {shown} of {total} ({why}).", " 显示 {total} 行中的 {shown} 行（{why}）。"),
    # -- Overview page ------------------------------------------------------------------------
    "ov.seg.computing_excl_ns": ("Computing (not overlapped)", "计算（未被掩盖）"),
    "ov.seg.overlapped_ns": ("Overlapped", "被掩盖的通信"),
    "ov.seg.comm_not_overlapped_ns": ("Communication (not overlapped)", "通信（未被掩盖）"),
    "ov.seg.free_ns": ("Free", "空闲"),
    "ov.seg.preparing_ns": ("Preparing", "准备"),
    "ov.seg.step_ns": ("Step time", "迭代时间"),
    "ov.has_steps": ("it has steps {first}–{last}", "它有第 {first}–{last} 步"),
    "ov.has_step": ("it has step {step}", "它有第 {step} 步"),
    "ov.no_steps": ("it has no steps", "它没有迭代"),
    "ov.no_step": ("the run has no step {step} ({have})", "该运行没有第 {step} 步（{have}）"),
    "ov.mean_note": ("{problem}; showing the mean over steps.", "{problem}；显示各步平均。"),
    "ov.subtitle": (
        "Runs in the store, what each rank recorded, and where each rank's step time goes.",
        "存储中的运行、每张卡采集到的内容，以及每张卡的迭代时间花在哪里。",
    ),
    "ov.pick": ("Pick ranks", "选择卡"),
    "ov.pick_ph": ("slowest, a group, a coordinate…", "最慢的卡、某个组、某个坐标…"),
    "ov.step": ("Step", "迭代"),
    "ov.runs": ("Runs", "运行"),
    "ov.rc.run": ("run", "运行"),
    "ov.rc.ranks": ("ranks", "卡数"),
    "ov.rc.steps": ("steps", "迭代数"),
    "ov.rc.formats": ("formats", "格式"),
    "ov.rc.status": ("status", "状态"),
    "ov.rc.problems": ("file problems", "文件问题"),
    "ov.rc.rows": ("rows", "行数"),
    "ov.rc.ingested": ("ingested (UTC)", "导入时间 (UTC)"),
    "ov.tm.step_time": ("step time", "迭代时间"),
    "ov.tm.computing": ("computing", "计算"),
    "ov.tm.comm_not_overlapped": ("communication not overlapped", "未被掩盖的通信"),
    "ov.tm.free": ("free", "空闲"),
    "ov.tm.peak_memory": ("peak allocated memory (highest rank)", "内存分配峰值（最高的卡）"),
    "ov.over_time": ("Runs over time", "运行趋势"),
    "ov.metric": ("Metric", "指标"),
    "ov.trend_x": ("run (oldest ingested first)", "运行（按导入时间，最早的在前）"),
    "ov.vs": ("vs {run}", "对比 {run}"),
    "ov.tc.run": ("run", "运行"),
    "ov.tc.change": ("change", "变化"),
    "ov.tc.tags": ("baselines and tags", "基线与标签"),
    "ov.tc.compare": ("compare", "对比"),
    "ov.numbers": ("numbers", "数值"),
    "ov.problems_n": ("File problems ({n})", "文件问题（{n}）"),
    "ov.pc.path": ("path", "路径"),
    "ov.pc.status": ("status", "状态"),
    "ov.pc.reader": ("reader", "读取器"),
    "ov.pc.problem": ("problem", "问题"),
    "ov.st.unmatched": (
        "no collective was matched across two or more of its profiled ranks",
        "没有集合通信能在两张及以上已采集的卡之间匹配",
    ),
    "ov.st.not_judged_title": ("Straggler: not judged", "慢卡：未判定"),
    "ov.st.not_judged": ("Not judged: {why}.", "未判定：{why}。"),
    "ov.st.within_noise": (
        "No rank holds the others back: every rank's lateness at the collectives is within the noise (the largest, "
        "rank {rank}: a median {gain} per step against a threshold of {threshold}).",
        "没有卡拖慢其他卡：每张卡在集合通信处的迟到都在噪声范围内（最大的是卡 {rank}：每步中位数 {gain}，阈值 "
        "{threshold}）。",
    ),
    "ov.st.none_title": ("Straggler: none", "慢卡：无"),
    "ov.st.share": (" ({share} of the profiled step time)", "（占已采集迭代时间的 {share}）"),
    "ov.st.title": ("Straggler: rank {rank} — {cause}", "慢卡：卡 {rank} — {cause}"),
    "ov.st.no_cause": ("cause not explained", "原因未明"),
    "ov.st.nothing": ("nothing that stands out", "无明显去向"),
    "ov.st.text": (
        "Rank {rank} arrives last at the collectives of group {group} by a median {gain} per step (threshold "
        "{threshold}); before each late collective its extra time went to {cause}{ops}. Had it taken its peers' "
        "time, the profiled steps would be {whatif} shorter{share}. msprof-analyze's vote: {votes} collective(s).",
        "卡 {rank} 在通信组 {group} 的集合通信中最后到达，每步中位数晚 {gain}（阈值 {threshold}）；每次迟到前，"
        "它多出的时间花在 {cause}{ops}。若它与同组其他卡耗时相同，已采集的迭代将缩短 {whatif}{share}。"
        "msprof-analyze 投票：{votes} 次集合通信。",
    ),
    "ov.st.in_timeline": ("In the timeline: ", "在时间线中："),
    "ov.st.latest": (
        "its latest late collective (step {step}, {margin} late)",
        "它最近一次迟到的集合通信（第 {step} 步，晚 {margin}）",
    ),
    "ov.st.interval": (
        " — the interval since the group's previous collective on every member.",
        " — 从该组上一次集合通信起、每个成员上的时间区间。",
    ),
    "ov.no_collection": ("run {run} has no collection for the selected ranks", "运行 {run} 在所选卡上没有采集数据"),
    "ov.none": ("none", "无"),
    "ov.one_step": ("1 (step {step})", "1（第 {step} 步）"),
    "ov.run_title": ("Run {run}", "运行 {run}"),
    "ov.s.ranks": ("ranks", "卡"),
    "ov.s.collections": ("collections", "采集数"),
    "ov.s.steps": ("profiled steps", "已采集的迭代"),
    "ov.s.formats": ("formats", "格式"),
    "ov.s.versions": ("producer versions", "采集工具版本"),
    "ov.s.level": ("profiler level", "采集级别"),
    "ov.s.world": ("world size", "总卡数 (world size)"),
    "ov.s.hosts": ("hosts", "主机"),
    "ov.s.span": ("time span", "时间跨度"),
    "ov.s.rows": ("fact rows", "数据行数"),
    "ov.recorded": ("What each rank recorded", "每张卡采集到的内容"),
    "ov.cc.rank": ("rank", "卡"),
    "ov.cc.format": ("format", "格式"),
    "ov.cc.status": ("status", "状态"),
    "ov.cap.steps": ("steps", "迭代"),
    "ov.cap.operators": ("operators", "算子"),
    "ov.cap.kernels": ("kernels", "kernel"),
    "ov.cap.communication": ("communication", "通信"),
    "ov.cap.comm_matrix": ("comm matrix", "通信矩阵"),
    "ov.cap.memory": ("memory", "内存"),
    "ov.cap.shapes": ("shapes", "shape"),
    "ov.cap.stacks": ("stacks", "调用栈"),
    "ov.cap.scalars": ("scalars", "标量"),
    "ov.who": ("{who}: ", "{who}："),
    "ov.bars": ("Step time per rank", "每张卡的迭代时间"),
    "ov.bars_step": ("Step time per rank — step {step}", "每张卡的迭代时间 — 第 {step} 步"),
    "ov.bars_mean": ("Step time per rank — mean over steps", "每张卡的迭代时间 — 各步平均"),
    "ov.bars_whole": (
        "Step time per rank — whole run (no steps recorded)",
        "每张卡的迭代时间 — 整个运行（无迭代记录）",
    ),
    "ov.no_step_data": (
        "No step data: the run has neither steps nor device tasks to break down.",
        "无迭代数据：该运行既没有迭代也没有可拆解的设备任务。",
    ),
    "ov.no_rank_step": ("no rank has step {step}", "没有卡有第 {step} 步"),
    "ov.note_defs": (
        "Computed from the events with msprof-analyze's definitions (interval unions): computing (not overlapped) + "
        "overlapped = Computing; Communication (not overlapped); Free = idle gaps inside the busy span; Preparing = "
        "host step start to first task. ",
        "按 msprof-analyze 的定义由事件计算（区间并集）：计算（未被掩盖）+ 被掩盖的通信 = 计算；通信（未被掩盖）；"
        "空闲 = 忙碌区间内的空隙；准备 = Host 侧迭代开始到第一个任务。",
    ),
    "ov.note_cpu": (
        "CPU-only ranks: the host threads are the resource (aten ops = computing, gloo/c10d calls = communication).",
        "仅 CPU 的卡：以 Host 线程为资源（aten 算子 = 计算，gloo/c10d 调用 = 通信）。",
    ),
    "ov.note_dist": (
        " {n} ranks: each box is a segment's distribution over the ranks (quartiles, whiskers at 1.5 IQR, outliers "
        "as points); the numbers list the {top} slowest ranks.",
        " {n} 张卡：每个箱线表示该部分在各卡上的分布（四分位，须为 1.5 IQR，离群值为点）；数值表列出最慢的 {top} 张"
        "卡。",
    ),
    "ov.note_no_vote": (" Slow ranks: no collective to vote on.", " 慢卡：没有可投票的集合通信。"),
    "ov.note_vote_none": (
        " Slow ranks (msprof-analyze's Dixon / 3σ vote over {n} collective(s)): none.",
        " 慢卡（msprof-analyze 对 {n} 次集合通信的 Dixon / 3σ 投票）：无。",
    ),
    "ov.note_marked": (
        " Marked: ranks judged slow by msprof-analyze's vote (Dixon / 3σ over each collective's elapsed times: the "
        "rank the others wait for).",
        " 已标出：msprof-analyze 投票判定的慢卡（对每次集合通信耗时做 Dixon / 3σ：其他卡在等待的卡）。",
    ),
    "ov.nc.rank": ("rank", "卡"),
    "ov.nc.step": ("step time", "迭代时间"),
    "ov.nc.computing": ("computing", "计算"),
    "ov.nc.communication": ("communication", "通信"),
    "ov.nc.overlapped": ("overlapped", "被掩盖的通信"),
    "ov.nc.comm": ("comm. not overlapped", "未被掩盖的通信"),
    "ov.nc.free": ("free", "空闲"),
    "ov.nc.preparing": ("preparing", "准备"),
    "ov.hover_step": ("step time", "迭代时间"),
    "ov.slow_votes": ("slow ({n} votes)", "慢（{n} 票）"),
    "ov.straggler_cause": ("straggler: {cause}", "慢卡：{cause}"),
    "ov.heat_step": ("step", "迭代"),
    "ov.heat_rank": ("rank", "卡"),
    "ov.straggler": ("straggler", "慢卡"),
    "ov.marked_rank": ("rank {rank} ({cause})", "卡 {rank}（{cause}）"),
    "ov.heat_note": (
        "Click a cell to open that rank and step in the timeline.",
        "点击格子可在时间线中打开该卡的该步。",
    ),
    "ov.outlined_1": (" Outlined: the straggler {ranks}.", " 已框出：慢卡 {ranks}。"),
    "ov.outlined_n": (" Outlined: the stragglers {ranks}.", " 已框出：慢卡 {ranks}。"),
    "ov.heat_title": ("Step time, rank × step", "迭代时间：卡 × 迭代"),
    "ov.scalars": ("Training scalars", "训练标量"),
    "ov.no_scalars": (
        "No per-step scalars in this run (the rankscope collector writes step time and the values passed to "
        "prof.step() for every step).",
        "本次运行没有逐步标量（rankscope 采集器会为每一步写入迭代时间和传给 prof.step() 的值）。",
    ),
    "ov.mean_steps": ("mean over steps", "各步平均"),
    "ov.step_n": ("step {step}", "第 {step} 步"),
    "picks.slowest": ("{n} slowest ranks (mean step time)", "最慢的 {n} 张卡（平均迭代时间）"),
    "picks.group": ("{dim} group {v} ({n} ranks)", "{dim} 组 {v}（{n} 张卡）"),
    "picks.coord": ("{dim} = {v} ({n} ranks)", "{dim} = {v}（{n} 张卡）"),
    "picks.group_1": ("{dim} group {v} (1 rank)", "{dim} 组 {v}（1 张卡）"),
    "picks.coord_1": ("{dim} = {v} (1 rank)", "{dim} = {v}（1 张卡）"),
    # -- Memory page --------------------------------------------------------------------------
    "mem.series.allocated": ("allocated", "已分配"),
    "mem.series.reserved": ("reserved", "已预留"),
    "mem.series.active": ("active", "活跃"),
    "mem.together": ("start_ns and end_ns go together", "start_ns 和 end_ns 须同时给出"),
    "mem.after": ("must be after start_ns", "必须晚于 start_ns"),
    "mem.outside": (
        "the window {a}–{b} ns lies outside the run ({lo}–{hi} ns)",
        "窗口 {a}–{b} ns 在运行范围之外（{lo}–{hi} ns）",
    ),
    "mem.no_counter": (
        "URL parameter component={component}: this run has no such memory counter (has: {have}).",
        "URL 参数 component={component}：该运行没有此内存计数器（现有：{have}）。",
    ),
    "mem.none": ("none", "无"),
    "mem.whole_note": ("{problem}; showing the whole run.", "{problem}；显示整个运行。"),
    "mem.subtitle": (
        "Allocator curves per rank (peaks kept when downsampling), peak per rank, and the largest operator "
        "allocations.",
        "每张卡的内存分配曲线（降采样时保留峰值）、每张卡的峰值，以及最大的算子内存分配。",
    ),
    "mem.ranks_curves": ("Ranks (curves)", "卡（曲线）"),
    "mem.counter": ("Counter", "计数器"),
    "mem.series": ("Series", "序列"),
    "mem.whole": ("Whole run", "整个运行"),
    "mem.over_time": ("Memory over time", "内存随时间变化"),
    "mem.peak_per_rank": ("Peak per rank", "每张卡的峰值"),
    "mem.largest": ("Largest operator allocations", "最大的算子内存分配"),
    "mem.group.allocators": ("Allocators (allocated / reserved / active)", "分配器（已分配 / 已预留 / 活跃）"),
    "mem.group.modules": ("Processes and driver modules (reserved)", "进程与驱动模块（已预留）"),
    "mem.group.zero": ("Never above 0 B", "始终为 0 B"),
    "mem.group_heading": ("— {heading} ({n}) —", "— {heading}（{n}）—"),
    "mem.with_peak": ("{counter} · peak {peak}", "{counter} · 峰值 {peak}"),
    "mem.col.rank": ("rank", "卡"),
    "mem.col.name": ("operator", "算子"),
    "mem.col.size": ("size (MiB)", "大小 (MiB)"),
    "mem.col.alloc": ("allocated at (ms)", "分配时刻 (ms)"),
    "mem.col.lifetime": ("lifetime (ms)", "生命周期 (ms)"),
    "mem.col.released": ("released", "已释放"),
    "mem.col.released_tip": (
        "no: the trace records no release of the block (still allocated when it ended)",
        "否：trace 中没有该内存块的释放记录（结束时仍未释放）",
    ),
    "mem.col.device": ("device", "设备"),
    "mem.x": ("ms since the run's first event", "距运行第一个事件的毫秒数"),
    "mem.curve": ("rank {rank}{device} {series}", "卡 {rank}{device} {series}"),
    "mem.peak_hover": ("rank {rank} peak {series}: {value}", "卡 {rank} {series}峰值：{value}"),
    "mem.no_samples_counter": ("No memory samples for this counter.", "此计数器没有内存采样。"),
    "mem.peak_axis": ("peak (MiB)", "峰值 (MiB)"),
    "mem.peak_series": ("peak {series}", "{series}峰值"),
    "mem.at_peak": ("at the peak", "峰值时刻"),
    "mem.highest": (
        "Highest peak allocated: rank {rank} ({value}); lowest: {lowest}.",
        "分配峰值最高：卡 {rank}（{value}）；最低：{lowest}。",
    ),
    "mem.numbers": ("numbers", "数值"),
    "mem.pc.rank": ("rank", "卡"),
    "mem.pc.allocated": ("peak allocated", "分配峰值"),
    "mem.pc.reserved": ("peak reserved", "预留峰值"),
    "mem.pc.active": ("peak active", "活跃峰值"),
    "mem.pc.timeline": ("timeline", "时间线"),
    "mem.no_blocks": (
        "No operator memory records for the selected ranks (needs profile_memory=True).",
        "所选卡上没有算子内存记录（需要 profile_memory=True）。",
    ),
    "mem.unknown": ("(unknown)", "（未知）"),
    "mem.no": ("no", "否"),
    "mem.yes": ("yes", "是"),
    "mem.cut": (" (largest {n} of {total})", "（共 {total} 个中最大的 {n} 个）"),
    "mem.blocks_status": ("{n} allocations{cut}, ranks {ranks}.", "{n} 次分配{cut}，卡 {ranks}。"),
    "mem.no_samples": (
        "This run has no memory samples (profile_memory was off?).",
        "该运行没有内存采样（profile_memory 未开启？）。",
    ),
    "mem.status": (
        "{counter}: {n} samples in view, ranks {ranks}, at most 1000 points per curve (bucket maxima); ▼ marks each "
        "rank's peak.",
        "{counter}：视图中 {n} 个采样，卡 {ranks}，每条曲线至多 1000 个点（分桶最大值）；▼ 标出每张卡的峰值。",
    ),
    # -- Training page ------------------------------------------------------------------------
    "tr.step_time": ("step time (ms)", "迭代时间 (ms)"),
    "tr.no_scalar": (
        "URL parameter scalar={scalar}: the run has no such scalar; showing the default.",
        "URL 参数 scalar={scalar}：该运行没有此标量；显示默认值。",
    ),
    "tr.subtitle": (
        "The training job's per-step values as the rankscope collector recorded them, every step, profiled or not: "
        "step time (outliers marked), loss, learning rate and whatever the job passes to prof.step(). Shaded steps "
        "are in a profile: click one to open it in the timeline.",
        "rankscope 采集器记录的训练作业逐步数值，每一步都有，无论是否采集了性能数据：迭代时间（标出异常值）、loss、"
        "学习率以及作业传给 prof.step() 的任何值。阴影中的迭代有性能数据：点击可在时间线中打开。",
    ),
    "tr.scalar": ("Scalar", "标量"),
    "tr.step": ("step", "迭代"),
    "tr.band": ("lowest to highest rank", "最低到最高的卡"),
    "tr.band_hover": ("step %{x}: highest %{y:.6g}", "第 %{x} 步：最高 %{y:.6g}"),
    "tr.median": ("median over the ranks", "各卡中位数"),
    "tr.median_hover": ("step %{x}: median %{y:.6g}", "第 %{x} 步：中位数 %{y:.6g}"),
    "tr.rank_hover": ("rank {rank}<br>step %{{x}}<br>%{{y:.6g}}", "卡 {rank}<br>第 %{{x}} 步<br>%{{y:.6g}}"),
    "tr.outlier_step": ("outlier step", "异常迭代"),
    "tr.outlier_hover": (
        "rank %{customdata[0]} step %{x}: %{y:.3f} ms, %{customdata[1]}× the local median",
        "卡 %{customdata[0]} 第 %{x} 步：%{y:.3f} ms，为局部中位数的 %{customdata[1]}×",
    ),
    "tr.outlier": ("outlier", "异常值"),
    "tr.no_outlier": ("No step-time outlier on the selected ranks.", "所选卡上没有迭代时间异常值。"),
    "tr.timeline": ("timeline", "时间线"),
    "tr.not_profiled": ("not profiled", "未采集"),
    "tr.oc.rank": ("rank", "卡"),
    "tr.oc.step": ("step", "迭代"),
    "tr.oc.time": ("step time", "迭代时间"),
    "tr.oc.median": ("local median", "局部中位数"),
    "tr.oc.ratio": ("× median", "× 中位数"),
    "tr.oc.profile": ("profile", "性能数据"),
    "tr.more": ("… {n} more", "… 另有 {n} 个"),
    "tr.no_window": (
        "No step of the selected ranks is in a profile (the collector records scalars at every step; a profiling "
        "window adds the traces of its steps).",
        "所选卡没有迭代在性能数据中（采集器每一步都记录标量；采集窗口会加入其迭代的 trace）。",
    ),
    "tr.wc.rank": ("rank", "卡"),
    "tr.wc.steps": ("steps", "迭代"),
    "tr.wc.open": ("open a step in the timeline", "在时间线中打开某一步"),
    "tr.no_scalars": (
        "No per-step scalars in this run: the rankscope collector writes rankscope_scalars.jsonl (step time and the "
        "values passed to prof.step()) at every step; ingest the job's output folder with it.",
        "本次运行没有逐步标量：rankscope 采集器每一步都会写 rankscope_scalars.jsonl（迭代时间和传给 prof.step() 的值"
        "）；"
        "请连同它导入作业的输出目录。",
    ),
    "tr.summary": (
        "Steps {first}..{last}; {n} scalar(s): {names}. {outliers} step-time outlier(s) on the selected ranks"
        "{in_profile}; "
        "{pairs} (rank, step) pair(s) profiled.",
        "迭代 {first}..{last}；{n} 个标量：{names}。所选卡上有 {outliers} 个迭代时间异常值{in_profile}；"
        "{pairs} 个（卡，迭代）已采集。",
    ),
    "tr.in_profile": (" ({n} in a profile)", "（{n} 个在性能数据中）"),
    "tr.steptime_title": ("Step time, outliers marked", "迭代时间（标出异常值）"),
    "tr.outlier_rule": (
        "An outlier is a step longer than the median of the 51 steps around it by more than 5 robust standard "
        "deviations and by at least 25 % (analyses.step_outliers).",
        "异常值：比其周围 51 步的中位数长出 5 个稳健标准差以上且至少长 25 % 的迭代（analyses.step_outliers）。",
    ),
    "tr.outliers_title": ("Step-time outliers", "迭代时间异常值"),
    "tr.profiled_title": ("Profiled steps", "已采集的迭代"),
    "tr.not_in_profile": (
        "Step {step} of rank {rank} is not in a profile (only shaded steps are).",
        "卡 {rank} 的第 {step} 步不在性能数据中（只有阴影中的迭代有）。",
    ),
}


# the language switch: each language by its own name, whatever the page's language
LANGUAGE_NAMES = {"en": "English", "zh": "中文"}

_FIELDS = string.Formatter()


def fields(text: str) -> set[str]:
    """The ``{name}`` fields of a text."""
    return {name for _, name, _, _ in _FIELDS.parse(text) if name}


def t(key: str, **values: Any) -> str:
    """The text of ``key`` in the request's language, its ``{fields}`` filled with ``values``
    (as text: a name from a trace stays what it is)."""
    en, zh = LABELS[key]
    text = zh if lang.current() == "zh" else en
    return text.format(**values) if values else text


def page_title(page: str) -> Callable[..., str]:
    """A page's title in the browser's tab ("rankscope · 内存"), for ``dash.register_page(title=...)``
    (Dash calls it for each request)."""

    def title(**_: Any) -> str:
        return f"rankscope · {t(f'nav.{page}')}"

    return title
