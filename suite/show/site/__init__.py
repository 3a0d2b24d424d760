"""The comparison site: `tierbench report` turns run records and asv history into static pages.

runs.py finds runs and what each device shows; model.py shapes records (matrices, chart series, hover
tables); charts.py draws SVG; history.py reads asv's results and finds steps; pages/ writes HTML, a
module per page type; build.py writes the site; browser.py drives headless Chromium (tests, screenshots);
command.py is the CLI.
"""
