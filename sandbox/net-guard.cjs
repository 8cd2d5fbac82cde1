'use strict';
// Byte probe network guard, loaded with `node --require` into the Sandbox
// Runtime (srt) process before its CLI runs. srt's HTTP and SOCKS proxies allow
// a destination by *name* only; every outbound TCP connection the srt process
// opens passes through net.Socket.prototype.connect (net.connect, http, https,
// tls and the proxies' dialDirect all end there), so this file wraps it:
//
//   * the destination port must be one the policy allows
//     (BYTE_PROBE_NET_PORTS, e.g. "80,443");
//   * an IP literal must not be loopback, private, shared (CGNAT), link-local,
//     multicast, unspecified or reserved, in any IPv4, IPv6 or embedded form;
//   * a name is resolved by our lookup, which drops every such address, and
//     Node connects to exactly an address that lookup returned -- no second
//     resolution, so no DNS-rebinding window;
//   * Unix-socket connects are refused (nothing we configure needs one).
//
// A missing or malformed configuration throws here, so srt never starts
// (fail closed). Once installed, the guard sets BYTE_PROBE_NET_GUARD to the
// ports it enforces; the sandboxed shell checks it before printing the run's
// start marker. See docs/ARCHITECTURE.md, "Network".

const dns = require('node:dns');
const net = require('node:net');

const PORTS_ENV = 'BYTE_PROBE_NET_PORTS';
const PROOF_ENV = 'BYTE_PROBE_NET_GUARD';
const REFUSED = 'EBYTEPROBENET';

function parsePorts(raw) {
  if (typeof raw !== 'string' || !/^[0-9]{1,5}(,[0-9]{1,5})*$/.test(raw)) {
    throw new Error(`byte-probe net guard: ${PORTS_ENV} must list ports, got ${JSON.stringify(raw)}`);
  }
  const ports = raw.split(',').map(Number);
  for (const port of ports) {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new Error(`byte-probe net guard: port ${port} is outside 1-65535`);
    }
  }
  return new Set(ports);
}

// ---------------------------------------------------------------------------
// Address classification. Returns null for an address a probe may reach, or
// a short reason. Documentation ranges (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24, 2001:db8::/32) are not private: nothing routes them, and
// the tests use one for a host they create.
// ---------------------------------------------------------------------------

const V4_FORBIDDEN = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared address space'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
].map(([base, bits, reason]) => [v4ToInt(base), bits, reason]);

function v4ToInt(text) {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^[0-9]{1,3}$/.test(part) || Number(part) > 255) return null;
    value = value * 256 + Number(part);
  }
  return value;
}

function classifyV4Int(value) {
  for (const [base, bits, reason] of V4_FORBIDDEN) {
    const size = 2 ** (32 - bits);
    if (value >= base && value < base + size) return reason;
  }
  return null;
}

function v6ToBigInt(text) {
  let head = text;
  let tailWords = [];
  const lastColon = head.lastIndexOf(':');
  if (lastColon === -1) return null;
  if (head.includes('.', lastColon)) {
    // An embedded dotted quad is the last 32 bits (::ffff:127.0.0.1).
    const v4 = v4ToInt(head.slice(lastColon + 1));
    if (v4 === null) return null;
    tailWords = [Math.floor(v4 / 65536), v4 % 65536];
    head = head.slice(0, lastColon + 1);
    if (!head.endsWith('::')) head = head.slice(0, -1);
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const toWords = part => (part === '' ? [] : part.split(':'));
  const left = toWords(halves[0]);
  const right = halves.length === 2 ? toWords(halves[1]) : [];
  const fill = 8 - tailWords.length - left.length - right.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return null;
  const words = [...left, ...Array(halves.length === 2 ? fill : 0).fill('0'), ...right];
  let value = 0n;
  for (const word of words) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(word)) return null;
    value = (value << 16n) | BigInt(parseInt(word, 16));
  }
  for (const word of tailWords) value = (value << 16n) | BigInt(word);
  return value;
}

