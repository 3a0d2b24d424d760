"""What shows: views and panels, ranking, the terminal table, `summary`, `export`, the model view and the site."""
