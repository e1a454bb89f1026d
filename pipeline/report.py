"""What the jobs show a person: rich tables on the terminal and the traffic plot (a PNG drawn with
matplotlib's Agg canvas, no display and no pyplot state)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mqstore.engine.repair.verify import Finding, VerifyReport
from mqstore.pipeline.stats_job import MINUTE_MS, MinuteStats, utc_minute

PLOTTED_TOPICS = 10  # the busiest ones; the rest are summed as "others"
MAX_TICKS = 10
TICK_STEPS_MIN = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)  # a tick every so many minutes
TAGS_SHOWN = 3


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(c) for c in row))
    console = Console()
    if not console.is_terminal:  # piped: wide enough for findings, not the 80 columns of a guess
        console = Console(width=200)
    console.print(table)


def print_findings(findings: Sequence[Finding]) -> None:
    if findings:
        print_table("findings", ("kind", "location", "detail"), [(f.kind, f.location, f.detail) for f in findings])


def verdict(report: VerifyReport) -> str:
    """The line ``mqstore verify`` ends with."""
    checked = (f"{report.records} records, {report.cq_entries} consume-queue entries, "
               f"{report.index_entries} index entries checked")
    return f"{checked}: " + ("ok" if report.ok else f"{len(report.findings)} findings")


def print_stats(rows: Sequence[MinuteStats], limit: int) -> None:
    shown = rows[-limit:] if limit else []
    title = f"traffic per topic and minute (UTC): {len(rows)} rows" + \
        (f", the last {len(shown)} shown" if len(shown) < len(rows) else "")
    print_table(title, ("topic", "minute", "messages", "bytes", "keys", "tags"),
                [(r.topic, r.minute.strftime("%Y-%m-%d %H:%M"), f"{r.messages:,}", f"{r.bytes:,}", f"{r.keys:,}",
                  _top_tags(r.tags)) for r in shown])


def minute_ticks(first_ms: int, last_ms: int) -> list[int]:
    """Tick times (ms) from ``first_ms`` to ``last_ms``, both minute starts: on whole minutes (the data's
    buckets), never finer than one, at most ``MAX_TICKS``, so each tick's label reads differently."""
    span_min = (last_ms - first_ms) // MINUTE_MS
    step_min = next((s for s in TICK_STEPS_MIN if span_min // s + 1 <= MAX_TICKS),
                    1440 * -(-span_min // (1440 * (MAX_TICKS - 1))))  # past ten days: whole days
    step_ms = step_min * MINUTE_MS
    start = -(-first_ms // step_ms) * step_ms  # the first multiple of the step at or after first_ms
    return list(range(start, last_ms + 1, step_ms))


def _top_tags(tags: dict[str, int]) -> str:
    top = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))
    text = " ".join(f"{tag or '(no tag)'}:{n}" for tag, n in top[:TAGS_SHOWN])
    return text + (f" +{len(top) - TAGS_SHOWN} more" if len(top) > TAGS_SHOWN else "")


def plot_messages(rows: Sequence[MinuteStats], path: Path, title: str) -> Path:
    """Messages per minute, one line per topic, as a PNG at ``path``."""
    draw_messages(rows, title).savefig(path, format="png", dpi=100)
    return path


def draw_messages(rows: Sequence[MinuteStats], title: str) -> Any:
    """The figure ``plot_messages`` saves (a matplotlib ``Figure``)."""
    from matplotlib.dates import DateFormatter
    from matplotlib.figure import Figure

    per_topic: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        totals[r.topic] += r.messages
    busiest = set(sorted(totals, key=lambda t: (-totals[t], t))[:PLOTTED_TOPICS])
    for r in rows:
        per_topic[r.topic if r.topic in busiest else "others"][r.minute_ms] += r.messages
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    minutes = sorted({r.minute_ms for r in rows})
    times: list[Any] = [utc_minute(m) for m in minutes]  # matplotlib's date converter takes datetimes
    for topic in sorted(per_topic, key=lambda t: (t == "others", -totals.get(t, 0), t)):
        counts = per_topic[topic]
        ax.plot(times, [counts.get(m, 0) for m in minutes], marker="o" if len(minutes) <= 60 else None, label=topic)
    ax.set_title(title)
    ax.set_xlabel("minute (UTC)")
    ax.set_ylabel("messages")
    ax.grid(True, alpha=0.3)
    if minutes:  # a minute either side, so a single minute is not lost on an axis of years
        margin: list[Any] = [utc_minute(minutes[0] - MINUTE_MS), utc_minute(minutes[-1] + MINUTE_MS)]
        ax.set_xlim(*margin)
        ticks: Any = [utc_minute(m) for m in minute_ticks(minutes[0] - MINUTE_MS, minutes[-1] + MINUTE_MS)]
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d %H:%M", tz=UTC))  # type: ignore[no-untyped-call]
    peak = max((n for counts in per_topic.values() for n in counts.values()), default=0)
    ax.set_ylim(0, peak * 1.1 + 1)
    if per_topic:
        ax.legend(loc="upper left", fontsize="small")
    fig.autofmt_xdate()
    return fig

