// Byte probe persistent launcher: loads the verified Sandbox Runtime 0.0.55 once and
// wraps commands for the Python runner, which spawns them itself (under its own
// identity prefix, limits, process-group control and bounded output).
// See docs/ARCHITECTURE.md, "Persistent launcher".
//
// Started as `node --require net-guard.cjs launcher.mjs`, so the network guard holds in
// this process exactly as in the CLI's. NDJSON over stdin/stdout, one request at a time:
//
//   {"op":"init","settings":{...}}          -> {"ok":true,"guard":"<ports>","version":"0.0.55"}
//   {"op":"wrap","command":"...","cwd":"...","home":"...","tmp":"...","settings":{...}}
//                                           -> {"ok":true,"argv":[...]}
//   {"op":"done"}                           -> {"ok":true}   (after the wrapped command ended)
//   any failure                             -> {"ok":false,"error":"..."}
//
// Every settings object is validated by the runtime's own schema; an invalid one is an
// error, never the runtime's permissive default. The network part of each run's settings
// must equal the one this helper was initialised with (helpers are keyed by it).

import { createRequire } from 'node:module';
import * as readline from 'node:readline';
import { SandboxManager, SandboxRuntimeConfigSchema } from '@anthropic-ai/sandbox-runtime';

const require = createRequire(import.meta.url);
const VERSION = require('@anthropic-ai/sandbox-runtime/package.json').version;
const PROOF_ENV = 'BYTE_PROBE_NET_GUARD';

let network = null;

function reply(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function validated(settings) {
  const result = SandboxRuntimeConfigSchema.safeParse(settings);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new Error(`invalid settings at ${issue.path.join('.')}: ${issue.message}`);
  }
  return result.data;
}

function canonical(value) {
  return JSON.stringify(value, (key, inner) =>
    inner && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : 1)))
      : inner,
  );
}

async function init(request) {
  if (network !== null) throw new Error('already initialised');
  const config = validated(request.settings);
  await SandboxManager.initialize(config);
  network = canonical(config.network);
  return { guard: process.env[PROOF_ENV] ?? null, version: VERSION };
}

async function wrap(request) {
  if (network === null) throw new Error('not initialised');
  const config = validated(request.settings);
  if (canonical(config.network) !== network) {
    throw new Error('network settings differ from this helper\'s');
  }
  for (const name of ['command', 'cwd', 'home', 'tmp']) {
    if (typeof request[name] !== 'string' || request[name] === '') {
      throw new Error(`${name} must be a non-empty string`);
    }
  }
  // The runtime reads cwd, HOME and TMPDIR while wrapping (mandatory-deny search,
  // default write paths, mount-point directories): the run's own, as in the CLI path.
  process.chdir(request.cwd);
  process.env.HOME = request.home;
  process.env.TMPDIR = request.tmp;
  const custom = { filesystem: config.filesystem, network: config.network };
  const { argv } = await SandboxManager.wrapWithSandboxArgv(request.command, undefined, custom);
  return { argv };
}

async function handle(line) {
  const request = JSON.parse(line);
  if (request.op === 'init') return init(request);
  if (request.op === 'wrap') return wrap(request);
  if (request.op === 'done') {
    SandboxManager.cleanupAfterCommand();
    return {};
  }
  throw new Error(`unknown op ${JSON.stringify(request.op)}`);
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(async () => {
    try {
      reply({ ok: true, ...(await handle(line)) });
    } catch (error) {
      reply({ ok: false, error: error instanceof Error ? error.message : String(error) });
    }
  });
});
// The worker closed our stdin (it stopped or died): the proxies and bridges go with us.
lines.on('close', () => {
  queue.then(() => SandboxManager.reset()).finally(() => process.exit(0));
});
