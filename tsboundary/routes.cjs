// Every route to a symbol (docs/ARCHITECTURE.md, "TypeScript boundary").
//
// Starting from the requested declarations, follows alias symbols (renamed imports,
// re-exports, default and namespace imports, `export =`, `import x = require()`, CommonJS
// `require`, dynamic `import()`) and value aliases (`const f = x`, object properties,
// destructuring, class fields) to a fixed point, at most MAX_HOPS alias hops from the
// declaration, and lists implementations and overrides of a class or interface member.
// Every identifier is resolved by the type checker; what it cannot follow (a value that
// escapes, a chain past the bound, a name that resolves to nothing, a computed import)
// is an unknown naming the place.
"use strict";

const ts = require("typescript");
const positions = require("./positions.cjs");

const MAX_HOPS = 8;
const MAX_ROUNDS = 32;
const IMPORT_CALL = /\b(import|require)\s*\(/;

const overBound = (name, symbol) => `${name} reaches ${symbol} through more than ${MAX_HOPS} ` +
  "alias hops; it and what uses it are not followed";

class Routes {
  constructor(conf, args) {
    this.conf = conf;
    this.args = args;
    this.targets = new Map(); // identity key -> { root, hops, kind, role }
    this.names = new Set([args.symbol]); // what files are scanned for
    this.identifiers = new Set([args.symbol]); // the alias names: the identifier query set
    this.exporters = new Set(); // files that export a target (or a value holding one)
    this.sites = new Map(); // `${rel}#${start}` -> site
    this.unknowns = new Set();
    this.changed = false;
  }

  // --- identities -------------------------------------------------------------------

  key(symbol) {
    const decls = (symbol && symbol.declarations || [])
      .filter((d) => this.conf.inside(d.getSourceFile().fileName))
      .map((d) => `${this.conf.rel(d.getSourceFile().fileName)}#${(d.name || d).getStart()}`)
      .sort();
    return decls.length ? decls.join("|") : null;
  }

  addTarget(symbol, from, kind, role = null) {
    const key = this.key(symbol);
    if (!key || this.targets.has(key)) return false;
    this.targets.set(key, { root: from.root, hops: from.hops, kind, role });
    this.addName(symbol.escapedName && String(symbol.escapedName), kind !== "container");
    this.changed = true;
    return true;
  }

  // A name the boundary found (an alias, an exported name, a holder): files mentioning it
  // are scanned, and unless it only names a holder it joins the identifier query set.
  addName(name, alias) {
    if (!name || name === "default" || name.startsWith("__")) return;
    if (alias) this.identifiers.add(name);
    if (this.names.has(name)) return;
    this.names.add(name);
    this.changed = true;
  }

  // Follow `symbol` through alias symbols, one hop each, to a target. Returns
  // {target, hops} | {over: true} | {unresolved: true} | null (another symbol).
  resolve(checker, symbol) {
    let current = symbol;
    for (let hops = 0; current; hops += 1) {
      const key = this.key(current);
      const target = key && this.targets.get(key);
      if (target) {
        return target.hops + hops > MAX_HOPS ? { over: true } : { target, hops: target.hops + hops };
      }
      if (!(current.flags & ts.SymbolFlags.Alias)) return null;
      if (hops >= MAX_HOPS) {
        const final = this.key(checker.getAliasedSymbol(symbol));
        return final && this.targets.has(final) ? { over: true } : null;
      }
      const next = checker.getImmediateAliasedSymbol(current);
      if (!next || next === current || !(next.declarations || []).length &&
          !(next.flags & ts.SymbolFlags.Alias)) {
        return { unresolved: true };
      }
      current = next;
    }
    return null;
  }

  // The module (source file) a symbol names after every alias, when it exports a target.
  containerModule(checker, symbol) {
    const final = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    const decl = final && final.valueDeclaration;
    return decl && ts.isSourceFile(decl) && this.exporters.has(this.conf.rel(decl.fileName));
  }

  // --- sites and unknowns -----------------------------------------------------------

  addSite(sf, node, target, role, spanNode = node) {
    const rel = this.conf.rel(sf.fileName);
    const at = `${rel}#${node.getStart()}`;
    if (this.sites.has(at)) return;
    this.sites.set(at, { rel, sf, node, spanNode, root: target.root, role });
  }

  unknown(sf, node, text) {
    const line = sf.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    this.unknowns.add(`${this.conf.rel(sf.fileName)}:${line}: ${text}`);
  }

  // --- one program ----------------------------------------------------------------

  // Which declarations are the requested symbol: named NAME, in --file if given.
  findRoots(ctx) {
    for (const sf of ctx.files) {
      if (!sf.text.includes(this.args.symbol) && !sf.text.includes("\\u")) continue;
      if (this.args.file !== null && this.conf.rel(sf.fileName) !== this.args.file) continue;
      const visit = (node) => {
        if (ts.isIdentifier(node) && node.text === this.args.symbol &&
            positions.isDeclarationName(node)) {
          const symbol = ctx.checker.getSymbolAtLocation(node);
          const key = this.key(symbol);
          if (key && !this.targets.has(key)) {
            const kind = positions.isMember(node.parent) ? "member" : "value";
            this.targets.set(key, { root: key, hops: 0, kind, role: null });
            this.changed = true;
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(sf);
    }
  }

  mentions(sf) {
    if (sf.text.includes("\\u")) return true; // an escaped identifier can spell any name
    for (const name of this.names) if (sf.text.includes(name)) return true;
    return false;
  }

  reachesExporter(ctx, sf) {
    const node = ctx.graph.get(this.conf.rel(sf.fileName));
    return Boolean(node && node.edges.some((e) => this.exporters.has(e)));
  }

  // Modules whose exports (after every alias) include a target.
  findExporters(ctx) {
    let grew = true;
    while (grew) {
      grew = false;
      for (const sf of ctx.files) {
        const rel = this.conf.rel(sf.fileName);
        if (this.exporters.has(rel) || !sf.symbol) continue;
        if (!this.mentions(sf) && !this.reachesExporter(ctx, sf)) continue;
        const exports = ctx.checker.getExportsOfModule(sf.symbol);
        const equals = sf.symbol.exports && sf.symbol.exports.get("export=");
        for (const symbol of equals ? [...exports, equals] : exports) {
          const found = this.resolve(ctx.checker, symbol);
          if (found && found.target) {
            this.exporters.add(rel);
            this.changed = grew = true;
            break;
          }
        }
      }
    }
  }

  scanProgram(ctx) {
    this.findExporters(ctx);
    for (const sf of ctx.files) {
      const full = this.reachesExporter(ctx, sf) || this.exporters.has(this.conf.rel(sf.fileName));
      if (!full && !this.mentions(sf)) continue;
      const visit = (node) => {
        if (ts.isIdentifier(node) && (full || this.names.has(node.text) ||
            sf.text.includes("\\u"))) {
          this.visitIdentifier(ctx, sf, node);
        } else if (full && ts.isCallExpression(node)) {
          this.visitModuleLoad(ctx, sf, node);
        } else if (positions.hasMembers(node)) {
          this.visitMembers(ctx, sf, node);
        }
        ts.forEachChild(node, visit);
      };
      visit(sf);
    }
  }

  visitIdentifier(ctx, sf, id) {
    const { checker } = ctx;
    const binding = positions.bindingProperty(id);
    if (binding) return this.visitBinding(ctx, sf, id, binding);
    const symbol = positions.symbolAt(checker, id);
    if (!symbol) {
      if (this.names.has(id.text) && positions.mustResolve(id)) {
        this.unknown(sf, id, `${id.text} does not resolve to a declaration`);
      }
      return;
    }
    const found = this.resolve(checker, symbol);
    if (!found) {
      const key = this.key(symbol);
      const held = key && this.targets.get(key);
      if (this.containerModule(checker, symbol) || (held && held.kind === "container")) {
        this.checkUse(ctx, sf, id, { root: held ? held.root : null, hops: 0 }, "container");
      }
      return;
    }
    if (found.unresolved) {
      if (this.names.has(id.text)) this.unknown(sf, id, `${id.text} does not resolve to a declaration`);
      return;
    }
    if (found.over) {
      this.unknown(sf, id, overBound(id.text, this.args.symbol));
      return;
    }
    const target = { ...found.target, hops: found.hops };
    this.addName(id.text, found.target.kind !== "container");
    if (positions.declares(id) && found.target.kind === "container") return;
    if (found.target.kind === "container") {
      this.checkUse(ctx, sf, id, target, "container");
    } else if (positions.declares(id)) {
      if (found.hops === 0 && !found.target.role && this.key(symbol) === found.target.root) {
        this.addSite(sf, id, target, "definition");
      } else if (found.target.role) {
        this.addSite(sf, id, target, found.target.role);
      }
    } else {
      this.checkUse(ctx, sf, id, target, "value");
    }
  }

  // `const { chargeCard: c } = m`, `const { chargeCard } = require(...)`: the property of the
  // pattern's type; when it is a target, the local binding becomes an alias of it.
  visitBinding(ctx, sf, id, element) {
    const { checker } = ctx;
    const name = element.propertyName || element.name;
    if (name !== id) return; // the local's own name: an alias declaration, not a site
    const type = checker.getTypeAtLocation(element.parent);
    const property = type && checker.getPropertyOfType(type, id.text);
    const local = ts.isIdentifier(element.name) ? checker.getSymbolAtLocation(element.name) : null;
    const found = property ? this.resolve(checker, property)
      : local ? this.resolve(checker, local) : null;
    if (!found) {
      if (!property && this.names.has(id.text)) {
        this.unknown(sf, id, `${id.text} does not resolve to a declaration`);
      }
      return;
    }
    if (found.over || found.unresolved) {
      this.unknown(sf, id, found.over ? overBound(id.text, this.args.symbol)
        : `${id.text} does not resolve to a declaration`);
      return;
    }
    const target = { ...found.target, hops: found.hops };
    if (target.kind !== "container") {
      this.addName(id.text, true);
      this.addSite(sf, id, target, positions.loadsModule(element) ? "import" : "reference");
    }
    // A nested pattern's own elements are visited in turn.
    if (local) this.addTarget(local, { root: target.root, hops: target.hops + 1 }, target.kind);
  }

  // A reference to a target (value) or to something holding one (container): its role,
  // the alias it creates, or the escape that leaves the boundary open.
  checkUse(ctx, sf, id, target, kind) {
    const use = positions.classify(ctx.checker, id, kind);
    if (use.role && kind === "value") this.addSite(sf, id, target, use.role, use.span || id);
    const next = { root: target.root, hops: target.hops + 1 };
    for (const symbol of use.alias || []) this.addTarget(symbol, next, use.aliasKind || kind);
    for (const symbol of use.containers || []) this.addTarget(symbol, next, "container");
    if (use.escape) {
      const what = kind === "container" ? `${id.text} (holding ${this.args.symbol})` : id.text;
      this.unknown(sf, id, `${what} escapes (${use.escape}); consumers past it are not followed`);
    }
  }

  // `import("./m")` and `require("./m")`: a literal naming a module that exports a target
  // must land somewhere the analysis follows; a computed specifier is an unknown.
  visitModuleLoad(ctx, sf, call) {
    const spec = positions.moduleLoad(call);
    if (typeof spec !== "string") return; // no load, or a computed one (reported once, below)
    const target = ctx.resolved.get(`${this.conf.rel(sf.fileName)}\0${spec}`);
    if (!target || !this.exporters.has(target)) return;
    const use = positions.classifyLoad(ctx.checker, call);
    const from = { root: null, hops: 0 };
    for (const symbol of use.alias || []) this.addTarget(symbol, from, "container");
    if (use.escape) {
      this.unknown(sf, call, `the module ${target} (exporting ${this.args.symbol}) escapes ` +
        `(${use.escape}); consumers past it are not followed`);
    }
  }

  // Implementations and overrides: a member named like a member target, in a class or
  // interface whose base or implemented type has that target, or in an object literal
  // whose contextual type has it.
  visitMembers(ctx, sf, owner) {
    const { checker } = ctx;
    for (const member of owner.members || owner.properties || []) {
      const name = member.name;
      if (!name || !ts.isIdentifier(name) && !ts.isStringLiteral(name) ||
          !this.names.has(name.text)) {
        continue;
      }
      const own = member.symbol;
      if (!own || this.targets.has(this.key(own))) continue;
      for (const [base, role] of positions.baseTypes(checker, owner)) {
        const property = checker.getPropertyOfType(base, name.text);
        const found = property && this.resolve(checker, property);
        if (!found || !found.target || found.target.kind !== "member") continue;
        const target = { ...found.target, hops: found.hops };
        if (this.addTarget(own, target, "member", role)) this.addSite(sf, name, target, role);
        break;
      }
    }
  }
}

// Run every program to a fixed point: targets only grow, each within MAX_HOPS.
function followRoutes(conf, contexts, args) {
  const routes = new Routes(conf, args);
  for (const ctx of contexts) routes.findRoots(ctx);
  for (const ctx of contexts) {
    for (const sf of ctx.files) {
      if (IMPORT_CALL.test(sf.text)) positions.computedLoads(sf, (node) =>
        routes.unknown(sf, node, "a module is loaded by a computed specifier; not followed"));
    }
  }
  let rounds = 0;
  do {
    routes.changed = false;
    for (const ctx of contexts) routes.scanProgram(ctx);
    rounds += 1;
  } while (routes.changed && rounds < MAX_ROUNDS);
  if (routes.changed) routes.unknowns.add(`alias following did not settle in ${MAX_ROUNDS} rounds`);
  return routes;
}

module.exports = { MAX_HOPS, followRoutes };
