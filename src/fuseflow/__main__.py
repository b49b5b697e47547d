"""`python -m fuseflow ...` runs the `fuseflow` command."""
import sys

from .cli import main

sys.exit(main())
