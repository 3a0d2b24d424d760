"""The comparison site: `tierbench report` turns run records and asv history into static pages.

model.py shapes records (runs per device, merges, matrices, chart series); charts.py draws SVG;
history.py reads asv results and finds steps; pages.py writes HTML; build.py writes the site;
browser.py drives headless Chromium (tests, screenshots); command.py is the CLI.
"""
