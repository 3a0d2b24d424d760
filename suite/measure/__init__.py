"""A run, in order: the plan, the session, the worker process, the runner (passes, checks, profiles,
traffic) and the library API."""
