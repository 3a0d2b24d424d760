"""The site's pages, a module per page type, from the views of site/model.py and site/history.py.

index (the fastest correct provider per tier), family (a family's page on one device), models (a page per
model), run_report (one run's report), run_list (every run), trends (asv's history); what they share:
templates (rendering and escaping), family_charts (a family's charts, drawn on its page and in a run's
report) and meta (where records came from).
"""
