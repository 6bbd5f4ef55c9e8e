// A JSON file parsed with simdjson, errors naming the file (model_dir.cpp, image_processor.cpp).
#pragma once

#include <simdjson.h>

#include <string>

namespace attn::hf {

simdjson::dom::element parse_json_file(simdjson::dom::parser& parser, const std::string& path);

} // namespace attn::hf
