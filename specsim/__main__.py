"""`python -m specsim` runs the command line."""

from specsim.cli import main

main()
