// Where an identifier stands, syntactically: the role of a reference (import, export,
// call, reference), the alias it creates (`const f = x`, `{ x }`, `obj.k = x`, class
// fields), or the escape that takes the value where the analysis cannot follow it
// (docs/ARCHITECTURE.md, "TypeScript boundary"). Pure syntax plus the checker's own
// answers; routes.cjs decides what a position means for the boundary.
"use strict";

const ts = require("typescript");

const WRAPPERS = new Set([
  ts.SyntaxKind.ParenthesizedExpression, ts.SyntaxKind.AsExpression,
  ts.SyntaxKind.SatisfiesExpression, ts.SyntaxKind.NonNullExpression,
  ts.SyntaxKind.TypeAssertionExpression,
]);
const COMPARISONS = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsToken,
  ts.SyntaxKind.InstanceOfKeyword, ts.SyntaxKind.InKeyword,
]);
const INERT_PARENTS = new Set([
  ts.SyntaxKind.ExpressionStatement, ts.SyntaxKind.TypeOfExpression,
  ts.SyntaxKind.VoidExpression, ts.SyntaxKind.DeleteExpression,
  ts.SyntaxKind.PrefixUnaryExpression, ts.SyntaxKind.TemplateSpan,
  ts.SyntaxKind.ExpressionWithTypeArguments, ts.SyntaxKind.IfStatement,
  ts.SyntaxKind.WhileStatement, ts.SyntaxKind.DoStatement, ts.SyntaxKind.SwitchStatement,
  ts.SyntaxKind.CaseClause, ts.SyntaxKind.JsxOpeningElement, ts.SyntaxKind.JsxClosingElement,
  ts.SyntaxKind.JsxSelfClosingElement, ts.SyntaxKind.ElementAccessExpression,
  ts.SyntaxKind.ThrowStatement,
]);
const ESCAPES = new Map([
  [ts.SyntaxKind.CallExpression, "passed as an argument"],
  [ts.SyntaxKind.NewExpression, "passed as an argument"],
  [ts.SyntaxKind.ReturnStatement, "returned"],
  [ts.SyntaxKind.ArrowFunction, "returned"],
  [ts.SyntaxKind.ArrayLiteralExpression, "stored in an array"],
  [ts.SyntaxKind.SpreadElement, "spread"],
  [ts.SyntaxKind.SpreadAssignment, "spread"],
  [ts.SyntaxKind.ConditionalExpression, "chosen by a conditional expression"],
  [ts.SyntaxKind.BinaryExpression, "combined by an operator"],
  [ts.SyntaxKind.JsxExpression, "passed to JSX"],
  [ts.SyntaxKind.Parameter, "a parameter's default"],
  [ts.SyntaxKind.AwaitExpression, "awaited"],
  [ts.SyntaxKind.YieldExpression, "yielded"],
  [ts.SyntaxKind.ObjectLiteralExpression, "stored in an object"],
]);

function isDeclarationName(id) {
  const parent = id.parent;
  return Boolean(parent && parent.name === id && (ts.isFunctionDeclaration(parent) ||
    ts.isClassDeclaration(parent) || ts.isVariableDeclaration(parent) ||
    ts.isInterfaceDeclaration(parent) || ts.isTypeAliasDeclaration(parent) ||
    ts.isEnumDeclaration(parent) || ts.isMethodDeclaration(parent) ||
    ts.isMethodSignature(parent) || ts.isPropertyDeclaration(parent) ||
    ts.isPropertySignature(parent) || ts.isModuleDeclaration(parent) ||
    ts.isFunctionExpression(parent) || ts.isClassExpression(parent) ||
    ts.isGetAccessorDeclaration(parent) || ts.isSetAccessorDeclaration(parent)));
}

// A name that declares something (a declaration above, or an object literal's property):
// never a use of what it names.
const declares = (id) => {
  const parent = id.parent;
  return isDeclarationName(id) || parent.name === id && (ts.isPropertyAssignment(parent) ||
    ts.isJsxAttribute(parent) || ts.isParameter(parent) || ts.isEnumMember(parent) ||
    ts.isTypeParameterDeclaration(parent) || ts.isBindingElement(parent));
};

const isMember = (decl) => ts.isClassElement(decl) || ts.isTypeElement(decl) ||
  ts.isMethodDeclaration(decl);

const hasMembers = (node) => ts.isClassDeclaration(node) || ts.isClassExpression(node) ||
  ts.isInterfaceDeclaration(node) || ts.isObjectLiteralExpression(node);

function bindingProperty(id) {
  const element = id.parent;
  if (!element || !ts.isBindingElement(element) || !ts.isObjectBindingPattern(element.parent)) {
    return null;
  }
  return element.propertyName === id || element.name === id ? element : null;
}

