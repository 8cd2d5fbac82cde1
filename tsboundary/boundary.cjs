#!/usr/bin/env node
// The TypeScript boundary worker (docs/ARCHITECTURE.md, "TypeScript boundary").
//
// Runs inside the sandbox against a materialization of one snapshot and prints one JSON
// object on stdout: the definitions, consumers and implementations of one symbol across
// every discovered tsconfig project and an inferred project of the files none covers, with
// completeness signals (the routes themselves: routes.cjs). Every file the compiler touches goes through
// a confined host: reads inside the materialization (or the pinned TypeScript's own lib
// directory) are served; anything else is refused and makes the result incomplete.
"use strict";

const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const ts = require("typescript");
const positions = require("./positions.cjs");
const { followRoutes } = require("./routes.cjs");

const ADAPTER = "typescript-boundary/2";
const SOURCE_EXT = /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/;
const CONFIG_NAME = /^(tsconfig(\..+)?\.json|jsconfig\.json)$/;
const SKIP_DIRS = new Set(["node_modules", ".git"]);
const SEARCHED_NAMED = 50;

function parseArgs(argv) {
  const args = { file: null, extras: [], maxFiles: 10000, maxBytes: 64 << 20, maxResults: 1000 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`missing value for ${key}`);
    if (key === "--root") args.root = value;
    else if (key === "--symbol") args.symbol = value;
    else if (key === "--file") args.file = value;
    else if (key === "--extra") args.extras.push(value);
    else if (key === "--max-files") args.maxFiles = Number(value);
    else if (key === "--max-bytes") args.maxBytes = Number(value);
    else if (key === "--max-results") args.maxResults = Number(value);
    else throw new Error(`unknown argument ${key}`);
  }
  if (!args.root || !args.symbol) throw new Error("--root and --symbol are required");
  return args;
}

const sha256 = (data) => crypto.createHash("sha256").update(data).digest("hex");
const canonical = (value) => JSON.stringify(value);

class Confinement {
  constructor(root) {
    this.root = fs.realpathSync(root);
    // The pinned TypeScript package: its lib directory is the one readable place outside.
    this.libDir = fs.realpathSync(path.dirname(ts.getDefaultLibFilePath({})));
    this.ancestors = new Set();
    for (const start of [this.root, path.dirname(this.libDir)]) {
      for (let dir = path.dirname(start); ; dir = path.dirname(dir)) {
        this.ancestors.add(dir);
        if (dir === path.dirname(dir)) break;
      }
    }
    this.outside = new Set();
    this.texts = new Map();
  }

  rel(p) {
    return path.relative(this.root, p).split(path.sep).join("/");
  }

  inside(p) {
    const abs = path.resolve(this.root, p);
    return abs === this.root || abs.startsWith(this.root + path.sep);
  }

  // The compiler's own walk above the root (node_modules, @types, package.json scopes)
  // never finds repository content: answered "absent" without counting as a read.
  compilerWalk(abs) {
    if (this.ancestors.has(abs)) return true;
    for (const dir of this.ancestors) {
      const prefix = dir === "/" ? "/" : dir + path.sep;
      if (!abs.startsWith(prefix)) continue;
      const rest = abs.slice(prefix.length).split(path.sep);
      if (rest[0] === "node_modules" || (rest.length === 1 && rest[0] === "package.json")) {
        return true;
      }
    }
    return false;
  }

  allowed(p) {
    const abs = path.resolve(this.root, p);
    if (this.inside(abs)) {
      // A link inside the tree must resolve inside it too (materialization refuses escaping
      // links; this is the second check).
      try {
        const real = fs.realpathSync(abs);
        if (real === this.root || real.startsWith(this.root + path.sep)) return true;
      } catch {
        return true; // absent: the caller will see that
      }
    } else if (abs === this.libDir || abs.startsWith(this.libDir + path.sep)) {
      return true;
    } else if (this.compilerWalk(abs)) {
      return false;
    }
    this.outside.add(abs);
    return false;
  }

