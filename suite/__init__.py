"""tierbench's harness: ops, tiers and providers, timing, checking, the runner, records and reports."""
