"""`episodes report`: one self-contained HTML page of what the analyst views hold."""

from jobs.report.build import analyst_connection, build_report, render_html, write_report

__all__ = ["analyst_connection", "build_report", "render_html", "write_report"]
