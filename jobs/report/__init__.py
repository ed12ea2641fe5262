"""`episodes report`: one self-contained HTML page of what the analyst views hold.

The data is read only through the ``analyst`` views, as ``episodes_analyst`` scoped to one tenant
or as ``episodes_operator`` across tenants, so a report never shows more than an analyst could
query (:mod:`jobs.report.data`). pandas does the aggregation; chart geometry (scales, ticks, bars)
is computed in :mod:`jobs.report.charts` and drawn as inline SVG by ``reports/report.html.j2``;
:mod:`jobs.report.build` lays out the page and :mod:`jobs.report.render` writes it. The page loads
nothing: no scripts, fonts or images, and a Content-Security-Policy that forbids fetching any. The
numbers it shows are also embedded as JSON (``<script type="application/json" id="report-data">``)
for tests and other tools.
"""

from jobs.report.build import Report, build_report
from jobs.report.data import analyst_connection, load_frames, report_queries
from jobs.report.render import render_html, report_filename, write_report

__all__ = [
    "Report",
    "analyst_connection",
    "build_report",
    "load_frames",
    "render_html",
    "report_filename",
    "report_queries",
    "write_report",
]
