"""The route corpus: one small project per way a consumer can reach ``chargeCard`` (or a
method), each with the edit that adds a consumer through that route, and decoy edits that
must not count (docs/ARCHITECTURE.md, "TypeScript boundary").

A project is the base below with a route's ``before`` files laid over it (``None`` deletes
a base file); the edit is laid over that. ``consumer`` is the text a boundary site of the
edited snapshot must span (with its path and role): the consumer the edit added.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASE", "DECOYS", "ROUTES", "Route", "overlay", "write_project"]

Files = dict[str, str | None]

ESM = (
    '{"compilerOptions": {"strict": true, "target": "es2022", "module": "esnext",'
    ' "moduleResolution": "bundler"}, "include": ["src"]}\n'
)
COMMONJS = (
    '{"compilerOptions": {"strict": true, "target": "es2022", "module": "commonjs",'
    ' "moduleResolution": "node10", "esModuleInterop": true}, "include": ["src"]}\n'
)
PAYMENTS = (
    "export function chargeCard(amountCents: number): boolean {\n  return amountCents > 0;\n}\n"
)
CHECKOUT = (
    'import { chargeCard } from "./payments";\n\n'
    "export function checkout(totalCents: number): string {\n"
    '  return chargeCard(totalCents) ? "paid" : "declined";\n'
    "}\n"
)
BASE: Files = {
    "tsconfig.json": ESM,
    "src/payments.ts": PAYMENTS,
    "src/checkout.ts": CHECKOUT,
}


@dataclass(frozen=True)
class Route:
    """A project (base + ``before``), its edit, and the consumer the edit adds."""

    before: Files
    edit: Files
    #: (path, role, text the site spans) of the added consumer.
    consumer: tuple[str, str, str]
    symbol: str = "chargeCard"
    file: str = "src/payments.ts"


def _refund(imports: str, body: str = "charge(-amountCents)") -> str:
    return (
        f"{imports}\n\n"
        "export function refund(amountCents: number): boolean {\n"
        f"  return {body};\n"
        "}\n"
    )


GATEWAY_CLASS = (
    "export class Gateway {\n"
    "  charge(amountCents: number): boolean {\n"
    "    return amountCents > 0;\n"
    "  }\n"
    "}\n"
)
GATEWAY_INTERFACE = "export interface Gateway {\n  charge(amountCents: number): boolean;\n}\n"
JS_PAYMENTS = (
    "function chargeCard(amountCents) {\n  return amountCents > 0;\n}\n\n"
    "module.exports = { chargeCard };\n"
)

ROUTES: dict[str, Route] = {
    # The five misses first.
    "renamed_import_second_call": Route(
        before={
            "src/alias.ts": 'import { chargeCard as cc } from "./payments";\n\n'
            "export const first = cc(100);\n"
        },
        edit={
            "src/alias.ts": 'import { chargeCard as cc } from "./payments";\n\n'
            "export const first = cc(100);\nexport const second = cc(-100);\n"
        },
        consumer=("src/alias.ts", "call", "cc(-100)"),
    ),
    "barrel_reexport_new_file": Route(
        before={"src/index.ts": 'export { chargeCard as pay } from "./payments";\n'},
        edit={"src/refund.ts": _refund('import { pay } from "./index";', "pay(-amountCents)")},
        consumer=("src/refund.ts", "call", "pay(-amountCents)"),
    ),
    "barrel_consumer_new_call": Route(
        before={
            "src/index.ts": 'export { chargeCard as pay } from "./payments";\n',
            "src/shop.ts": 'import { pay } from "./index";\n\n'
            "export const buy = (n: number): boolean => pay(n);\n",
        },
        edit={
            "src/shop.ts": 'import { pay } from "./index";\n\n'
            "export const buy = (n: number): boolean => pay(n);\n"
            "export const refund = (n: number): boolean => pay(-n);\n"
        },
        consumer=("src/shop.ts", "call", "pay(-n)"),
    ),
    "outside_include": Route(
        before={},
        edit={
            "scripts/batch.ts": 'import { chargeCard } from "../src/payments";\n\n'
            "chargeCard(-500);\n"
        },
        consumer=("scripts/batch.ts", "call", "chargeCard(-500)"),
    ),
    "javascript_file": Route(
        before={},
        edit={
            "src/legacy.js": 'import { chargeCard } from "./payments";\n\n'
            "export const refund = (n) => chargeCard(-n);\n"
        },
        consumer=("src/legacy.js", "call", "chargeCard(-n)"),
    ),
    # Re-exports.
    "export_star": Route(
        before={"src/index.ts": 'export * from "./payments";\n'},
        edit={"src/refund.ts": _refund('import { chargeCard as charge } from "./index";')},
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    "export_default_binding": Route(
        before={
            "src/default.ts": 'import { chargeCard } from "./payments";\n\n'
            "export default chargeCard;\n"
        },
        edit={"src/refund.ts": _refund('import charge from "./default";')},
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    "export_equals": Route(
        before={
            "tsconfig.json": COMMONJS,
            "src/legacy.ts": 'import { chargeCard } from "./payments";\n\nexport = chargeCard;\n',
        },
        edit={"src/refund.ts": _refund('import charge = require("./legacy");')},
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    # Imports.
    "namespace_import": Route(
        before={},
        edit={
            "src/refund.ts": _refund(
                'import * as billing from "./payments";', "billing.chargeCard(-amountCents)"
            )
        },
        consumer=("src/refund.ts", "call", "billing.chargeCard(-amountCents)"),
    ),
    "default_import": Route(
        before={
            "src/payments.ts": "export default " + PAYMENTS.removeprefix("export "),
            "src/checkout.ts": CHECKOUT.replace("{ chargeCard }", "chargeCard"),
        },
        edit={"src/refund.ts": _refund('import charge from "./payments";')},
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    "import_require": Route(
        before={"tsconfig.json": COMMONJS},
        edit={
            "src/refund.ts": _refund(
                'import billing = require("./payments");', "billing.chargeCard(-amountCents)"
            )
        },
        consumer=("src/refund.ts", "call", "billing.chargeCard(-amountCents)"),
    ),
    "commonjs_require": Route(
        before={
            "tsconfig.json": None,
            "jsconfig.json": '{"compilerOptions": {"module": "commonjs", "target": "es2022"},'
            ' "include": ["src"]}\n',
            "src/payments.ts": None,
            "src/checkout.ts": None,
            "src/payments.js": JS_PAYMENTS,
            "src/checkout.js": 'const { chargeCard } = require("./payments");\n\n'
            'exports.checkout = (n) => (chargeCard(n) ? "paid" : "declined");\n',
        },
        edit={
            "src/refund.js": 'const { chargeCard: charge } = require("./payments");\n\n'
            "exports.refund = (n) => charge(-n);\n"
        },
        consumer=("src/refund.js", "call", "charge(-n)"),
        file="src/payments.js",
    ),
    "dynamic_import": Route(
        before={},
        edit={
            "src/refund.ts": "export async function refund(amountCents: number)"
            ": Promise<boolean> {\n"
            '  const { chargeCard: charge } = await import("./payments");\n'
            "  return charge(-amountCents);\n"
            "}\n"
        },
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    # Value aliases.
    "value_alias_const": Route(
        before={
            "src/alias.ts": 'import { chargeCard } from "./payments";\n\n'
            "export const charge = chargeCard;\n"
        },
        edit={"src/refund.ts": _refund('import { charge } from "./alias";')},
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    "object_shorthand": Route(
        before={
            "src/api.ts": 'import { chargeCard } from "./payments";\n\n'
            "export const api = { chargeCard };\n"
        },
        edit={
            "src/refund.ts": _refund('import { api } from "./api";', "api.chargeCard(-amountCents)")
        },
        consumer=("src/refund.ts", "call", "api.chargeCard(-amountCents)"),
    ),
    "destructuring": Route(
        before={},
        edit={
            "src/refund.ts": _refund(
                'import * as billing from "./payments";\n\nconst { chargeCard: charge } = billing;'
            )
        },
        consumer=("src/refund.ts", "call", "charge(-amountCents)"),
    ),
    # Every implementation.
    "class_method_override": Route(
        before={"src/gateway.ts": GATEWAY_CLASS},
        edit={
            "src/retry.ts": 'import { Gateway } from "./gateway";\n\n'
            "export class RetryGateway extends Gateway {\n"
            "  override charge(amountCents: number): boolean {\n"
            "    return amountCents !== 0;\n"
            "  }\n"
            "}\n"
        },
        consumer=("src/retry.ts", "override", "charge"),
        symbol="charge",
        file="src/gateway.ts",
    ),
    "interface_implementation": Route(
        before={
            "src/gateway.ts": GATEWAY_INTERFACE,
            "src/pay.ts": 'import type { Gateway } from "./gateway";\n\n'
            "export const pay = (g: Gateway, n: number): boolean => g.charge(n);\n",
        },
        edit={
            "src/stripe.ts": 'import type { Gateway } from "./gateway";\n\n'
            "export class StripeGateway implements Gateway {\n"
            "  charge(amountCents: number): boolean {\n"
            "    return amountCents > 0;\n"
            "  }\n"
            "}\n"
        },
        consumer=("src/stripe.ts", "implementation", "charge"),
        symbol="charge",
        file="src/gateway.ts",
    ),
}

#: Edits of the base that add no consumer of ``chargeCard``: a claim stays current.
DECOYS: dict[str, Files] = {
    "comment": {
        "src/notes.ts": "// chargeCard(-1) would refund: never call it with a negative amount.\n"
        'export const NOTE = "see chargeCard";\n'
    },
    "same_named_local": {
        "src/audit.ts": "export function audit(): boolean {\n"
        "  const chargeCard = (n: number): boolean => n < 0;\n"
        "  return chargeCard(-1);\n"
        "}\n"
    },
    "similar_name": {
        "src/like.ts": "export function chargeCardLike(n: number): boolean {\n"
        "  return n > 0;\n}\n\n"
        "export const probe = chargeCardLike(-1);\n"
    },
}


def overlay(base: Files, *layers: Files) -> dict[str, str]:
    """``base`` with each layer laid over it in turn (``None`` deletes a path)."""
    files: dict[str, str | None] = dict(base)
    for layer in layers:
        files.update(layer)
    return {path: text for path, text in files.items() if text is not None}


def write_project(root: Path, files: dict[str, str]) -> None:
    """Make ``root`` hold exactly ``files`` (paths relative to it)."""
    for old in sorted(root.rglob("*"), reverse=True) if root.exists() else []:
        if old.is_file() and old.relative_to(root).as_posix() not in files:
            old.unlink()
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
