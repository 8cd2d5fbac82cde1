#!/usr/bin/env node
// The TypeScript language service's own answer, as a lower bound for the boundary worker.
//
// Test code, run by tests/typescript/test_routes.py on the test's own corpus (never on a
// repository): for each request {root, symbol, file} read as JSON on stdin, one language
// service over every TS/JS file under root (the root's tsconfig.json/jsconfig.json options,
// with allowJs), and at each declaration of `symbol` in `file`: findReferences and
// getImplementationAtPosition. Prints one JSON array per request: [{path, start, end}] in
// bytes. It shares no code with tsboundary/boundary.cjs.
"use strict";

const fs = require("fs");
const path = require("path");

const ts = require(process.argv[2]);
const SOURCE = /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/;

function sources(root) {
  const found = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory() && entry.name !== "node_modules") walk(full);
      else if (entry.isFile() && SOURCE.test(entry.name)) found.push(full);
    }
  };
  walk(root);
  return found.sort();
}

function options(root) {
  for (const name of ["tsconfig.json", "jsconfig.json"]) {
    const configPath = path.join(root, name);
    if (!fs.existsSync(configPath)) continue;
    const read = ts.readConfigFile(configPath, ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, root);
    return { ...parsed.options, allowJs: true };
  }
  return { allowJs: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext };
}

function service(root) {
  const files = sources(root);
  const host = {
    getScriptFileNames: () => files,
    getScriptVersion: () => "1",
    getScriptSnapshot: (f) =>
      fs.existsSync(f) ? ts.ScriptSnapshot.fromString(fs.readFileSync(f, "utf8")) : undefined,
    getCurrentDirectory: () => root,
    getCompilationSettings: () => options(root),
    getDefaultLibFileName: (o) => ts.getDefaultLibFilePath(o),
    fileExists: ts.sys.fileExists,
    readFile: ts.sys.readFile,
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  };
  return ts.createLanguageService(host, ts.createDocumentRegistry());
}

function declarations(program, fileName, symbol) {
  const sf = program.getSourceFile(fileName);
  const found = [];
  const visit = (node) => {
    if (ts.isIdentifier(node) && node.text === symbol && node.parent.name === node &&
        !ts.isPropertyAccessExpression(node.parent)) {
      found.push(node.getStart(sf));
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function answer(request) {
  const root = fs.realpathSync(request.root);
  const ls = service(root);
  const fileName = path.join(root, request.file);
  const seen = new Map();
  const add = (entry) => {
    const text = fs.readFileSync(entry.fileName, "utf8");
    const start = Buffer.byteLength(text.slice(0, entry.textSpan.start), "utf8");
    const end = start + Buffer.byteLength(
      text.slice(entry.textSpan.start, entry.textSpan.start + entry.textSpan.length), "utf8");
    const rel = path.relative(root, entry.fileName).split(path.sep).join("/");
    seen.set(`${rel}#${start}`, { path: rel, start, end });
  };
  for (const position of declarations(ls.getProgram(), fileName, request.symbol)) {
    for (const group of ls.findReferences(fileName, position) || []) {
      group.references.forEach(add);
    }
    (ls.getImplementationAtPosition(fileName, position) || []).forEach(add);
  }
  return [...seen.values()].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : a.start - b.start);
}

const requests = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(requests.map(answer)) + "\n");
