"""`python -m studio.cli ...`: the same as the `studio` console script (tests and benches start it this way)."""

from studio.cli import main

main()