  fileExists(p) {
    if (!this.allowed(p)) return false;
    try {
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  }

  directoryExists(p) {
    if (!this.allowed(p)) return false;
    try {
      return fs.statSync(p).isDirectory();
    } catch {
      return false;
    }
  }

  readFile(p) {
    if (!this.allowed(p)) return undefined;
    const abs = path.resolve(this.root, p);
    if (this.texts.has(abs)) return this.texts.get(abs).text;
    let raw;
    try {
      raw = fs.readFileSync(abs);
    } catch {
      return undefined;
    }
    const bom = raw.length >= 3 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? 3 : 0;
    const text = raw.subarray(bom).toString("utf8");
    const exact = Buffer.from(text, "utf8").equals(raw.subarray(bom));
    this.texts.set(abs, { raw, bom, text, exact });
    return text;
  }

  getDirectories(p) {
    if (!this.allowed(p)) return [];
    try {
      return fs
        .readdirSync(p, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch {
      return [];
    }
  }

  entries(p) {
    if (!this.allowed(p)) return { files: [], directories: [] };
    const files = [];
    const directories = [];
    try {
      for (const e of fs.readdirSync(p, { withFileTypes: true })) {
        if (e.isFile()) files.push(e.name);
        else if (e.isDirectory()) directories.push(e.name);
      }
    } catch {
      // absent or unreadable: nothing listed
    }
    return { files: files.sort(), directories: directories.sort() };
  }

  realpath(p) {
    if (!this.allowed(p)) return p;
    try {
      return fs.realpathSync(p);
    } catch {
      return p;
    }
  }

  // Byte offsets of a UTF-16 range of a file read through readFile, and the span's SHA-256.
  span(abs, start, end) {
    const entry = this.texts.get(abs);
    if (!entry || !entry.exact) return null;
    const from = entry.bom + Buffer.byteLength(entry.text.slice(0, start), "utf8");
    const to = from + Buffer.byteLength(entry.text.slice(start, end), "utf8");
    return { start: from, end: to, sha256: sha256(entry.raw.subarray(from, to)) };
  }
}

function discover(conf, limits) {
  const configs = [];
  const sources = [];
  let files = 0;
  let bytes = 0;
  const pending = [conf.root];
  while (pending.length) {
    const dir = pending.pop();
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIP_DIRS.has(entry.name)) pending.push(full);
        continue;
      }
      if (!entry.isFile()) continue;
      files += 1;
      bytes += fs.statSync(full).size;
      if (files > limits.maxFiles || bytes > limits.maxBytes) {
        return { overBudget: `input exceeds ${limits.maxFiles} files or ${limits.maxBytes} bytes` };
      }
      if (CONFIG_NAME.test(entry.name)) configs.push(full);
      else if (SOURCE_EXT.test(entry.name)) sources.push(full);
    }
  }
  // Extra files (outside the claim's domain, or under node_modules, where a new occurrence
  // of a boundary name appeared) are sources too: the inferred project reads them.
  for (const extra of limits.extras) {
    const full = path.resolve(conf.root, extra);
    if (conf.inside(full) && SOURCE_EXT.test(full) && fs.lstatSync(full, { throwIfNoEntry: false })
      ?.isFile() && !sources.includes(full)) {
      sources.push(full);
    }
  }
  configs.sort();
  sources.sort();
  return { configs, sources };
}

function makeHosts(conf, options) {
  const compilerHost = ts.createCompilerHost(options, true);
  const confined = {
    fileExists: (p) => conf.fileExists(p),
    directoryExists: (p) => conf.directoryExists(p),
    readFile: (p) => conf.readFile(p),
    getDirectories: (p) => conf.getDirectories(p),
    realpath: (p) => conf.realpath(p),
    getCurrentDirectory: () => conf.root,
    useCaseSensitiveFileNames: () => true,
  };
  Object.assign(compilerHost, confined, {
    getSourceFile(fileName, languageVersion) {
      const text = conf.readFile(fileName);
      return text === undefined ? undefined : ts.createSourceFile(fileName, text, languageVersion);
    },
    writeFile() {},
    trace() {},
  });
  const parseHost = {
    useCaseSensitiveFileNames: true,
    fileExists: confined.fileExists,
    readFile: confined.readFile,
    // The compiler's own matcher over a confined listing: an `include` reaching outside
    // the materialization lists nothing there and counts as an outside read.
    readDirectory(root, extensions, excludes, includes, depth) {
      return ts.matchFiles(
        root, extensions, excludes, includes, true, conf.root, depth,
        (dir) => conf.entries(dir), (p) => conf.realpath(p),
      );
    },
  };
  return { compilerHost, parseHost, moduleHost: confined };
}

