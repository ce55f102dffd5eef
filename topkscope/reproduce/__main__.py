"""`python -m topkscope.reproduce [--profile quick|full] ...`: the same as `topkscope figures`."""

import sys

from topkscope.cli import main as cli_main


def main(argv=None) -> int:
    return cli_main(["figures", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
