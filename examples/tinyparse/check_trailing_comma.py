"""Exit 0 when parse_list accepts a trailing comma (issue #12)."""

import sys

from tinyparse import parse_list

sys.exit(0 if parse_list("[1, 2, 3,]") == [1, 2, 3] else 1)
