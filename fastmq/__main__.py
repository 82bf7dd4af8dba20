"""`python -m fastmq ...` runs the `fastmq` command."""
import sys

from fastmq.cli import main

sys.exit(main())
