"""Thin shim: `python cli.py ...` is the same as `specsim ...`."""

from specsim.cli import main

if __name__ == "__main__":
    main()
