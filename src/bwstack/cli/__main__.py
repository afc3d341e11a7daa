"""``python -m bwstack.cli``: the same command line as the ``bwstack`` script."""

from bwstack.cli import main

main()
