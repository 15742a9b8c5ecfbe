#!/usr/bin/env node
'use strict';
/* An external actor instance in JavaScript, written from docs/wire.md alone
 * (test_node_actor.py's instance, not a product). Node's standard library
 * only (node 18, Debian 12's, and later): it speaks nng's SP pair1 protocol
 * itself over a unix socket (ipc://PATH) or TCP (tcp://HOST:PORT) with the
 * `net` module, no nng.
 *
 *   node node_actor.js URL [INSTANCE]
 *     M0_ACTOR_SECRET_FILE  the actor's key file: answers the host's
 *                           challenge over plain tcp:// (HELLO)
 *     M0_NODE_CHANNEL       the channel it publishes on (default "beats")
 *
 * REQUEST -> one REPLY: 200, JSON {"actor","lang":"node","pid","instance",
 * "method","path","query","body"}; a query `publish=V` first PUBLISHes
 * "event: node\ndata: V" (from 0) on the channel. MESSAGE -> one RETURN:
 * a call (id != 0) is answered code 0, the same type, JSON
 * {"lang":"node","pid","type","data"}; a send code 1, empty. STOP 01 (the
 * host reloads) drops the connection and dials again; an empty STOP, SIGTERM
 * or SIGINT ends it with 0. It says on stdout what happens ("connected",
 * "proved", "the host reloads", "published N") so a test can wait on it.
 *
 * Design notes: one connection at a time; every byte the peer sends goes
 * through one parser (the 8-byte SP greeting, then SP frames), and every
 * message is handled to its end before the next is read, so a REQUEST's
 * REPLY is written before anything after it is looked at. A connection that
 * breaks any rule is dropped and dialed again, never guessed at.
 */
const crypto = require('crypto');
const fs = require('fs');
const net = require('net');

const MAGIC = 0x3145306d;
const ENV_LEN = 44;
const MAX_PAYLOAD = 16 * 1024 * 1024;
const K = { STOP: 4, REQUEST: 12, REPLY: 13, PUBLISH: 15, HELLO: 18, MESSAGE: 19, RETURN: 20 };
const SP_PAIR1 = 0x11;       // the SP protocol id of pair v1, both ends
const RECONNECT_MIN_MS = 10; // docs/wire.md's reconnect times
const RECONNECT_MAX_MS = 100;

function say(text) { process.stdout.write(`node_actor: ${text}\n`); }

/* ---- the envelope ---- */

function envelope(kind, from, to, payload) {
  const b = Buffer.alloc(ENV_LEN + payload.length);
  b.writeUInt32LE(MAGIC, 0);
  b.writeUInt16LE(kind, 4);
  b.writeUInt16LE(0, 6);
  b.writeUInt32LE(from >>> 0, 8);
  b.writeUInt32LE(to >>> 0, 12);
  // seq, trace_hi, trace_lo: 0
  b.writeUInt32LE(payload.length, 40);
  payload.copy(b, ENV_LEN);
  return b;
}

function openEnvelope(b) {
  if (b.length < ENV_LEN || b.readUInt32LE(0) !== MAGIC) return null;
  const kind = b.readUInt16LE(4);
  const len = b.readUInt32LE(40);
  if (kind < 1 || b.readUInt16LE(6) !== 0 || len > MAX_PAYLOAD || len !== b.length - ENV_LEN)
    return null;
  return { kind, from: b.readUInt32LE(8), to: b.readUInt32LE(12), payload: b.subarray(ENV_LEN) };
}

/* ---- batches ---- */

/* A reader over one payload: each take checks the bytes are there. */
function reader(buf) {
  let at = 0;
  const need = (n) => { if (n > buf.length - at) throw new Error('short'); };
  return {
    left: () => buf.length - at,
    u8() { need(1); return buf.readUInt8(at++); },
    u16() { need(2); const v = buf.readUInt16LE(at); at += 2; return v; },
    u32() { need(4); const v = buf.readUInt32LE(at); at += 4; return v; },
    bytes(n) { need(n); const v = buf.subarray(at, at + n); at += n; return v; },
  };
}

function batchHead(r) {
  const version = r.u16(), flags = r.u16(), count = r.u32();
  if (version !== 1 || flags !== 0 || count > 65536) throw new Error('batch head');
  return count;
}

function requestRecord(r) {
  const id = r.bytes(8);
  r.bytes(16); // the trace id
  const m = r.u32(), t = r.u32(), p = r.u32(), bl = r.u32();
  const nh = r.u16(), np = r.u8(), minor = r.u8(), reserved = r.u32();
  if (nh > 100 || np > 8 || minor > 1 || reserved !== 0 || p > t) throw new Error('request record');
  const method = r.bytes(m).toString('latin1');
  const target = r.bytes(t).toString('latin1');
  const headers = [];
  for (let i = 0; i < nh; i++) {
    const n = r.u32(), v = r.u32();
    headers.push([r.bytes(n).toString('latin1'), r.bytes(v).toString('latin1')]);
  }
  const params = [];
  for (let i = 0; i < np; i++) params.push(r.bytes(r.u32()).toString('utf8'));
  const body = r.bytes(bl);
  const path = target.slice(0, p);
  const query = target[p] === '?' ? target.slice(p + 1) : '';
  return { id, method, target, path, query, headers, params, body };
}

