"""``python -m advisor.capture [OPTIONS] SCRIPT [ARGS]`` = ``advisor profile ...``.

What torchrun workers and the child under ``nsys profile`` run.
"""

import sys

from advisor.cli import main

if __name__ == "__main__":
    sys.exit(main(["profile", *sys.argv[1:]]))
