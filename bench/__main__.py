"""`python -m bench`: the scale benchmark (see bench/README.md)."""

from bench.scale import main

raise SystemExit(main())