const INFERRED_OPTIONS = {
  allowJs: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  jsx: ts.JsxEmit.Preserve,
};

// Every tsconfig/jsconfig is a project; with none, the sources form one inferred project.
function configuredProjects(conf, found, report) {
  const projects = [];
  for (const configPath of found.configs) {
    const rel = conf.rel(configPath);
    const { parseHost } = makeHosts(conf, {});
    const read = ts.readConfigFile(configPath, (p) => conf.readFile(p));
    if (read.error) {
      // Still read the sources beside it (an inferred project), so what can be found is
      // found; the configuration error keeps the result incomplete.
      report.configErrors.push(`${rel}: ${flatten(read.error)}`);
      const dir = path.dirname(configPath) + path.sep;
      const fileNames = found.sources.filter((f) => f.startsWith(dir));
      projects.push({ config: rel, fileNames, options: INFERRED_OPTIONS });
      continue;
    }
    const parsed = ts.parseJsonConfigFileContent(
      read.config, parseHost, path.dirname(configPath), undefined, configPath,
    );
    // 18003: no inputs matched; an empty project is valid, not an error.
    const errors = parsed.errors.filter((d) => d.code !== 18003);
    for (const d of errors) report.configErrors.push(`${rel}: ${flatten(d)}`);
    projects.push({ config: rel, fileNames: parsed.fileNames, options: parsed.options });
  }
  return projects;
}

const flatten = (d) => ts.flattenDiagnosticMessageText(d.messageText, "\n").slice(0, 300);

function moduleSpecifiers(sf) {
  const found = [];
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier &&
        ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) &&
               ts.isExternalModuleReference(node.moduleReference) &&
               ts.isStringLiteral(node.moduleReference.expression)) {
      found.push(node.moduleReference.expression.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) &&
               ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    } else if (ts.isCallExpression(node) && typeof positions.moduleLoad(node) === "string") {
      found.push(positions.moduleLoad(node));
    } else if (ts.isModuleDeclaration(node) && ts.isStringLiteral(node.name)) {
      return; // an ambient module declares a name; it imports nothing
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function isInternalSpecifier(spec, pathPatterns) {
  if (spec.startsWith(".") || spec.startsWith("/")) return true;
  for (const pattern of pathPatterns) {
    const star = pattern.indexOf("*");
    if (star < 0 ? spec === pattern
        : spec.startsWith(pattern.slice(0, star)) && spec.endsWith(pattern.slice(star + 1))) {
      return true;
    }
  }
  return false;
}

const packageName = (spec) =>
  spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];

// The import graph of one program: file -> resolved internal files and unresolved
// packages; `resolved` maps (file, specifier) to the file it names. A specifier matching
// any project's `paths` is internal in every project (a loose file has no `paths`).
function resolveImports(conf, ctx, pathPatterns, report) {
  const cache = ts.createModuleResolutionCache(conf.root, (s) => s, ctx.options);
  for (const sf of ctx.files) {
    const rel = conf.rel(sf.fileName);
    const edges = [];
    const thirdParty = [];
    for (const spec of moduleSpecifiers(sf)) {
      const resolved = ts.resolveModuleName(
        spec, sf.fileName, ctx.options, ctx.hosts.moduleHost, cache,
      ).resolvedModule;
      const target = resolved && conf.inside(resolved.resolvedFileName)
        ? conf.rel(resolved.resolvedFileName) : null;
      report.resolutions.push([ctx.config, rel, spec, target]);
      if (target) {
        edges.push(target);
        ctx.resolved.set(`${rel}\0${spec}`, target);
      } else if (isInternalSpecifier(spec, pathPatterns)) {
        report.missingModules.add(`${rel}: ${spec}`);
      } else if (!resolved) {
        thirdParty.push(packageName(spec));
      }
    }
    ctx.graph.set(rel, { edges, thirdParty });
  }
}

