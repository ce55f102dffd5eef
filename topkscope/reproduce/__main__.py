"""`python -m topkscope.reproduce [--profile quick|full] ...`: the same as `topkscope figures`."""

import argparse
import sys

from topkscope.commands import figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topkscope.reproduce", description=figures.HELP)
    figures.add_arguments(parser)
    return figures.main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
