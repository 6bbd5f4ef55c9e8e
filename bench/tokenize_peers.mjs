// The peers of bench/bench_tokenize.sh on the same corpus: Hugging Face's tokenizers library (its
// Node binding, the Rust library; batches encoded on RAYON_NUM_THREADS threads), its JavaScript
// port @huggingface/tokenizers (one thread), and tiktoken (WASM, GPT-2's encoding, <|endoftext|> allowed). Prints
// "seconds checksum tokens": the time of the encoding alone (the corpus already in memory, split
// into lines as tokenize --lines splits them) and an FNV-1a checksum of every row's ids, which
// bench/ids_checksum computes from tokenize's output.
//   node bench/tokenize_peers.mjs NODE_MODULES hf|hfjs|tiktoken TOKENIZER_JSON CORPUS
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';

const [modules, which, tokenizerJson, corpusPath] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
let text = fs.readFileSync(corpusPath, 'utf8');
if (text.endsWith('\n')) text = text.slice(0, -1);
const lines = text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));

// FNV-1a over each row's ids (4 bytes each, little-endian) and a 0xFFFFFFFF after each row.
let h = 0xcbf29ce484222325n;
const prime = 0x100000001b3n;
let tokens = 0;
const mask = (1n << 64n) - 1n;
function mix(x) {
  for (let k = 0; k < 4; k++) {
    h ^= BigInt((x >>> (8 * k)) & 0xff);
    h = (h * prime) & mask;
  }
}
function add(ids) {
  for (const id of ids) mix(id);
  mix(0xffffffff);
  tokens += ids.length;
}

let seconds = 0;
if (which === 'hf') {
  const { Tokenizer } = require('tokenizers');
  const tok = Tokenizer.fromFile(tokenizerJson);
  tok.disablePadding(); // encodeBatch would pad every row to the batch's longest; tokenize counts lengths
  tok.disableTruncation();
  const rows = [];
  const start = process.hrtime.bigint();
  for (let i = 0; i < lines.length; i += 20000) {
    const batch = await tok.encodeBatch(lines.slice(i, i + 20000), { addSpecialTokens: true });
    for (const e of batch) rows.push(e.getIds());
  }
  seconds = Number(process.hrtime.bigint() - start) / 1e9;
  for (const r of rows) add(r);
} else if (which === 'hfjs') {
  const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
  const rows = [];
  const start = process.hrtime.bigint();
  for (const l of lines) rows.push(tok.encode(l).ids);
  seconds = Number(process.hrtime.bigint() - start) / 1e9;
  for (const r of rows) add(r);
} else if (which === 'tiktoken') {
  const { get_encoding } = require('tiktoken');
  const enc = get_encoding('gpt2');
  const rows = [];
  const start = process.hrtime.bigint();
  for (const l of lines) rows.push(enc.encode(l, 'all')); // special tokens as tokenizer.json's added tokens
  seconds = Number(process.hrtime.bigint() - start) / 1e9;
  for (const r of rows) add(r);
  enc.free();
} else {
  throw new Error(`unknown peer ${which}`);
}
console.log(seconds.toFixed(3), h.toString(16), tokens);
