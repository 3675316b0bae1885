"""`python -m inspector ...` runs what the `cp-inspect` console script runs."""

from inspector.entry import main

main()