const V6_FORBIDDEN = [
  ['64:ff9b:1::', 48, 'NAT64 local-use'],
  ['100::', 64, 'discard-only'],
  ['2001::', 32, 'Teredo'],
  ['2001:2::', 48, 'reserved'],
  ['fc00::', 7, 'unique local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
].map(([base, bits, reason]) => [v6ToBigInt(base), BigInt(128 - bits), reason]);
const LOW32 = 0xffffffffn;

function classifyV6BigInt(value) {
  if (value >> 32n === 0xffffn) return classifyEmbedded(value & LOW32, 'IPv4-mapped');
  if (value >> 32n === 0n) {
    if (value === 0n) return 'unspecified';
    if (value === 1n) return 'loopback';
    return 'IPv4-compatible';
  }
  if (value >> 32n === 0xffff0000n) return 'IPv4-translated';
  if (value >> 32n === 0x64ff9b0000000000000000n) {
    return classifyEmbedded(value & LOW32, 'NAT64');
  }
  if (value >> 112n === 0x2002n) return classifyEmbedded((value >> 80n) & LOW32, '6to4');
  for (const [base, shift, reason] of V6_FORBIDDEN) {
    if (value >> shift === base >> shift) return reason;
  }
  // Only 2000::/3 is global unicast; the rest is reserved.
  if (value >> 125n !== 1n) return 'reserved';
  return null;
}

function classifyEmbedded(v4, form) {
  const reason = classifyV4Int(Number(v4));
  return reason === null ? null : `${form} ${reason}`;
}

function classifyAddress(address) {
  // Zone ids (fe80::1%eth0) name an interface; the address part decides.
  const text = String(address).split('%')[0];
  const family = net.isIP(text);
  if (family === 4) {
    const value = v4ToInt(text);
    return value === null ? 'unparsed' : classifyV4Int(value);
  }
  if (family === 6) {
    const value = v6ToBigInt(text);
    return value === null ? 'unparsed' : classifyV6BigInt(value);
  }
  return 'not an IP address';
}

// ---------------------------------------------------------------------------
// The connect wrapper.
// ---------------------------------------------------------------------------

// Each refusal is also reported on this process's stderr, which on the CLI path is the
// run's stderr: the runner reads it to say that a failed probe was refused, not refuted
// (docs/ARCHITECTURE.md, "Trust rules"). At most MAX_REPORTS lines, so a probe retrying
// in a loop cannot spend the run's output budget through us.
const MAX_REPORTS = 20;
let reports = 0;

function report(destination, message) {
  reports += 1;
  if (reports > MAX_REPORTS + 1) return;
  const line = reports > MAX_REPORTS
    ? 'byte-probe network guard: further refusals are not reported'
    : `byte-probe network guard: refused: ${printable(destination, /\s/g)} (${printable(message)})`;
  try {
    process.stderr.write(`${line}\n`);
  } catch {
    // A closed stderr must not turn a refusal into something else.
  }
}

// A destination is the probe's choice: one line, bounded (and one word where asked).
function printable(text, also = null) {
  const line = String(text).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return (also === null ? line : line.replace(also, '?')).slice(0, 300);
}

function refusal(message, destination) {
  report(destination, message);
  const error = new Error(`byte-probe network guard: ${message}`);
  error.code = REFUSED;
  return error;
}

function makeGuardedLookup(originalLookup) {
  return function guardedLookup(hostname, options, callback) {
    if (typeof options === 'function') {
      callback = options;
      options = {};
    } else if (typeof options === 'number') {
      options = { family: options };
    }
    const wantAll = Boolean(options && options.all);
    originalLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error);
      const allowed = addresses.filter(entry => classifyAddress(entry.address) === null);
      if (allowed.length === 0) {
        const seen = addresses.map(entry => entry.address).join(', ');
        const message = `${hostname} resolves only to forbidden addresses (${seen})`;
        return callback(refusal(message, hostname));
      }
      if (wantAll) return callback(null, allowed);
      return callback(null, allowed[0].address, allowed[0].family);
    });
  };
}

function install(ports) {
  if (typeof net._normalizeArgs !== 'function') {
    // The wrapper needs Node's own argument normalisation; without it, refuse to start.
    throw new Error('byte-probe net guard: this Node has no net._normalizeArgs');
  }
  const originalConnect = net.Socket.prototype.connect;
  const guardedLookup = makeGuardedLookup(dns.lookup);
  const refuse = (socket, message, destination) => {
    const error = refusal(message, destination);
    process.nextTick(() => socket.destroy(error));
    return socket;
  };
  net.Socket.prototype.connect = function guardedConnect(...args) {
    const normalized = Array.isArray(args[0]) ? args[0] : net._normalizeArgs(args);
    const options = normalized[0] || {};
    const callback = normalized[1];
    if (options.path !== undefined && options.path !== null) {
      return refuse(this, 'unix socket connections are not allowed', `${options.path}`);
    }
    const port = Number(options.port);
    const host = options.host === undefined || options.host === null ? 'localhost' : `${options.host}`;
    const destination = `${host}:${options.port}`;
    if (!ports.has(port)) return refuse(this, `port ${options.port} is not allowed`, destination);
    if (net.isIP(host.split('%')[0])) {
      const reason = classifyAddress(host);
      if (reason !== null) return refuse(this, `${host} is ${reason}`, destination);
    }
    const checked = { ...options, host, lookup: guardedLookup };
    return callback === undefined
      ? originalConnect.call(this, checked)
      : originalConnect.call(this, checked, callback);
  };
}

function main() {
  const raw = process.env[PORTS_ENV];
  const ports = parsePorts(raw);
  install(ports);
  process.env[PROOF_ENV] = raw;
}

if (require.main === module) {
  // `node net-guard.cjs` reads addresses, one per line, and prints each one's
  // classification (`allowed` or the reason): the tests compare it with an
  // independent table.
  const lines = require('node:readline').createInterface({ input: process.stdin });
  lines.on('line', line => {
    const reason = classifyAddress(line.trim());
    process.stdout.write(`${reason === null ? 'allowed' : reason}\n`);
  });
} else {
  main();
}
