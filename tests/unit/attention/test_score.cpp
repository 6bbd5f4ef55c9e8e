// Unit tests of lib/src/attention/score.cpp: the names of the score functions and the check that
// dot-product scores fit float32.
#include "attn/attention/score.hpp"
#include "attn/core/error.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace attn;

TEST_CASE("score: kinds by name") {
  CHECK(parse_score_kind("scaled-dot") == ScoreKind::ScaledDot);
  CHECK(parse_score_kind("additive") == ScoreKind::Additive);
  CHECK_THROWS_AS(parse_score_kind("cosine"), UsageError);
}

TEST_CASE("score: dot scores that could overflow float32 are refused, naming both tensors") {
  Tensor q(Shape{1, 2, 2}, std::vector<float>{3, 4, 0, 1}); // row norms 5 and 1
  CHECK(max_row_norm(q) == doctest::Approx(5.0));
  CHECK_NOTHROW(check_dot_scores_fit(q, q, 1.0f, "Q", "K"));
  Tensor big(Shape{1, 1, 2}, std::vector<float>{1e19f, 1e19f});
  CHECK_THROWS_WITH_AS(check_dot_scores_fit(big, big, 1.0f, "Q", "K"),
                       doctest::Contains("scores would overflow float32"), Error);
  CHECK_THROWS_WITH_AS(check_dot_scores_fit(big, big, 1.0f, "Q", "K"), doctest::Contains("(Q)"), Error);
  CHECK_THROWS_WITH_AS(check_dot_scores_fit(big, big, 1.0f, "Q", "K"), doctest::Contains("(K)"), Error);
}
