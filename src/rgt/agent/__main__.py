"""``python -m rgt.agent run|status|cancel JOB_DIR`` (the zipapp has its own ``__main__``)."""

import sys

from rgt.agent.cli import main

if __name__ == "__main__":
    sys.exit(main())
