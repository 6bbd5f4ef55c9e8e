// ONNX Runtime's side of bench/bench_peers.sh: one ONNX file run on a raw float32 input with
// onnxruntime-node (CPU, optimisation level "all", 2 intra-op threads), as a user's script would.
//
//   node ort_run.mjs MODEL.onnx INPUT.bin B,N,E [OUT.bin]
//
// Prints "load_s first_s second_s" on stdout: the session's creation with the input's reading, the
// first run (what a process running the model once pays) and a second (the computation alone, its
// buffers already allocated); OUT.bin: the output.
import fs from 'node:fs';
import {createRequire} from 'node:module';

const require = createRequire(process.env.ORT_MODULES + '/');
const ort = require('onnxruntime-node');
const [model, input, dims, out] = process.argv.slice(2);
const shape = dims.split(',').map(Number);
const now = () => Number(process.hrtime.bigint()) / 1e9;

const t0 = now();
const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 2, interOpNumThreads: 1,
                                                           graphOptimizationLevel: 'all'});
const bytes = fs.readFileSync(input);
const x = new ort.Tensor('float32', new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), shape);
const t1 = now();
const result = await session.run({x});
const t2 = now();
await session.run({x});
const t3 = now();
if (out) fs.writeFileSync(out, Buffer.from(result.y.data.buffer, result.y.data.byteOffset, result.y.data.byteLength));
console.log(`${(t1 - t0).toFixed(6)} ${(t2 - t1).toFixed(6)} ${(t3 - t2).toFixed(6)}`);
