"""`python -m isthmus.agent`: run a pilot."""

import sys

from isthmus.agent.pilot import main

sys.exit(main())
