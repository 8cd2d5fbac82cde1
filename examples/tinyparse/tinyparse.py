"""A tiny list parser: the example repository the demo probes."""


def parse_list(text: str) -> list[int]:
    """Parse "[1, 2, 3]" into [1, 2, 3]; a trailing comma is accepted."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError("expected brackets")
    items = [item.strip() for item in body[1:-1].split(",")]
    if items and items[-1] == "":
        items.pop()
    return [int(item) for item in items if item != ""]