function configuredTypeErrors(program, report) {
  // 2688: "Cannot find type definition file for ..." (a configured `types` entry or a
  // `/// <reference types>` directive); 6053: a referenced file not found.
  const diagnostics = program.getGlobalDiagnostics().concat(program.getOptionsDiagnostics());
  for (const d of diagnostics) {
    const text = flatten(d).split("\n")[0];
    if (d.code === 2688) report.missingTypes.add(`missing configured type: ${text}`);
    else if (d.code === 6053) report.missingTypes.add(`missing referenced file: ${text}`);
  }
}

// A file the parser could not read whole: what it holds is not known.
function syntaxErrors(conf, ctx, report) {
  for (const sf of ctx.files) {
    const rel = conf.rel(sf.fileName);
    if (report.syntax.has(rel)) continue;
    const first = (sf.parseDiagnostics || [])[0];
    if (!first) continue;
    const line = sf.getLineAndCharacterOfPosition(first.start).line + 1;
    report.syntax.set(rel, `${rel}: does not parse (line ${line}: ${flatten(first)})`);
  }
}

function buildProgram(conf, project) {
  const hosts = makeHosts(conf, project.options);
  const program = ts.createProgram({
    rootNames: project.fileNames, options: { ...project.options, noEmit: true },
    host: hosts.compilerHost,
  });
  const files = program.getSourceFiles().filter((sf) => conf.inside(sf.fileName));
  return { config: project.config, options: project.options, hosts, program,
    checker: program.getTypeChecker(), files, graph: new Map(), resolved: new Map() };
}

// The configured projects, then one inferred project (the language service's answer for
// loose files) holding every source no configured project covers: a `.ts` outside every
// `include`, a `.js` where `allowJs` is off, an extra file outside the domain.
function buildContexts(conf, found, report) {
  const contexts = configuredProjects(conf, found, report).map((p) => buildProgram(conf, p));
  const covered = new Set();
  contexts.forEach((ctx) => ctx.files.forEach((sf) => covered.add(sf.fileName)));
  const loose = found.sources.filter((f) => !covered.has(f));
  if (loose.length) {
    const inferred = buildProgram(conf, { config: null, fileNames: loose, options: INFERRED_OPTIONS });
    contexts.push(inferred);
    inferred.files.forEach((sf) => covered.add(sf.fileName));
  }
  for (const f of found.sources) {
    if (!covered.has(f)) report.unanalyzed.push(`${conf.rel(f)}: not analyzed by any project`);
  }
  const patterns = contexts.flatMap((ctx) => Object.keys(ctx.options.paths || {}));
  for (const ctx of contexts) {
    resolveImports(conf, ctx, patterns, report);
    configuredTypeErrors(ctx.program, report);
    syntaxErrors(conf, ctx, report);
  }
  return contexts;
}

function closure(contexts, starts) {
  const seen = new Set(starts);
  const pending = [...starts];
  const thirdParty = new Set();
  while (pending.length) {
    const file = pending.pop();
    for (const ctx of contexts) {
      const node = ctx.graph.get(file);
      if (!node) continue;
      node.thirdParty.forEach((p) => thirdParty.add(p));
      for (const next of node.edges) {
        if (!seen.has(next)) {
          seen.add(next);
          pending.push(next);
        }
      }
    }
  }
  return { files: seen, thirdParty };
}

const bySite = (a, b) =>
  a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : a.node.getStart() - b.node.getStart();

// The sites as byte spans, in three lists; a call's span is the whole call expression, so
// a changed argument list changes it.
function spans(conf, routes, args, unknowns) {
  const lists = { definitions: [], consumers: [], implementations: [] };
  let truncated = false;
  let listed = 0;
  for (const site of [...routes.sites.values()].sort(bySite)) {
    const span = conf.span(site.sf.fileName, site.spanNode.getStart(), site.spanNode.getEnd());
    if (!span) {
      unknowns.push(`${site.rel}: not valid UTF-8; byte spans unknown`);
      continue;
    }
    const item = { path: site.rel, ...span, identity: sha256(site.root), role: site.role };
    if (site.role === "definition") {
      lists.definitions.push(item);
    } else if (listed >= args.maxResults) {
      truncated = true;
    } else {
      listed += 1;
      const list = site.role === "implementation" || site.role === "override"
        ? lists.implementations : lists.consumers;
      list.push(item);
    }
  }
  return { ...lists, truncated };
}

