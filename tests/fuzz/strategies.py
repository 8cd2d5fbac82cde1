"""Hypothesis strategies shared by the decoder fuzzers: JSON values and field mutations."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st
from sqlalchemy import func, inspect, literal, select, table, union_all

from probe_service.store import Store

#: Any JSON value, including lone surrogates, huge integers and deep nesting.
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)

#: Text a caller might send: JSON of a value, or arbitrary characters.
json_texts: st.SearchStrategy[str] = json_values.map(json.dumps) | st.text(max_size=60)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path inside ``doc`` (dict keys and list indexes)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        items: list[tuple[Any, Any]] = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc))
    else:
        return out
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> Any:
    """``valid`` with one field replaced, deleted, or a key added: near-valid inputs."""
    doc = copy.deepcopy(valid)
    paths = _paths(doc)
    path = draw(st.sampled_from(paths))
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    action = draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == "add" and isinstance(parent, dict):
        parent[draw(st.text(max_size=10))] = draw(json_values)
    else:
        parent[path[-1]] = draw(json_values)
    return doc


def row_counts(store: Store) -> dict[str, int]:
    """Rows in every table of ``store``: compared before and after a refused input.

    Every table the database lists, counted in one statement (reflecting each table's
    columns, as ``MetaData.reflect`` does, cost a third of a second per call).
    """
    with store.reading() as conn:
        names = sorted(inspect(conn).get_table_names())
        if not names:
            return {}
        counts = union_all(
            *(
                select(literal(i).label("k"), func.count().label("n")).select_from(table(name))
                for i, name in enumerate(names)
            )
        )
        return {names[k]: int(n) for k, n in conn.execute(counts)}


class Tally:
    """Inputs handed to a decoder; ``make security`` reports the total."""

    count = 0


def fed(value: Any) -> Any:
    """Count one fuzzed input and return it unchanged."""
    Tally.count += 1
    return value
