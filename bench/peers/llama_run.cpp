// llama.cpp's side of bench/bench_peers.sh, as llama.cpp's own examples/simple runs a model: load a
// GGUF file, feed a prompt of token ids in one batch, then generate greedily one token per step
// (the end token ignored, as our decode's bench model never ends). Built against the llama.cpp
// bundle by bench/peers/setup.sh.
//
//   llama_run MODEL.gguf IDS.txt PROMPT GEN THREADS [--exact] [--logits OUT.f32]
//
// IDS.txt: whitespace-separated token ids, the first PROMPT of them fed. GEN tokens are generated
// (the prompt's pass gives the first). --exact: the key/value cache in float32 and flash attention
// off (the settings under which llama.cpp agrees with PyTorch to float rounding); by default
// llama.cpp's own defaults (flash attention auto: on for the CPU, float16 cache). --logits writes
// the prompt's logits (PROMPT, V) as raw float32. Prints "load_s compute_s tokens" on stdout.
#include "llama.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf IDS.txt PROMPT GEN THREADS [--exact] [--logits OUT]\n", argv[0]);
    return 2;
  }
  const int prompt = std::atoi(argv[3]), gen = std::atoi(argv[4]), threads = std::atoi(argv[5]);
  bool exact = false;
  const char* logits_out = nullptr;
  for (int i = 6; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--exact")) exact = true;
    if (!std::strcmp(argv[i], "--logits") && i + 1 < argc) logits_out = argv[++i];
  }
  std::vector<llama_token> ids;
  std::ifstream in(argv[2]);
  for (long t; in >> t && static_cast<int>(ids.size()) < prompt;) ids.push_back(static_cast<llama_token>(t));
  if (static_cast<int>(ids.size()) < prompt) {
    std::fprintf(stderr, "%s: %zu ids, %d wanted\n", argv[2], ids.size(), prompt);
    return 1;
  }

  const double t0 = now();
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(prompt + gen + 16);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(prompt > 512 ? prompt : 512);
  cp.n_threads = cp.n_threads_batch = threads;
  cp.no_perf = true;
  if (exact) {
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const double t1 = now();

  llama_batch batch = llama_batch_init(prompt, 0, 1);
  for (int i = 0; i < prompt; ++i) {
    batch.token[i] = ids[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = logits_out != nullptr || i == prompt - 1;
  }
  batch.n_tokens = prompt;
  if (llama_decode(ctx, batch)) return 1;
  if (logits_out) {
    std::FILE* f = std::fopen(logits_out, "wb");
    for (int i = 0; i < prompt; ++i)
      std::fwrite(llama_get_logits_ith(ctx, i), sizeof(float), static_cast<size_t>(V), f);
    std::fclose(f);
  }
  llama_token tok = argmax(llama_get_logits_ith(ctx, prompt - 1), V);
  int made = 1;
  for (; made < gen; ++made) {
    llama_batch one = llama_batch_get_one(&tok, 1);
    if (llama_decode(ctx, one)) return 1;
    tok = argmax(llama_get_logits_ith(ctx, -1), V);
  }
  const double t2 = now();
  std::printf("%.6f %.6f %d\n", t1 - t0, t2 - t1, made);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
