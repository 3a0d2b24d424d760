"""A plugin that ends the process while it is imported: the command must say so, naming it, not end quietly."""

import sys

sys.exit(0)
