import sys

from memgraph.cli import main

sys.exit(main())
