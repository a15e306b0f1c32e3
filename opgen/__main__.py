"""`python -m opgen` runs the command line."""

from opgen.cli import run

run()
