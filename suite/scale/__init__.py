"""What spreads over devices: `devices=`, a sweep and its shards, balancing by cost, and two runs' spread."""