function symbolAt(checker, id) {
  if (ts.isShorthandPropertyAssignment(id.parent) && id.parent.name === id) {
    return checker.getShorthandAssignmentValueSymbol(id.parent);
  }
  return checker.getSymbolAtLocation(id);
}

// Whether an identifier of a boundary name that resolves to nothing is an unknown: labels
// and other names that never resolve are not.
function mustResolve(id) {
  const parent = id.parent;
  return !(ts.isLabeledStatement(parent) || ts.isBreakOrContinueStatement(parent) ||
    ts.isMetaProperty(parent) || declares(id));
}

const outer = (node) => {
  let expr = node;
  while (expr.parent && WRAPPERS.has(expr.parent.kind)) expr = expr.parent;
  return expr;
};

const isCallee = (parent, expr) =>
  (ts.isCallExpression(parent) || ts.isNewExpression(parent) || ts.isDecorator(parent) ||
   ts.isTaggedTemplateExpression(parent) && parent.tag === expr) &&
  (parent.expression === expr || parent.tag === expr);

function isCommonJsExport(left) {
  if (!ts.isPropertyAccessExpression(left)) return false;
  const base = left.expression;
  if (ts.isIdentifier(base) && base.text === "exports") return true;
  if (ts.isIdentifier(base) && base.text === "module" && left.name.text === "exports") return true;
  return ts.isPropertyAccessExpression(base) && ts.isIdentifier(base.expression) &&
    base.expression.text === "module" && base.name.text === "exports";
}

const escape = (node) => ESCAPES.get(node.kind) || `in a ${ts.SyntaxKind[node.kind]}`;

// An object literal holding a target: where does the object go? Returns the symbols that
// then hold it (a variable or class field: a container) or an escape.
function objectFlow(checker, literal) {
  const expr = outer(literal);
  const parent = expr.parent;
  if (ts.isVariableDeclaration(parent) && parent.initializer === expr) {
    return ts.isIdentifier(parent.name) ? { holders: [checker.getSymbolAtLocation(parent.name)] }
      : {};
  }
  if (ts.isPropertyDeclaration(parent) && parent.initializer === expr) {
    return { holders: [parent.symbol] };
  }
  if (ts.isExportAssignment(parent)) return { holders: [parent.symbol] };
  if (ts.isBinaryExpression(parent) && parent.right === expr && isCommonJsExport(parent.left)) {
    return {};
  }
  if (ts.isPropertyAssignment(parent) && parent.initializer === expr) {
    return objectFlow(checker, parent.parent);
  }
  return { escape: escape(parent) };
}

// The property of an object literal that takes a target, and of its contextual type.
function propertyAlias(checker, assignment, kind) {
  const literal = assignment.parent;
  const symbols = [assignment.symbol];
  const contextual = checker.getContextualType(literal);
  const name = assignment.name && assignment.name.text;
  const declared = contextual && name !== undefined && checker.getPropertyOfType(contextual, name);
  if (declared && (declared.declarations || []).length) symbols.push(declared);
  const flow = objectFlow(checker, literal);
  const result = { role: "reference", alias: symbols, aliasKind: kind };
  if (flow.escape && !declared) result.escape = `${flow.escape}, inside an object`;
  if (flow.holders) result.containers = flow.holders.filter(Boolean);
  return result;
}

function assignmentUse(checker, parent, expr, kind) {
  if (parent.left === expr) return { role: "reference" };
  if (isCommonJsExport(parent.left)) return { role: "export" };
  const left = parent.left;
  const symbol = ts.isIdentifier(left) ? checker.getSymbolAtLocation(left)
    : ts.isPropertyAccessExpression(left) ? checker.getSymbolAtLocation(left.name) : null;
  if (symbol && (symbol.declarations || []).length) {
    return { role: "reference", alias: [symbol], aliasKind: kind };
  }
  return { role: "reference", escape: "assigned to something the checker cannot name" };
}