/* The records of a REQUEST payload read before the first bad one (a bad
 * one, or bytes after the last, ends the list: docs/wire.md says answer
 * those read and send the REPLY). */
function decodeRequests(payload) {
  const r = reader(payload), out = [];
  try {
    const count = batchHead(r);
    for (let i = 0; i < count; i++) out.push(requestRecord(r));
    if (r.left() !== 0) say('bytes after the last request record: refused');
  } catch (e) {
    say(`a request batch that does not decode (${e.message}): answered the ${out.length} read`);
  }
  return out;
}

function replyRecord(id, status, headers, body) {
  const parts = [];
  const fixed = Buffer.alloc(16);
  id.copy(fixed, 0);
  fixed.writeUInt16LE(status, 8);
  fixed.writeUInt16LE(headers.length, 10);
  fixed.writeUInt32LE(body.length, 12);
  parts.push(fixed);
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'latin1'), v = Buffer.from(value, 'latin1');
    const lens = Buffer.alloc(8);
    lens.writeUInt32LE(n.length, 0);
    lens.writeUInt32LE(v.length, 4);
    parts.push(lens, n, v);
  }
  parts.push(body);
  return Buffer.concat(parts);
}

function batch(records) {
  const head = Buffer.alloc(8);
  head.writeUInt16LE(1, 0);
  head.writeUInt32LE(records.length, 4);
  return Buffer.concat([head, ...records]);
}

function frame(channel, lines) {
  const ch = Buffer.from(channel, 'utf8');
  const head = Buffer.alloc(10);
  head.writeUInt16LE(ch.length, 8); // the u64 id stays 0: the host numbers frames
  return Buffer.concat([head, ch, Buffer.from(lines, 'utf8')]);
}

/* ---- the SP pair1 connection (nng's framing: docs/wire.md, SP framing) ---- */

function parseUrl(url) {
  if (url.startsWith('ipc://')) return { ipc: true, opts: { path: url.slice(6) } };
  const m = /^tcp:\/\/(\[[^\]]+\]|[^:]+):(\d+)$/.exec(url);
  if (!m) throw new Error(`not an ipc:// or tcp:// URL: ${url}`);
  return { ipc: false, opts: { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) } };
}

const SP_HEADER = Buffer.from([0x00, 0x53, 0x50, 0x00, 0x00, SP_PAIR1, 0x00, 0x00]);

/* One SP message out: [ipc: 0x01] u64 BE size, then pair1's 4-byte hop
 * count (BE, 1: one hop) and the envelope. */
function spFrame(ipc, msg) {
  const head = Buffer.alloc((ipc ? 1 : 0) + 8 + 4);
  let at = 0;
  if (ipc) head[at++] = 0x01;
  head.writeBigUInt64BE(BigInt(msg.length + 4), at);
  head.writeUInt32BE(1, at + 8);
  return Buffer.concat([head, msg]);
}

/* Feeds bytes in, calls onMessage(envelope bytes) per SP message; returns an
 * error text when the peer broke a rule. */
function spParser(ipc, onMessage) {
  let buf = Buffer.alloc(0), greeted = false;
  const headLen = (ipc ? 1 : 0) + 8;
  return (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    if (!greeted) {
      if (buf.length < 8) return null;
      const h = buf.subarray(0, 8);
      if (h[0] !== 0 || h[1] !== 0x53 || h[2] !== 0x50 || h[3] !== 0 || h.readUInt16BE(4) !== SP_PAIR1
          || h[6] !== 0 || h[7] !== 0)
        return 'not an SP pair1 peer';
      greeted = true;
      buf = buf.subarray(8);
    }
    while (buf.length >= headLen) {
      if (ipc && buf[0] !== 0x01) return 'an ipc message type other than 1';
      const size = buf.readBigUInt64BE(ipc ? 1 : 0);
      if (size < 4n || size > BigInt(4 + ENV_LEN + MAX_PAYLOAD + 20)) return `a message of ${size} bytes`;
      const end = headLen + Number(size);
      if (buf.length < end) return null;
      const body = buf.subarray(headLen, end);
      buf = buf.subarray(end);
      if (body.readUInt32BE(0) > 0xff) return 'a pair1 hop count over 255';
      const err = onMessage(body.subarray(4));
      if (err) return err;
    }
    return null;
  };
}

/* ---- the instance ---- */

