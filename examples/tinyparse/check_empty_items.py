"""Exit 0 when parse_list rejects an empty item such as "[1,,2]" (regression of issue #7)."""

import sys

from tinyparse import parse_list

try:
    parse_list("[1,,2]")
except ValueError:
    sys.exit(0)
print("accepted [1,,2]")
sys.exit(1)
