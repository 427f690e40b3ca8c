"""Charts of one scope or of all: tokens sent against full history, the saving over time,
reply latency p50/p95, per-agent tokens, calls and cost, and the routing paths.

Time is bucketed by the hour, day, week, month or year, whichever gives at most about 60
points; a bucket that is not over yet (this hour, today) is drawn as partial.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import UTC, datetime

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scopehub.hub.console import stats
from scopehub.hub.console.charts import Series, bar_chart, line_chart
from scopehub.hub.console.tally import Tally
from scopehub.hub.console.web import Console

__all__ = ["routes"]

BUCKETS = (3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400)  # an hour, a day, a week, a month, a year
LABELS = 7  # x labels per chart, about


def _pct(value: float) -> str:
    return f"{value:.0f}%"


def _ms(value: float) -> str:
    return f"{value:,.1f} ms" if 0 < value < 10 else f"{value:,.0f} ms"


def routes(console: Console) -> list[Route]:
    store = console.store
    drawn: OrderedDict[tuple[object, ...], dict[str, object]] = OrderedDict()  # the newest few charts drawn
    lock = threading.Lock()

    def time_charts(tally: Tally, scope: str | None) -> dict[str, object]:
        """The time charts and the per-agent sums, drawn again only when a call was added (or the last bucket closed)."""
        span = stats.time_span(tally, scope)
        size = next((s for s in BUCKETS if (span[1] - span[0]) / s <= 60), BUCKETS[-1]) if span else 0
        now_bucket = int(console.config.clock()) // size if size else 0
        key = (scope, tally.count, tally.max_id, size, now_bucket, console.settings.timezone)
        with lock:
            if key in drawn:
                drawn.move_to_end(key)
                return drawn[key]
        charts = {**draw_time_charts(tally, scope), "agents": stats.agent_totals(tally, scope)}
        with lock:
            drawn[key] = charts
            while len(drawn) > 32:
                drawn.popitem(last=False)
        return charts

    def draw_time_charts(tally: Tally, scope: str | None) -> dict[str, object]:
        span = stats.time_span(tally, scope)
        if span is None:
            empty = line_chart([])
            return {"tokens_chart": empty, "saving_chart": empty, "latency_chart": empty, "sent": 0, "full": 0, "bucket": ""}
        size = next((s for s in BUCKETS if (span[1] - span[0]) / s <= 60), BUCKETS[-1])
        rows = stats.buckets(tally, scope, size)
        partial = console.config.clock() < rows[-1].start + size
        fmt = "%m-%d %H:00" if size == 3600 else "%Y-%m-%d"
        step = max(1, -(-len(rows) // LABELS))
        labelled = rows[::step] if rows[-1] in rows[::step] else [*rows[::step][:-1], rows[-1]]  # the last bucket always labelled
        labels = {
            r.start: datetime.fromtimestamp(r.start, tz=UTC).astimezone(console.zone).strftime(fmt) for r in labelled
        }

        def chart(series: list[Series], **options: object) -> Markup:
            return line_chart(series, x_labels=labels, partial_last=partial, **options)  # type: ignore[arg-type]

        return {
            "tokens_chart": chart(
                [
                    Series("tokens sent", "#4e79a7", [(r.start, r.sent) for r in rows]),
                    Series("full history would be", "#e15759", [(r.start, r.full) for r in rows]),
                ]
            ),
            "saving_chart": chart(
                [Series("saving", "#59a14f", [(r.start, r.saving) for r in rows if r.saving is not None])],
                y_title="saving %", y_max=100, y_format=_pct, css_class="line-chart saving-chart",
            ),
            "latency_chart": chart(
                [
                    Series("p50", "#4e79a7", [(r.start, p) for r in rows if (p := r.latency(0.5)) is not None]),
                    Series("p95", "#f28e2b", [(r.start, p) for r in rows if (p := r.latency(0.95)) is not None]),
                ],
                y_title="reply latency", y_format=_ms, css_class="line-chart latency-chart",
            ),
            "sent": sum(r.sent for r in rows),
            "full": sum(r.full for r in rows),
            "bucket": {3600: "hour", 86400: "day", 7 * 86400: "week", 30 * 86400: "30 days"}.get(size, "year"),
            "partial": partial,
        }

    def charts_page(request: Request) -> Response:
        scope = console.scope_of(request) if "scope" in request.path_params else None
        tally = console.tallies.current()
        drawn = time_charts(tally, scope)
        agents = drawn["agents"]
        return console.page(
            request,
            "charts.html",
            scope=scope,
            routes_chart=bar_chart(stats.route_counts(store, scope)),
            agent_tokens=bar_chart([(a.agent, a.tokens_sent) for a in agents], css_class="bar-chart agent-tokens"),
            agent_calls=bar_chart([(a.agent, a.calls) for a in agents], css_class="bar-chart agent-calls", colour="#59a14f"),
            agent_cost=bar_chart(
                [(a.agent, a.cost) for a in agents if a.cost], css_class="bar-chart agent-cost", colour="#b6992d",
                value_format=lambda v: f"${v:,.4f}",
            ),
            **drawn,
        )

    return [Route("/charts", charts_page), Route("/scopes/{scope:scope}/charts", charts_page)]