class Instance {
  constructor(url, label, secret, channel) {
    this.url = url;
    this.where = parseUrl(url);
    this.label = label;
    this.secret = secret;
    this.channel = channel;
    this.sock = null;
    this.delay = RECONNECT_MIN_MS;
    this.ending = false;
    this.published = 0;
    this.name = '';
  }

  dial() {
    if (this.ending) return;
    const s = net.connect(this.where.opts);
    this.sock = s;
    const feed = spParser(this.where.ipc, (m) => this.onMessage(m));
    s.on('connect', () => {
      this.delay = RECONNECT_MIN_MS;
      s.write(SP_HEADER);
      say('connected');
    });
    s.on('data', (chunk) => {
      const err = feed(chunk);
      if (err && this.sock === s) {
        say(`dropped the connection: ${err}`);
        s.destroy();
      }
    });
    s.on('error', () => {});
    s.on('close', () => this.redial(s));
  }

  redial(s) {
    if (this.sock !== s) return;
    this.sock = null;
    if (this.ending) return;
    setTimeout(() => this.dial(), this.delay);
    this.delay = Math.min(this.delay * 2, RECONNECT_MAX_MS);
  }

  send(kind, from, to, payload) {
    if (this.sock) this.sock.write(spFrame(this.where.ipc, envelope(kind, from, to, payload)));
  }

  onMessage(bytes) {
    const env = openEnvelope(bytes);
    if (!env) return 'a message that is not an envelope';
    switch (env.kind) {
    case K.HELLO: return this.prove(env);
    case K.REQUEST: return this.serve(env);
    case K.MESSAGE: return this.answer(env);
    case K.STOP: return this.stop(env);
    default: return null; // a kind this instance does not handle
    }
  }

  prove(env) {
    if (!this.secret) return 'asked for a proof, and no M0_ACTOR_SECRET_FILE';
    const ctx = env.payload.subarray(32).toString('latin1');
    this.name = ctx.replace(/^m0-instance-proof-1 /, '');
    const proof = crypto.createHmac('sha256', this.secret).update(env.payload).digest();
    this.send(K.HELLO, env.to, env.from, proof);
    say('proved');
    return null;
  }

  serve(env) {
    const replies = decodeRequests(env.payload).map((q) => this.reply(q));
    this.send(K.REPLY, env.to, env.from, batch(replies));
    return null;
  }

  reply(q) {
    const pub = /(?:^|&)publish=([^&]*)/.exec(q.query);
    if (pub) this.publish(`event: node\ndata: ${decodeURIComponent(pub[1])}`);
    const body = Buffer.from(JSON.stringify({
      actor: this.name || 'echo', lang: 'node', pid: process.pid, instance: this.label,
      method: q.method, path: q.path, query: q.query, body: q.body.toString('utf8'),
    }));
    return replyRecord(q.id, 200, [['Content-Type', 'application/json'], ['x-lang', 'node']], body);
  }

  publish(lines) {
    this.send(K.PUBLISH, 0, 0, frame(this.channel, lines));
    say(`published ${++this.published}`);
  }

  answer(env) {
    const r = reader(env.payload);
    let call, type, data;
    try {
      call = r.bytes(8);
      type = r.u32();
      r.bytes(r.u16()); // the name: empty from the host
      data = r.bytes(r.left());
    } catch (e) {
      return 'a MESSAGE that does not decode';
    }
    const head = Buffer.alloc(16);
    call.copy(head, 0);
    head.writeUInt32LE(type, 8);
    let out = Buffer.alloc(0);
    if (call.equals(Buffer.alloc(8))) {
      head.writeUInt32LE(1, 12); // a send: no answer
    } else {
      out = Buffer.from(JSON.stringify({ lang: 'node', pid: process.pid, type, data: data.toString('utf8') }));
    }
    this.send(K.RETURN, env.to, env.from, Buffer.concat([head, out]));
    return null;
  }

  stop(env) {
    if (env.payload.length === 1 && env.payload[0] === 1) {
      say('the host reloads');
      this.sock.destroy(); // 'close' dials again: the next generation
      return null;
    }
    this.end('the host stops');
    return null;
  }

  end(why) {
    say(why);
    this.ending = true;
    if (this.sock) this.sock.end();
    setImmediate(() => process.exit(0));
  }
}

function main() {
  const [url, label] = process.argv.slice(2);
  if (!url) {
    process.stderr.write('usage: node node_actor.js URL [INSTANCE]\n');
    process.exit(64);
  }
  const file = process.env.M0_ACTOR_SECRET_FILE;
  const secret = file ? Buffer.from(fs.readFileSync(file, 'latin1').split('\n')[0], 'latin1') : null;
  const inst = new Instance(url, Number(label || 0), secret, process.env.M0_NODE_CHANNEL || 'beats');
  process.on('SIGTERM', () => inst.end('SIGTERM'));
  process.on('SIGINT', () => inst.end('SIGINT'));
  inst.dial();
}

main();
