// Post-processors: the special tokens a single sequence gets when add_special_tokens is on
// (Hugging Face tokenizers' processors/*.rs; pairs of sequences are not a tool's input).
#include "components.hpp"

namespace attn::text {

namespace {

// A [token, id] pair of BertProcessing and RobertaProcessing.
std::int32_t pair_id(const Node& n, std::string_view key) {
  const std::vector<Node> p = n.at(key).items();
  if (p.size() != 2) n.at(key).fail("is not [token, id]");
  return static_cast<std::int32_t>(p[1].integer());
}

class Around final : public PostProcessor {
public:
  Around(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void specials(std::vector<std::int32_t>& prefix, std::vector<std::int32_t>& suffix) const override {
    prefix.insert(prefix.begin(), prefix_.begin(), prefix_.end());
    suffix.insert(suffix.end(), suffix_.begin(), suffix_.end());
  }

private:
  std::vector<std::int32_t> prefix_, suffix_;
};

// TemplateProcessing's "single" template: the special tokens before and after $A.
std::unique_ptr<PostProcessor> make_template(const Node& n) {
  const Node special = n.at("special_tokens");
  std::vector<std::int32_t> before, after;
  bool seen_a = false;
  for (const Node& item : n.at("single").items()) {
    if (auto s = item.get("SpecialToken")) {
      const std::string_view name = s->str("id");
      const auto tok = special.get(name);
      if (!tok) s->fail(fmt::format("the special token {:?} is not in special_tokens", std::string(name)));
      for (const Node& id : tok->at("ids").items())
        (seen_a ? after : before).push_back(static_cast<std::int32_t>(id.integer()));
    } else if (auto a = item.get("Sequence")) {
      if (seen_a) a->fail("a single-sequence template names the sequence twice");
      seen_a = true;
    } else {
      item.fail("is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}");
    }
  }
  return std::make_unique<Around>(std::move(before), std::move(after));
}

class Sequence final : public PostProcessor {
public:
  explicit Sequence(const Node& n) {
    for (const Node& p : n.at("processors").items()) parts_.push_back(make_post_processor(p));
  }
  void specials(std::vector<std::int32_t>& prefix, std::vector<std::int32_t>& suffix) const override {
    for (const auto& p : parts_) p->specials(prefix, suffix);
  }

private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

} // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Node& n) {
  const std::string t = n.type();
  if (t == "TemplateProcessing") return make_template(n);
  if (t == "BertProcessing" || t == "RobertaProcessing")
    return std::make_unique<Around>(std::vector<std::int32_t>{pair_id(n, "cls")},
                                    std::vector<std::int32_t>{pair_id(n, "sep")});
  if (t == "ByteLevel") return std::make_unique<Around>(std::vector<std::int32_t>{}, std::vector<std::int32_t>{});
  if (t == "Sequence") return std::make_unique<Sequence>(n);
  n.unsupported("post_processor");
}

} // namespace attn::text