function collectUnknowns(conf, report, routes, args, found) {
  const unknowns = [];
  if (args.file !== null && !found.sources.includes(path.join(conf.root, args.file))) {
    unknowns.push(`requested file ${args.file} is not in any discovered project`);
  }
  if (![...routes.targets.values()].some((t) => t.hops === 0)) {
    unknowns.push(`no declaration of ${args.symbol} was found`);
  }
  for (const e of report.configErrors) unknowns.push(`invalid configuration ${e}`);
  for (const m of [...report.missingModules].sort()) unknowns.push(`missing internal module ${m}`);
  for (const t of [...report.missingTypes].sort()) unknowns.push(t);
  for (const [, text] of [...report.syntax].sort()) unknowns.push(text);
  unknowns.push(...report.unanalyzed);
  unknowns.push(...[...routes.unknowns].sort());
  return unknowns;
}

function runBoundary(args) {
  const conf = new Confinement(args.root);
  const report = {
    configErrors: [], missingModules: new Set(), missingTypes: new Set(), syntax: new Map(),
    resolutions: [], unanalyzed: [],
  };
  const base = { adapter: ADAPTER, typescript_version: ts.version, symbol: args.symbol, file: args.file };
  const found = discover(conf, args);
  if (found.overBudget) {
    return { ...base, status: "unavailable", applicable: true, discovery_complete: false,
      complete: false, truncated: true, unknowns: [found.overBudget] };
  }
  if (found.configs.length === 0 && found.sources.length === 0) {
    return { ...base, status: "inapplicable", applicable: false, discovery_complete: true,
      complete: true, truncated: false, projects: [], definitions: [], consumers: [],
      implementations: [], unknowns: [], unavailable_packages: [], outside_reads: [],
      identifiers: [args.symbol], searched_count: 0, searched: [],
      domain_fingerprint: sha256(canonical([])), resolution_fingerprint: sha256(canonical([])) };
  }
  const contexts = buildContexts(conf, found, report);
  const routes = followRoutes(conf, contexts, args);
  const unknowns = collectUnknowns(conf, report, routes, args, found);
  const lists = spans(conf, routes, args, unknowns);
  const reach = closure(contexts, [...new Set(lists.definitions.map((d) => d.path))]);
  for (const pkg of [...reach.thirdParty].sort()) {
    unknowns.push(`unresolved dependency ${pkg} in the declaration's import closure`);
  }
  const outside = [...conf.outside].sort();
  for (const p of outside) unknowns.push(`read outside the materialization refused: ${p}`);
  const allThirdParty = new Set();
  contexts.forEach((c) => c.graph.forEach((n) => n.thirdParty.forEach((p) => allThirdParty.add(p))));
  const inputs = new Set();
  contexts.forEach((c) => c.files.forEach((sf) => inputs.add(sf.fileName)));
  const domain = [...inputs].sort().map((f) => [conf.rel(f), sha256(conf.texts.get(f).raw)]);
  for (const c of found.configs) {
    if (conf.texts.has(c)) domain.push([conf.rel(c), sha256(conf.texts.get(c).raw)]);
  }
  return {
    ...base,
    status: "ok",
    applicable: true,
    discovery_complete: report.configErrors.length === 0 && outside.length === 0,
    complete: unknowns.length === 0 && !lists.truncated,
    truncated: lists.truncated,
    projects: contexts.map((c) => ({ config: c.config, files: c.files.length })),
    definitions: lists.definitions,
    consumers: lists.consumers,
    implementations: lists.implementations,
    unknowns,
    unavailable_packages: [...allThirdParty].sort(),
    outside_reads: outside,
    identifiers: [...routes.identifiers].sort(),
    searched_count: inputs.size,
    searched: [...inputs].map((f) => conf.rel(f)).sort().slice(0, SEARCHED_NAMED),
    domain_fingerprint: sha256(canonical(domain.sort())),
    resolution_fingerprint: sha256(canonical(report.resolutions.sort())),
  };
}

function main() {
  let result;
  try {
    result = runBoundary(parseArgs(process.argv.slice(2)));
  } catch (error) {
    result = { adapter: ADAPTER, status: "error", complete: false, truncated: false,
      unknowns: [`worker error: ${String(error && error.stack || error).slice(0, 2000)}`] };
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main();
