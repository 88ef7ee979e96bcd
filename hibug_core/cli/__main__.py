"""`python -m hibug_core.cli`: the same as the `hibug` command."""
import sys

from hibug_core.cli import main

if __name__ == "__main__":  # a spawned worker process (hibug_core.beside) imports this module without running it
    sys.exit(main())
