"""What records: the records file, run.json, the run folder and its lock, the one way to read runs, and
verdicts judged again."""
