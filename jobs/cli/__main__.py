"""`python -m jobs.cli`: the same as the `episodes` command."""

from jobs.cli import main

main()
