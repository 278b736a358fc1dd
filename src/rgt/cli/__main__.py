"""``python -m rgt.cli`` — the same as the ``rgt`` console script."""

from rgt.cli import main

main()
