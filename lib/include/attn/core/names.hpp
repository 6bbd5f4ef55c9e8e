// An enum's names as one {name, value} table, which drives its parser, its name function and the
// list of choices in the parser's error message, so the three cannot drift apart.
#pragma once

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace attn {

template <class E> struct Named {
  const char* name;
  E value;
};

// "a, b, c": the table's names in order.
template <class E, std::size_t N> std::string names_of(const Named<E> (&table)[N]) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) out += (i ? ", " : "") + std::string(table[i].name);
  return out;
}

// The entry named `s`, or null.
template <class E, std::size_t N> const Named<E>* find_named(std::string_view s, const Named<E> (&table)[N]) {
  for (const Named<E>& n : table)
    if (s == n.name) return &n;
  return nullptr;
}

// The value named `s`, or UsageError "unknown WHAT 's' (a, b, c)".
template <class E, std::size_t N> E parse_named(std::string_view s, const Named<E> (&table)[N], std::string_view what) {
  if (const Named<E>* n = find_named(s, table)) return n->value;
  throw UsageError(fmt::format("unknown {} '{}' ({})", what, s, names_of(table)));
}

// The name of `value` ("?" for a value not in the table).
template <class E, std::size_t N> const char* name_of(E value, const Named<E> (&table)[N]) {
  for (const Named<E>& n : table)
    if (n.value == value) return n.name;
  return "?";
}

} // namespace attn
