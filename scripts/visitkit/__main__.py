"""`python -m visitkit`: the kit's one command, as the installed `visitkit` runs it."""
import sys

from visitkit.cli import main

sys.exit(main())
