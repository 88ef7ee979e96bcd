"""`python -m hibug_core.cli`: the same as the `hibug` command."""
import sys

from hibug_core.cli import main

sys.exit(main())
