// Reading tokenizer.json's values with errors that name the file and the component (components.hpp).
#include "components.hpp"

namespace attn::text {

std::optional<Node> Node::get(std::string_view key) const {
  if (!value.is_object()) fail("is not a JSON object");
  simdjson::dom::element e;
  if (value.get_object().at_key(key).get(e) || e.is_null()) return std::nullopt;
  return Node{e, fmt::format("{}.{}", where, key)};
}

Node Node::at(std::string_view key) const {
  auto n = get(key);
  if (!n) fail(fmt::format("the key {:?} is missing", std::string(key)));
  return *n;
}

std::vector<Node> Node::items() const {
  simdjson::dom::array a;
  if (value.get_array().get(a)) fail("is not a JSON array");
  std::vector<Node> out;
  std::size_t i = 0;
  for (auto e : a) out.push_back(Node{e, fmt::format("{}[{}]", where, i++)});
  return out;
}

std::string_view Node::str() const {
  std::string_view s;
  if (value.get_string().get(s)) fail("is not a string");
  return s;
}

std::int64_t Node::integer() const {
  std::int64_t i;
  if (value.get_int64().get(i)) fail("is not an integer");
  return i;
}

double Node::number() const {
  double d;
  if (value.get_double().get(d)) {
    std::int64_t i;
    if (value.get_int64().get(i)) fail("is not a number");
    return static_cast<double>(i);
  }
  return d;
}

bool Node::boolean() const {
  bool b;
  if (value.get_bool().get(b)) fail("is not true or false");
  return b;
}

std::string Node::str_or(std::string_view key, std::string_view fallback) const {
  auto n = get(key);
  return std::string(n ? n->str() : fallback);
}

bool Node::bool_or(std::string_view key, bool fallback) const {
  auto n = get(key);
  return n ? n->boolean() : fallback;
}

std::int64_t Node::int_or(std::string_view key, std::int64_t fallback) const {
  auto n = get(key);
  return n ? n->integer() : fallback;
}

} // namespace attn::text
