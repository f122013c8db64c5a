import sys

from paperlib.cli import main

sys.exit(main())
