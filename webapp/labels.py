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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from analyzer import messages

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
    "auth.denied": (
        "This rankscope server needs its token. Open the address `analyze serve` printed (it ends in "
        "?token=...) once in this browser, or send the header 'Authorization: Bearer <token>'.",
        "此 rankscope 服务器需要令牌。请在本浏览器中打开一次 `analyze serve` 打印的地址（以 ?token=... 结尾），"
        "或发送请求头 'Authorization: Bearer <token>'。",
    ),
    # -- dcc.Dropdown's own texts (its ``labels``: ui.dropdown) -----------------------------------
    "dd.select_all": ("Select All", "全选"),
    "dd.deselect_all": ("Deselect All", "全不选"),
    "dd.selected_count": ("{num_selected} selected", "已选 {num_selected} 项"),
    "dd.search": ("Search", "搜索"),
    "dd.clear_search": ("Clear search", "清除搜索"),
    "dd.clear_selection": ("Clear selection", "清除选择"),
    "dd.no_options_found": ("No options found", "无匹配选项"),
    # -- Plotly's own texts (the chart's mode bar, its hints): ui.graph's plotly_locale; the
    # English is Plotly's source text (the key of its locale dictionary)
    "plotly.download_png": ("Download plot as a PNG", "下载为 PNG 图片"),
    "plotly.download": ("Download plot", "下载图表"),
    "plotly.download_json": ("Download plot as JSON", "下载为 JSON"),
    "plotly.zoom": ("Zoom", "缩放"),
    "plotly.pan": ("Pan", "平移"),
    "plotly.box_select": ("Box Select", "框选"),
    "plotly.lasso_select": ("Lasso Select", "套索选择"),
    "plotly.zoom_in": ("Zoom in", "放大"),
    "plotly.zoom_out": ("Zoom out", "缩小"),
    "plotly.autoscale": ("Autoscale", "自动缩放"),
    "plotly.reset_axes": ("Reset axes", "重置坐标轴"),
    "plotly.reset_view": ("Reset view", "重置视图"),
    "plotly.spikes": ("Toggle Spike Lines", "切换辅助线"),
    "plotly.closest": ("Show closest data on hover", "悬停时显示最近的数据"),
    "plotly.compare": ("Compare data on hover", "悬停时比较数据"),
    "plotly.double_click": ("Double-click to zoom back out", "双击恢复缩放"),
    # -- AG Grid's own texts (filter menus, pagination, "no rows"): ui.grid_locale -------------
    "grid.ariaFilterMenuOpen": ("Open Filter Menu", "打开筛选菜单"),
    "grid.noRowsToShow": ("No rows to show", "无数据"),
    "grid.loadingOoo": ("Loading...", "加载中..."),
    "grid.page": ("Page", "第"),
    "grid.to": ("to", "至"),
    "grid.of": ("of", "/"),
    "grid.more": ("more", "更多"),
    "grid.firstPage": ("First Page", "首页"),
    "grid.lastPage": ("Last Page", "末页"),
    "grid.nextPage": ("Next Page", "下一页"),
    "grid.previousPage": ("Previous Page", "上一页"),
    "grid.pageSizeSelectorLabel": ("Page Size:", "每页行数："),
    "grid.ariaPageSizeSelectorLabel": ("Page Size", "每页行数"),
    "grid.filterOoo": ("Filter...", "筛选..."),
    "grid.searchOoo": ("Search...", "搜索..."),
    "grid.selectAll": ("(Select All)", "（全选）"),
    "grid.blanks": ("(Blanks)", "（空白）"),
    "grid.equals": ("Equals", "等于"),
    "grid.notEqual": ("Does not equal", "不等于"),
    "grid.blank": ("Blank", "为空"),
    "grid.notBlank": ("Not blank", "不为空"),
    "grid.empty": ("Choose one", "请选择"),
    "grid.lessThan": ("Less than", "小于"),
    "grid.greaterThan": ("Greater than", "大于"),
    "grid.lessThanOrEqual": ("Less than or equal to", "小于等于"),
    "grid.greaterThanOrEqual": ("Greater than or equal to", "大于等于"),
    "grid.inRange": ("Between", "介于"),
    "grid.inRangeStart": ("From", "从"),
    "grid.inRangeEnd": ("To", "到"),
    "grid.contains": ("Contains", "包含"),
    "grid.notContains": ("Does not contain", "不包含"),
    "grid.startsWith": ("Begins with", "开头是"),
    "grid.endsWith": ("Ends with", "结尾是"),
    "grid.andCondition": ("AND", "且"),
    "grid.orCondition": ("OR", "或"),
    "grid.applyFilter": ("Apply", "应用"),
    "grid.resetFilter": ("Reset", "重置"),
    "grid.clearFilter": ("Clear", "清除"),
    "grid.cancelFilter": ("Cancel", "取消"),
    "grid.filterConditions": ("Conditions", "条件"),
    "grid.columns": ("Columns", "列"),
    "grid.filters": ("Filters", "筛选"),
    "grid.pinColumn": ("Pin Column", "固定列"),
    "grid.pinLeft": ("Pin Left", "固定在左侧"),
    "grid.pinRight": ("Pin Right", "固定在右侧"),
    "grid.noPin": ("No Pin", "取消固定"),
    "grid.autosizeThisColumn": ("Autosize This Column", "自动调整此列宽度"),
    "grid.autosizeAllColumns": ("Autosize All Columns", "自动调整所有列宽度"),
    "grid.resetColumns": ("Reset Columns", "重置列"),
    "grid.sortAscending": ("Sort Ascending", "升序排序"),
    "grid.sortDescending": ("Sort Descending", "降序排序"),
    "grid.sortUnSort": ("Clear Sort", "清除排序"),
    "grid.copy": ("Copy", "复制"),
    "grid.ariaFilterInput": ("Filter Input", "筛选输入"),
    "grid.ariaFilterValue": ("Filter Value", "筛选值"),
    "grid.ariaSearch": ("Search", "搜索"),
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
    "rule.straggler": ("straggler", "拖慢其他卡的卡"),
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
    "pp.k.forward_backward": (
        "forward + backward (no autograd node to split at)",
        "前向 + 反向（无可切分的 autograd 节点）",
    ),
    "pp.k.bubble": ("bubble (blocked in send / recv)", "气泡（阻塞于 send / recv）"),
    "pp.k.other": ("other work", "其他工作"),
    "pp.axis": ("ms (aligned clock)", "毫秒（对齐后的时钟）"),
    "pp.row": ("stage {stage} · rank {rank}", "阶段 {stage} · 卡 {rank}"),
    "pp.micro_batch": ("micro-batch {k}", "微批次 {k}"),
    "pp.chunk": ("model chunk {c}", "模型块 {c}"),
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
    "pp.interleaved": (
        "Interleaved schedule (virtual pipeline): each rank holds {chunks} model chunks, the last stage sends its "
        "activations on to the first stage's next chunk; a bar's mark is micro-batch·chunk (F3·1: the forward of "
        "micro-batch 3 in chunk 1).",
        "交错调度（虚拟流水线）：每张卡持有 {chunks} 个模型块，最后一个阶段把激活发给第一个阶段的下一个模型块；"
        "色条标记为 微批次·模型块（F3·1：模型块 1 中微批次 3 的前向）。",
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
    "pp.col.chunks": ("chunks", "模型块"),
    "pp.over_steps": ("Bubble share over every step: {shares}.", "所有迭代的气泡占比：{shares}。"),
    "pp.stage_share": ("stage {stage}: {share} %", "阶段 {stage}：{share} %"),
    "pp.explain": (
        "A bubble is the time from calling a send or recv to its end: the stage waits for its neighbour. Work "
        "before a send belongs to that send's micro-batch; work after a recv up to the next one consumed it. "
        "Where a forward and a backward meet with no send or recv between (the last stage in 1F1B, the first "
        "stage's backward and next forward) they are split where the trace shows the autograd engine's first "
        "backward node (or the end of its last).",
        "气泡指从调用 send 或 recv 到其结束的时间：该阶段在等待相邻阶段。send 之前的工作属于该 send 的微批次；recv "
        "之后直到下一个 recv 的工作消费了该 recv。前向与反向之间没有 send 或 recv 时（1F1B 的最后一个阶段、第一个阶段的"
        "反向与下一个前向），按 trace 中 autograd 引擎的第一个反向节点（或最后一个反向节点的结束）切分。",
    ),
    "pp.combined": (
        "{n} bar(s) show a forward and a backward together: the trace has no autograd engine nodes "
        "(autograd::engine::evaluate_function) between them to split them at.",
        "{n} 个色条将前向与反向合并显示：trace 中二者之间没有 autograd 引擎节点"
        "（autograd::engine::evaluate_function）可用于切分。",
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
    "cmp.run_slow": ("{run}: {who}", "{run}：{who}"),
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
    "ov.st.unmatched_why": ("{why}: {notes}.", "{why}：{notes}。"),
    "ov.st.unmatched_end": ("{why}.", "{why}。"),
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
    "mem.from_stored": (
        " Drawn from the curves downsampled at ingest (their peaks are the samples' own).",
        "曲线取自导入时降采样的曲线（峰值与采样一致）。",
    ),
    "mem.from_samples": (" Drawn from every sample in view.", "曲线取自视图中的每个采样。"),
    # -- Training page ------------------------------------------------------------------------
    "tr.step_time": ("step time (ms)", "迭代时间 (ms)"),
    "ov.scalar_step_time": ("step time", "迭代时间"),
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
    "tr.mean": ("mean over the ranks", "各卡平均值"),
    "tr.mean_hover": ("step %{x}: mean %{y:.6g}", "第 %{x} 步：平均值 %{y:.6g}"),
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
    # -- Communication page -------------------------------------------------------------------
    "cm.col.name": ("operation", "通信操作"),
    "cm.col.timeline": ("timeline", "时间线"),
    "cm.col.op_type": ("type", "类型"),
    "cm.col.group_name": ("group", "通信组"),
    "cm.col.step": ("step", "迭代"),
    "cm.col.ranks": ("ranks", "卡数"),
    "cm.col.calls": ("calls", "调用次数"),
    "cm.col.max_ms": ("max (ms)", "最大 (ms)"),
    "cm.col.min_ms": ("min (ms)", "最小 (ms)"),
    "cm.col.avg_ms": ("avg (ms)", "平均 (ms)"),
    "cm.col.slowest_rank": ("slowest rank", "最慢卡"),
    "cm.col.fastest_rank": ("fastest rank", "最快卡"),
    "cm.col.last_rank": ("last to arrive", "最后到达"),
    "cm.col.late_ms": ("late by (ms)", "晚到 (ms)"),
    "cm.col.max_wait_ms": ("max wait (ms)", "最大等待 (ms)"),
    "cm.col.wait_source": ("wait from", "等待来源"),
    "cm.col.mib": ("size (MiB)", "大小 (MiB)"),
    "cm.tip.timeline": ("this instance in the timeline, on every member rank", "在时间线中查看此实例（所有成员卡）"),
    "cm.tip.last_rank": (
        "the member that entered last (clocks aligned); the others waited for it",
        "最后进入的成员（时钟已对齐）；其他成员在等待它",
    ),
    "cm.tip.late_ms": (
        "how much later than the next-latest member it entered: what the collective would have started earlier had i"
        "t arrived with its peers",
        "比倒数第二个成员晚进入多少：若它与其他成员同时到达，该集合通信可提前开始的时间",
    ),
    "cm.tip.wait_source": (
        "producer: measured by the profiler; estimated: elapsed minus the shortest elapsed of the collective",
        "profiler 测得：由 profiler 测得；估计：耗时减去该集合通信的最短耗时",
    ),
    "cm.mx.bytes": ("bytes", "字节数"),
    "cm.mx.transit_ns": ("transit time", "传输时间"),
    "cm.mx.bandwidth_bytes_per_s": ("bandwidth", "带宽"),
    "cm.showing_bytes": ("bytes", "字节数"),
    "cm.subtitle": (
        "Where communication time goes on each rank, how fast the links are, and which collectives are slow.",
        "每张卡的通信时间花在哪里、链路有多快、哪些集合通信慢。",
    ),
    "cm.matrix": ("Matrix", "矩阵"),
    "cm.collectives": ("Collectives", "集合通信"),
    "cm.select": (
        "Select a collective to see who arrived last, and why.",
        "选中一个集合通信，查看谁最后到达以及原因。",
    ),
    "cm.per_rank": ("Communication time per rank", "每张卡的通信时间"),
    "cm.no_ops": (
        "No communication operations for the selected ranks (single process, or the profiler did not record them).",
        "所选卡上没有通信操作（单进程，或 profiler 未记录）。",
    ),
    "cm.transit": ("transit", "传输"),
    "cm.wait": ("wait", "等待"),
    "cm.other": ("other (idle, sync)", "其他（空闲、同步）"),
    "cm.other_short": ("other", "其他"),
    "cm.elapsed": ("elapsed", "耗时"),
    "cm.note_producer": (
        "Elapsed time of the communication operations split as the producer measured it: transit (moving data), "
        "wait (for the peers), other (idle / synchronisation). Long waits point at a slow peer.",
        "通信操作耗时按采集工具的测量拆分：传输（搬运数据）、等待（等待其他卡）、其他（空闲 / 同步）。"
        "等待时间长说明有慢卡。",
    ),
    "cm.note_estimated": (
        "Wait and transit estimated the way msprof-analyze does when the producer gives only elapsed times (Kineto, "
        "MindSpore on CPU): per collective, transit = the shortest elapsed time among its ranks, wait = the rest. "
        "Long waits point at a slow peer.",
        "采集工具只给出耗时时（Kineto、CPU 上的 MindSpore），按 msprof-analyze 的方法估计等待与传输："
        "每次集合通信中，传输 = 各卡中最短的耗时，等待 = 其余部分。等待时间长说明有慢卡。",
    ),
    "cm.note_elapsed": (
        "Elapsed time of the communication operations; wait and transit could not be separated (no producer split "
        "and no collective matched on every rank).",
        "通信操作的耗时；无法拆分等待与传输（采集工具未拆分，且没有在每张卡上都匹配到的集合通信）。",
    ),
    "cm.vote": (
        "Slow rank vote (msprof-analyze: Dixon / 3σ per collective): {ranks}",
        "慢卡投票（msprof-analyze：每次集合通信做 Dixon / 3σ）：{ranks}",
    ),
    "cm.vote_rank": ("rank {rank} {votes}/{n}", "卡 {rank} {votes}/{n}"),
    "cm.vote_none": (
        "Slow rank vote (msprof-analyze: Dixon / 3σ per collective): no rank judged slow over {n} collective(s).",
        "慢卡投票（msprof-analyze：每次集合通信做 Dixon / 3σ）：{n} 次集合通信中没有卡被判为慢卡。",
    ),
    "cm.numbers": ("numbers", "数值"),
    "cm.rc.rank": ("rank", "卡"),
    "cm.rc.ops": ("operations", "操作数"),
    "cm.rc.elapsed": ("elapsed", "耗时"),
    "cm.rc.wait": ("wait", "等待"),
    "cm.rc.transit": ("transit", "传输"),
    "cm.rc.size": ("data size", "数据量"),
    "cm.size_note": (
        "Data size: the operations' buffers, each counted once per rank (the payload, not the traffic it causes on "
        "the links).",
        "数据量：各操作的缓冲区，每张卡计一次（有效载荷，而非其在链路上产生的流量）。",
    ),
    "cm.bw": ("Bandwidth per transport", "各传输方式的带宽"),
    "cm.no_bw": (
        "No per-transport bandwidth in this run (torch_npu / MindSpore communication.json at Level1 or above records "
        "it).",
        "本次运行没有各传输方式的带宽（torch_npu / MindSpore 在 Level1 及以上的 communication.json 会记录）。",
    ),
    "cm.bw_note": (
        "Bandwidth = bytes moved / transit time summed over the operations; min / max over single operations.",
        "带宽 = 搬运字节数 / 各操作传输时间之和；最小 / 最大为单个操作的值。",
    ),
    "cm.bc.rank": ("rank", "卡"),
    "cm.bc.transport": ("transport", "传输方式"),
    "cm.bc.bytes": ("bytes moved", "搬运字节数"),
    "cm.bc.transit": ("transit", "传输"),
    "cm.bc.bandwidth": ("bandwidth", "带宽"),
    "cm.bc.min": ("min", "最小"),
    "cm.bc.max": ("max", "最大"),
    "cm.bw_bytes_note": (
        "Bytes moved: the traffic the profiler counted on that transport, larger than the data size of the per-rank "
        "table: a collective moves its buffer in several pieces to several peers (a ring all-reduce sends about "
        "2(n-1)/n of it), and SDMA, the copy engine behind HCCS and PCIe transfers, counts the same traffic again, "
        "so do not add transports up.",
        "搬运字节数：profiler 在该传输方式上统计的流量，大于每卡表中的数据量：集合通信会把缓冲区分成多块发给多个对端"
        "（环形 all-reduce 约发送其 2(n-1)/n），而 HCCS 和 PCIe 传输背后的拷贝引擎 SDMA 会再统计一次同样的流量，"
        "因此不要把各传输方式相加。",
    ),
    "cm.matrix_title": ("Rank × rank matrix", "卡 × 卡通信矩阵"),
    "cm.no_matrix": (
        "No communication matrix in this run (torch_npu / MindSpore Level1+ write communication_matrix.json; Kineto "
        "has no per-link data, only matched send/recv pairs).",
        "本次运行没有通信矩阵（torch_npu / MindSpore Level1 及以上会写 communication_matrix.json；"
        "Kineto 没有逐链路数据，只有匹配的 send/recv 对）。",
    ),
    "cm.dst": ("destination rank", "目的卡"),
    "cm.src": ("source rank", "源卡"),
    "cm.local": ("local", "本地"),
    "cm.local_hover": ("(local, inside the device)", "（本地，设备内部）"),
    "cm.matrix_note": (
        "{metric} per (source, destination) link, summed over operation types and steps",
        "每条（源，目的）链路的{metric}，按操作类型和迭代求和",
    ),
    "cm.matrix_range": (
        " (from {lo} to {hi} {unit}; the colour scale starts at 0).",
        "（从 {lo} 到 {hi} {unit}；色标从 0 开始）。",
    ),
    "cm.matrix_end": (".", "。"),
    "cm.grey": (
        " Grey: a rank's copies inside its own device (local links, {lo}–{hi} {unit}), kept out of the colour scale.",
        " 灰色：卡在自身设备内的拷贝（本地链路，{lo}–{hi} {unit}），不计入色标。",
    ),
    "cm.local_rank": (
        " L<k>: local rank k of the group, whose global rank the profiler did not record (its rank was not profiled).",
        " L<k>：通信组中的本地序号 k，profiler 未记录其全局卡号（该卡未被采集）。",
    ),
    "cm.on_ranks": ("on {n} ranks", "在 {n} 张卡上"),
    "cm.on_rank": ("on 1 rank", "在 1 张卡上"),
    "cm.cut": (" (the {n} slowest of {total})", "（共 {total} 个中最慢的 {n} 个）"),
    "cm.status": (
        "{n} collectives (an instance = one call matched across its ranks) over ranks {ranks}{cut}.",
        "卡 {ranks} 上共 {n} 个集合通信（一个实例 = 在各成员卡间匹配的一次调用）{cut}。",
    ),
    "cm.no_ops_short": ("No communication operations.", "没有通信操作。"),
    "cm.no_group": ("ops without a group", "无通信组的操作"),
    "cm.group": ("group {group}", "通信组 {group}"),
    "cm.who": ("{who}: ", "{who}："),
    "cm.no_blame": (
        "No arrival order for this collective: it was not seen by every profiled member of its group, or a member's "
        "clock cannot be aligned, or it is the first of its group with no step around it.",
        "此集合通信没有到达顺序：并非其通信组中每个已采集的成员都记录到它，或某成员的时钟无法对齐，"
        "或它是该组第一次且不在任何迭代内。",
    ),
    "cm.chain_rank": ("rank {rank} ({cause}{waited})", "卡 {rank}（{cause}{waited}）"),
    "cm.waited": (", waited {time}", "，等待 {time}"),
    "cm.blame_title": ("Blame: {op} of group {group}, step {step}", "归因：通信组 {group} 的 {op}，第 {step} 步"),
    "cm.blame_text": (
        "Rank {rank} arrived last, {lateness} after the first member and {margin} after the next-latest: the "
        "collective would have started that much earlier had it arrived with its peers. Since the group's previous "
        "collective it spent {spent} against its peers' {peers} (median); the difference went to {cause}.",
        "卡 {rank} 最后到达，比第一个成员晚 {lateness}，比倒数第二个成员晚 {margin}：若它与其他成员同时到达，"
        "该集合通信可提前这么多开始。自该组上一次集合通信以来，它用了 {spent}，其他成员为 {peers}（中位数）；"
        "差值花在 {cause}。",
    ),
    "cm.bl.cause": ("cause", "原因"),
    "cm.bl.excess": ("excess over the peers' median", "超出其他成员中位数的部分"),
    "cm.bl.operator": ("operator", "算子"),
    "cm.bl.op_excess": ("excess", "超出"),
    "cm.bl.its_time": ("its time", "其耗时"),
    "cm.chain": ("Waiting chain: {chain}", "等待链：{chain}"),
    "cm.in_timeline": ("In the timeline: ", "在时间线中："),
    "cm.interval": ("the interval on every member", "每个成员上的该区间"),
    "cm.groups": ("Communication groups", "通信组"),
    "cm.no_groups": ("No communication group with matched operations in this run.", "本次运行没有带匹配操作的通信组。"),
    "cm.gc.group": ("group", "通信组"),
    "cm.gc.role": ("role", "角色"),
    "cm.gc.ranks": ("ranks", "卡"),
    "cm.gc.instances": ("instances", "实例数"),
    "cm.gc.elapsed": ("elapsed", "耗时"),
    "cm.gc.wait": ("wait", "等待"),
    "cm.gc.transit": ("transit", "传输"),
    "cm.gc.idle": ("idle", "空闲"),
    "cm.gc.idle_share": ("idle share", "空闲占比"),
    "cm.groups_note": (
        "Summed over the group's ranks. Idle = elapsed − wait − transit (msprof-analyze's Idle Time: inside the "
        "operation, neither waiting for a peer nor moving data — synchronisation and the gaps between its tasks); "
        "the producer's own figure where it wrote one.",
        "按通信组的各卡求和。空闲 = 耗时 − 等待 − 传输（msprof-analyze 的 Idle Time：操作内部既不等待对端也不搬运数据"
        "——同步以及任务间的空隙）；采集工具写了自己的数值时用它的。",
    ),
    "cm.dc.rank": ("rank", "卡"),
    "cm.dc.definition": ("definition", "定义"),
    "cm.dc.ours": ("Communication (ours)", "通信（本工具）"),
    "cm.dc.producer": ("Communication (producer's)", "通信（采集工具）"),
    "cm.def_note": (
        "The step breakdown's Communication, mean per step: union of the op spans, or of the HCCL tasks where the "
        "producer's own step rows count those (docs/analyses.md §1).",
        "迭代拆解中的通信，每步平均：各操作区间的并集；若采集工具自己的迭代数据按 HCCL 任务统计，"
        "则为 HCCL 任务的并集（docs/analyses.md §1）。",
    ),
    # -- Timeline page ------------------------------------------------------------------------
    "tl.subtitle": (
        "Host threads, device streams, communication and overlap of every selected rank, on one clock.",
        "所选每张卡的 Host 线程、Device 流、通信和重叠分析，统一在一个时钟上。",
    ),
    "tl.click": (
        "Click an event for its details: name, lane, times, shapes, arguments, call stack, the kernel row of a "
        "device task, the members of a collective.",
        "点击事件查看详情：名称、泳道、时间、shape、参数、调用栈、设备任务对应的 kernel 行、集合通信的成员。",
    ),
    "tl.jump": ("Jump to step", "跳转到迭代"),
    "tl.step_ph": ("step…", "迭代…"),
    "tl.lanes": ("Lanes", "泳道"),
    "tl.grp.host": ("host", "Host"),
    "tl.grp.device": ("device", "Device"),
    "tl.grp.communication": ("communication", "通信"),
    "tl.grp.overlap": ("overlap", "重叠分析"),
    "tl.grp.other": ("other", "其他"),
    "tl.grp.counters": ("counters", "计数器"),
    "tl.arrows": ("Arrows", "连线"),
    "tl.flow.launch": ("launch → device task", "下发 → 设备任务"),
    "tl.flow.p2p": ("send → recv", "send → recv"),
    "tl.flow.collective": ("collective members", "集合通信成员"),
    # an arrow's tooltip (webapp.flows; names from the trace as values)
    "tl.flow_label.launch": ("launch → {name}", "下发 → {name}"),
    "tl.flow_label.p2p": ("{direction} send {src} → recv {dst}{size}", "{direction}：send {src} → recv {dst}{size}"),
    "tl.flow_label.bytes": (", {bytes} bytes", "，{bytes} 字节"),
    "tl.flow_label.collective": (
        "{name} ({op}) left by rank {a} and rank {b}",
        "{name}（{op}）：卡 {a} 与卡 {b} 离开之处",
    ),
    "tl.flow_dir.forward": ("forward", "前向"),
    "tl.flow_dir.backward": ("backward", "反向"),
    "tl.arrows_tip": (
        "Flow arrows over the view once it is zoomed in to named slices: a host call to the device task it launched, "
        "a send to the recv it was paired with, the members of a collective on their ranks.",
        "放大到显示切片名称后绘制连线箭头：Host 调用到它下发的设备任务，send 到与之配对的 recv，集合通信在各卡上的成"
        "员。",
    ),
    "tl.bad_flows": (
        "URL parameter flows: unknown arrows {bad} (known: {known})",
        "URL 参数 flows：未知的连线 {bad}（已知：{known}）",
    ),
    "tl.pipeline": ("pipeline view", "流水线视图"),
    "tl.pipeline_tip": (
        "Pipeline-parallel jobs: each stage's forward / backward micro-batches and bubbles, from the send/recv pairs",
        "流水线并行作业：由 send/recv 配对得到每个阶段的前向 / 反向微批次与气泡",
    ),
    "tl.clock": ("Clock", "时钟"),
    "tl.aligned": ("aligned across ranks", "跨卡对齐"),
    "tl.clock_tip": (
        "Each rank's clock offset is estimated from the ends of its blocking collectives (all members leave "
        "together); the residual says how well they agree after the correction. Offsets of ranks that cannot be "
        "aligned well are not applied.",
        "每张卡的时钟偏移由其阻塞式集合通信的结束时刻估计（所有成员同时离开）；残差表示校正后的吻合程度。"
        "无法良好对齐的卡不应用偏移。",
    ),
    "tl.search_ph": ("find a slice by name…", "按名称查找切片…"),
    "tl.prev": ("previous match (shift+Enter)", "上一个匹配（shift+Enter）"),
    "tl.next": ("next match (Enter)", "下一个匹配（Enter）"),
    "tl.keys": ("keys", "快捷键"),
    "tl.keys_tip": (
        "W / S zoom, A / D pan, wheel: zoom at the cursor, shift+wheel: scroll the lanes, drag: pan, shift-drag or "
        "drag on the time axis: measure a range (Esc clears), double-click: zoom in. Click a rank or lane group to "
        "fold it, ○ to pin a lane on top. Every view is a browser history entry (Back / Forward) and a link.",
        "W / S 缩放，A / D 平移，滚轮：在光标处缩放，shift+滚轮：滚动泳道，拖动：平移，shift+拖动或在时间轴上拖动："
        "测量区间（Esc 清除），双击：放大。点击卡或泳道组可折叠，○ 可将泳道置顶。每个视图都是浏览器历史记录"
        "（后退 / 前进）和一个链接。",
    ),
    "tl.whole": ("Whole run", "整个运行"),
    "tl.zoom_out": ("Zoom out", "缩小"),
    "tl.step_n": ("step {step}", "第 {step} 步"),
    "tl.note": ("{problem}; {then}.", "{problem}；{then}。"),
    "tl.bad_groups": (
        "URL parameter groups: unknown lane group {bad} (known: {known})",
        "URL 参数 groups：未知的泳道组 {bad}（已知：{known}）",
    ),
    "tl.clock_values": ("must be aligned or raw", "必须是 aligned 或 raw"),
    "tl.then_aligned": ("the clocks are aligned", "时钟已对齐"),
    "tl.hl_format": ("expected RANK:START_NS:END_NS", "应为 RANK:START_NS:END_NS"),
    "tl.not_shown": ("rank {rank} is not shown", "卡 {rank} 未显示"),
    "tl.then_no_hl": ("nothing is highlighted", "不高亮任何区间"),
    "tl.bad_sel": (
        "URL parameter sel={sel}: expected RANK:COLLECTION:EVENT of a shown rank",
        "URL 参数 sel={sel}：应为已显示卡的 RANK:COLLECTION:EVENT",
    ),
    "tl.together": ("start_ns and end_ns go together", "start_ns 和 end_ns 须同时给出"),
    "tl.after": ("must be after start_ns", "必须晚于 start_ns"),
    "tl.outside": (
        "the window {a}–{b} ns lies outside the selected ranks' events ({lo}–{hi} ns)",
        "窗口 {a}–{b} ns 在所选卡的事件范围之外（{lo}–{hi} ns）",
    ),
    "tl.have_steps": ("they have steps {first}–{last}", "它们有第 {first}–{last} 步"),
    "tl.have_step": ("they have step {step}", "它们有第 {step} 步"),
    "tl.no_steps": ("the run has no steps", "该运行没有迭代"),
    "tl.no_step": ("the selected ranks have no step {step} ({have})", "所选卡没有第 {step} 步（{have}）"),
    "tl.then_whole": ("showing the whole run", "显示整个运行"),
    "tl.k.op_type": ("kernel type", "kernel 类型"),
    "tl.k.core_type": ("core type", "核类型"),
    "tl.k.block_dim": ("block dim", "block dim"),
    "tl.k.input_shapes": ("input shapes", "输入 shape"),
    "tl.k.input_types": ("input types", "输入类型"),
    "tl.k.input_formats": ("input formats", "输入格式"),
    "tl.k.output_shapes": ("output shapes", "输出 shape"),
    "tl.k.output_types": ("output types", "输出类型"),
    "tl.gone": ("That event is no longer in the store (re-ingested?).", "该事件已不在存储中（重新导入过？）。"),
    "tl.when": (
        "{at} after the run's first event on rank {rank}'s clock (t = {start} ns)",
        "卡 {rank} 时钟上距运行第一个事件 {at}（t = {start} ns）",
    ),
    "tl.when_aligned": ("; {at} on the aligned clock", "；对齐时钟上为 {at}"),
    "tl.d.name": ("name", "名称"),
    "tl.d.rank": ("rank", "卡"),
    "tl.d.lane": ("lane", "泳道"),
    "tl.d.category": ("category", "类别"),
    "tl.d.step": ("step", "迭代"),
    "tl.d.start": ("start", "开始"),
    "tl.d.duration": ("duration", "耗时"),
    "tl.d.self": ("self time", "自身耗时"),
    "tl.event": ("Event", "事件"),
    "tl.kernel": ("Kernel", "Kernel"),
    "tl.args": ("Arguments", "参数"),
    "tl.stack": ("Call stack", "调用栈"),
    "tl.stack_src": ("Call stack ({source})", "调用栈（{source}）"),
    "tl.no_stack": (
        "not recorded (with_stack was off or the producer gives none)",
        "未记录（with_stack 未开启或采集工具未提供）",
    ),
    "tl.collective": (
        "Collective: {op} over {n} of {total} ranks{size}",
        "集合通信：{op}，{total} 张卡中的 {n} 张{size}",
    ),
    "tl.m.rank": ("rank", "卡"),
    "tl.m.entered": ("entered", "进入时刻"),
    "tl.m.after": ("after first", "晚于第一个"),
    "tl.m.duration": ("duration", "耗时"),
    "tl.m.wait": ("wait", "等待"),
    "tl.m.transit": ("transit", "传输"),
    "tl.own_clock": ("Entry times on each rank's own clock. ", "各卡进入时刻均为其自身时钟。"),
    "tl.show_all": ("Show this collective on all its ranks", "在所有成员卡上显示此集合通信"),
    # -- Timeline renderer (webapp/assets/timeline.js: its texts arrive in the page's config) -------
    "tl.js.tiles_error": ("Could not load tiles: {error}", "无法加载切片数据：{error}"),
    "tl.js.clock_ref": ("clock reference", "时钟基准"),
    "tl.js.own_clock": ("own clock ({status})", "自身时钟（{status}）"),
    "tl.js.own_clock_res": ("own clock: {status}{residual}", "自身时钟：{status}{residual}"),
    "tl.js.raw": ("raw · ", "原始时钟 · "),
    "tl.js.offset": ("offset {sign}{offset}", "偏移 {sign}{offset}"),
    "tl.js.rank": ("rank {rank}", "卡 {rank}"),
    "tl.js.folded": ("{group} (folded)", "{group}（已折叠）"),
    "tl.js.aligned_clocks": ("aligned clocks", "对齐时钟"),
    "tl.js.raw_clocks": ("raw clocks", "原始时钟"),
    "tl.js.window": ("window {span}", "窗口 {span}"),
    "tl.js.slices_drawn": (
        "{n} slices drawn with their names, shorter ones as occupancy · ",
        "{n} 个切片带名称绘制，更短的显示为占用 · ",
    ),
    "tl.js.occupancy": ("occupancy only at this zoom · ", "此缩放级别仅显示占用 · "),
    "tl.js.bucket": (" · bucket {size}", " · 桶 {size}"),
    "tl.js.loading": (" · loading {n} tiles", " · 正在加载 {n} 个分块"),
    "tl.js.starts": ("{dur} · starts {at}", "{dur} · 开始于 {at}"),
    "tl.js.range": ("Range {span}", "区间 {span}"),
    "tl.js.range_hint": (
        "{a} → {b} (Esc clears; shift-drag or drag on the time axis measures)",
        "{a} → {b}（Esc 清除；shift+拖动或在时间轴上拖动可测量）",
    ),
    "tl.js.counting": ("counting the slices in the range…", "正在统计区间内的切片…"),
    "tl.js.in_range": ("{n} slices in the range", "区间内 {n} 个切片"),
    "tl.js.longest_counted": (" (the longest counted)", "（只统计最长的）"),
    "tl.js.col_name": ("name", "名称"),
    "tl.js.col_count": ("count", "次数"),
    "tl.js.col_time": ("time in range", "区间内时间"),
    "tl.js.col_longest": ("longest", "最长"),
    "tl.js.searching": ("searching…", "正在搜索…"),
    "tl.js.none_after": ("{n} matches, none after this one", "{n} 个匹配，此后没有"),
    "tl.js.none_before": ("{n} matches, none before this one", "{n} 个匹配，此前没有"),
    "tl.js.no_match": ("no slice matches", "没有匹配的切片"),
    "tl.js.matches": ("{n} matches", "{n} 个匹配"),
    "tl.js.clock_error": ("clock offsets unavailable: {error}", "时钟偏移不可用：{error}"),
    "tl.js.grp.host": ("host", "Host"),
    "tl.js.grp.device": ("device", "Device"),
    "tl.js.grp.communication": ("communication", "通信"),
    "tl.js.grp.overlap": ("overlap", "重叠分析"),
    "tl.js.grp.other": ("other", "其他"),
    "tl.js.grp.counters": ("counters", "计数器"),
    "tl.js.counter": ("counter", "计数器"),
    "tl.js.counters_shown": ("{shown} of {total} shown", "显示 {total} 条中的 {shown} 条"),
    "tl.js.counters_more": (
        "▸ {n} more counter tracks ({total} in all): show them",
        "▸ 另有 {n} 条计数器轨道（共 {total} 条）：点击显示",
    ),
    "tl.js.counters_fewer": ("▾ hide the {n} other counter tracks", "▾ 隐藏其余 {n} 条计数器轨道"),
    "tl.js.counters_error": ("Could not load the counter tracks: {error}", "无法加载计数器轨道：{error}"),
    "tl.js.flows_zoom": ("zoom in to named slices for the flow arrows", "放大到显示切片名称时才绘制连线箭头"),
    "tl.js.arrows": ("{n} arrows", "{n} 条连线"),
    "tl.js.arrows_more": (" ({n} more: zoom in)", "（另有 {n} 条：请放大）"),
    "tl.js.flows_error": ("Could not load the flow arrows: {error}", "无法加载连线箭头：{error}"),
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


def joined_notes(notes: list[str]) -> str:
    """Sentences joined by the language's semicolon."""
    return said(messages.message("sep.semicolon")).join(notes)


def joined_list(items: Sequence[str]) -> str:
    """Items joined by the language's comma."""
    return said(messages.message("sep.comma")).join(items)


def said_notes(row: Mapping[str, Any], notes: str = "notes", note: str = "note") -> str | None:
    """An analysis' notes (a list of messages) in the request's language, joined; its English
    ``note`` when the row has no messages (results stored by an older version)."""
    msgs = row.get(notes)
    if isinstance(msgs, (list, tuple)) and msgs:
        return joined_notes([said(m) for m in msgs])
    text = row.get(note)
    return text if isinstance(text, str) and text else None


def cause_name(key: str) -> str:
    """A straggler cause in a word or two (a cause the catalog does not know: its key, as data)."""
    name = f"cause_name.{key}"
    return said(messages.message(name)) if name in messages.MESSAGES else str(key)


def said_error(exc: BaseException) -> str:
    """An analyzer error in the request's language when it carries a message (``AnalyzerError.said``)."""
    msg = getattr(exc, "message", None)
    return said(msg) if isinstance(msg, dict) else str(exc)


def grid_locale() -> dict[str, str]:
    """AG Grid's own texts in the request's language (its ``localeText``: filter menus, pagination,
    "no rows"); keys are AG Grid's, from its locale files."""
    return {key.removeprefix("grid."): t(key) for key in LABELS if key.startswith("grid.")}


def plotly_locale() -> dict[str, Any]:
    """A chart's ``config`` entries that give Plotly's own texts (mode bar, hints) in the request's
    language: none in English (Plotly's own), else the locale with its dictionary (``config.locales``:
    no locale script to load)."""
    if lang.current() == "en":
        return {}
    name = lang.HTML_LANG[lang.current()]
    words = {LABELS[k][0]: t(k) for k in LABELS if k.startswith("plotly.")}
    return {"locale": name, "locales": {name: {"dictionary": words}}}


def said(msg: messages.Message) -> str:
    """An analyzer's message (a finding's title or detail: ``analyzer.messages``) in the request's
    language; its names and numbers are filled in as text."""
    return messages.render(msg, lang.current())


def said_term(kind: str, code: Any, default: str | None = None) -> str:
    """An analysis' code for a short term (a status, a kind, a column: ``term.KIND.CODE`` of the
    analyzer's messages) in the request's language; a code the catalog does not know: ``default``,
    else the code as it is (data)."""
    key = f"term.{kind}.{code}"
    return said(messages.message(key)) if key in messages.MESSAGES else str(code) if default is None else default


def said_english(text: Any, family: str) -> Any:
    """A text the analyzer writes in English from its table (``messages.english``: a pairing note,
    a compared group's name, a reader's note on what a collection lacks) in the request's language;
    any other text (a name) as it is."""
    return messages.translate(text, lang.current(), family)


def said_problems(text: Any) -> Any:
    """What a reader found wrong with a file (``source_files.error``, English from the analyzer's
    table, several joined by "; ") in the request's language; a text no template wrote as it is."""
    return messages.translate_problems(text, lang.current())


def said_or_text(v: Any) -> str:
    """A message in the request's language; anything else (a name) as text."""
    return said(v) if messages.is_message(v) else str(v)


def said_sentence(msgs: Sequence[messages.Message]) -> str:
    """Messages (a comparison's findings) as one sentence in the request's language."""
    return messages.sentence(msgs, lang.current())


def cause_label(key: str | None, missing: str = "cause.not_explained") -> str:
    """A straggler cause (``analyses.blame`` CAUSES) in the request's language; ``missing`` when none."""
    return said(messages.message(f"cause.{key}" if key else missing))


def page_title(page: str) -> Callable[..., str]:
    """A page's title in the browser's tab ("rankscope · 内存"), for ``dash.register_page(title=...)``
    (Dash calls it for each request)."""

    def title(**_: Any) -> str:
        return f"rankscope · {t(f'nav.{page}')}"

    return title
