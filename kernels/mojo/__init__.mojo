# tierbench's Mojo kernels: one source for CPUs and GPUs, compiled by MAX (suite/providers/portable.py).
