"""Jinja2 templates, CSS and JS of the HTML report (installed as advisor.report.templates)."""
