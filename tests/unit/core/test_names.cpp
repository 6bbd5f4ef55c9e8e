// Unit tests of lib/include/attn/core/names.hpp: one table, its parser, names and message.
#include "attn/core/error.hpp"
#include "attn/core/names.hpp"
#include "attn/h5/h5io.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace attn;

namespace {
enum class Colour { Red, Green, Blue };
constexpr Named<Colour> colours[] = {{"red", Colour::Red}, {"green", Colour::Green}, {"blue", Colour::Blue}};
} // namespace

TEST_CASE("names: parse, name and list from one table") {
  CHECK(parse_named("green", colours, "colour") == Colour::Green);
  CHECK(std::string(name_of(Colour::Blue, colours)) == "blue");
  CHECK(names_of(colours) == "red, green, blue");
  CHECK_THROWS_WITH_AS(parse_named("mauve", colours, "colour"), "unknown colour 'mauve' (red, green, blue)",
                       UsageError);
}

TEST_CASE("names: the output types' message lists every type parse_out_type accepts") {
  for (const char* t : {"f32", "f64", "i64", "f16", "bf16", "i8"}) CHECK_NOTHROW(h5::parse_out_type(t));
  CHECK_THROWS_WITH_AS(h5::parse_out_type("f8"), "unknown dtype 'f8' (f32, f64, i64, f16, bf16, i8)", UsageError);
}