// The use an identifier (resolving to a target or a container of one) makes.
function classify(checker, id, kind) {
  const parent = id.parent;
  if (ts.isImportSpecifier(parent) || ts.isImportClause(parent) || ts.isNamespaceImport(parent) ||
      ts.isImportEqualsDeclaration(parent)) {
    return { role: "import" };
  }
  if (ts.isExportSpecifier(parent) || ts.isNamespaceExport(parent)) return { role: "export" };
  if (ts.isPartOfTypeNode(id) || ts.isTypeQueryNode(parent) || ts.isQualifiedName(parent)) {
    return { role: "reference" };
  }
  if (ts.isShorthandPropertyAssignment(parent) && parent.name === id) {
    return propertyAlias(checker, parent, kind);
  }
  let expr = id;
  while (ts.isPropertyAccessExpression(expr.parent) && expr.parent.name === expr) {
    expr = expr.parent;
  }
  expr = outer(expr);
  const up = expr.parent;
  if (ts.isExportAssignment(up)) return { role: "export" };
  if (isCallee(up, expr)) return { role: "call", span: up };
  if (ts.isPropertyAccessExpression(up) && up.expression === expr) {
    const method = up.name.text;
    if ((method === "call" || method === "apply") && isCallee(up.parent, up)) {
      return { role: "call", span: up.parent };
    }
    return method === "bind" && kind !== "container"
      ? { role: "reference", escape: "bound with .bind" } : { role: "reference" };
  }
  if (ts.isVariableDeclaration(up) && up.initializer === expr) {
    return ts.isIdentifier(up.name)
      ? { role: "reference", alias: [checker.getSymbolAtLocation(up.name)], aliasKind: kind }
      : { role: "reference" };
  }
  if (ts.isPropertyDeclaration(up) && up.initializer === expr) {
    return { role: "reference", alias: [up.symbol], aliasKind: kind };
  }
  if (ts.isPropertyAssignment(up) && up.initializer === expr) {
    return propertyAlias(checker, up, kind);
  }
  if (ts.isBinaryExpression(up) && ts.isAssignmentOperator(up.operatorToken.kind)) {
    return assignmentUse(checker, up, expr, kind);
  }
  if (ts.isBinaryExpression(up) && COMPARISONS.has(up.operatorToken.kind)) {
    return { role: "reference" };
  }
  if (ts.isConditionalExpression(up) && up.condition === expr) return { role: "reference" };
  if (INERT_PARENTS.has(up.kind) || ts.isForStatement(up) && up.condition === expr) {
    return { role: "reference" };
  }
  return { role: "reference", escape: escape(up) };
}

// `import("x")`/`require("x")`: the literal specifier, undefined for a computed one, null
// when the call loads no module.
function moduleLoad(call) {
  const callee = call.expression;
  const loads = callee.kind === ts.SyntaxKind.ImportKeyword ||
    ts.isIdentifier(callee) && callee.text === "require" && call.arguments.length === 1;
  if (!loads) return null;
  const arg = call.arguments[0];
  return arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg))
    ? arg.text : undefined;
}

function computedLoads(sf, report) {
  const visit = (node) => {
    if (ts.isCallExpression(node) && moduleLoad(node) === undefined) report(node);
    ts.forEachChild(node, visit);
  };
  visit(sf);
}

// Where a loaded module object goes: a variable or a `.then` parameter holds it (a
// container), a pattern or a property access takes from it, anything else escapes.
function classifyLoad(checker, call) {
  let expr = outer(call);
  while (ts.isAwaitExpression(expr.parent)) expr = outer(expr.parent);
  const up = expr.parent;
  if (ts.isVariableDeclaration(up) && up.initializer === expr) {
    return ts.isIdentifier(up.name) ? { alias: [checker.getSymbolAtLocation(up.name)] } : {};
  }
  if (ts.isPropertyAccessExpression(up) && up.expression === expr) {
    if (up.name.text !== "then" || !isCallee(up.parent, up)) return {};
    const callback = up.parent.arguments[0];
    if (callback && (ts.isArrowFunction(callback) || ts.isFunctionExpression(callback))) {
      const param = callback.parameters[0];
      if (!param || !ts.isIdentifier(param.name)) return {};
      return { alias: [checker.getSymbolAtLocation(param.name)] };
    }
    return { escape: "its promise is passed on" };
  }
  if (ts.isElementAccessExpression(up) || ts.isExpressionStatement(up)) return {};
  return { escape: escape(up) };
}

function loadsModule(element) {
  let decl = element.parent;
  while (decl && !ts.isVariableDeclaration(decl)) decl = decl.parent;
  let init = decl && decl.initializer;
  while (init && (WRAPPERS.has(init.kind) || ts.isAwaitExpression(init))) init = init.expression;
  return Boolean(init && ts.isCallExpression(init) && moduleLoad(init));
}

// The types an owner of members builds on, with the role a same-named member plays.
function baseTypes(checker, owner) {
  if (ts.isObjectLiteralExpression(owner)) {
    const contextual = checker.getContextualType(owner);
    return contextual ? [[contextual, "implementation"]] : [];
  }
  const found = [];
  for (const clause of owner.heritageClauses || []) {
    const role = clause.token === ts.SyntaxKind.ImplementsKeyword ? "implementation" : "override";
    for (const type of clause.types) found.push([checker.getTypeAtLocation(type), role]);
  }
  return found;
}

module.exports = {
  baseTypes, bindingProperty, classify, classifyLoad, computedLoads, declares, hasMembers,
  isDeclarationName, isMember, loadsModule, moduleLoad, mustResolve, symbolAt,
};
