import sys

from taskgraph.cli import main

sys.exit(main())
