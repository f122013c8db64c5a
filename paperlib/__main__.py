import sys

from paperlib.compendium.cli import main

sys.exit(main())
