#include "kinformer/cache/label_selector.h"

#include <algorithm>
#include <cctype>

#include "kinformer/client/error.h"

namespace kinformer::cache {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::vector<LabelSelector::Requirement> parse() {
    std::vector<LabelSelector::Requirement> out;
    skip_space();
    if (at_end()) return out;
    for (;;) {
      out.push_back(requirement());
      skip_space();
      if (at_end()) break;
      expect(',');
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw client::ConfigError("label selector '" + std::string(text_) + "': at position " +
                              std::to_string(pos_) + ": " + what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.' ||
           c == '/';
  }
  std::string name(const char* what) {
    skip_space();
    std::size_t start = pos_;
    while (!at_end() && name_char(text_[pos_])) ++pos_;
    if (start == pos_) fail(std::string("expected ") + what);
    return std::string(text_.substr(start, pos_ - start));
  }
  std::string value() {  // may be empty (e.g. `a=`)
    skip_space();
    std::size_t start = pos_;
    while (!at_end() && name_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  bool keyword(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word) return false;
    std::size_t after = pos_ + word.size();
    if (after < text_.size() && name_char(text_[after])) return false;
    pos_ = after;
    return true;
  }
  std::vector<std::string> value_set() {
    expect('(');
    std::vector<std::string> values;
    skip_space();
    if (peek() == ')') fail("expected at least one value in ( )");
    for (;;) {
      values.push_back(value());
      skip_space();
      if (peek() == ')') {
        ++pos_;
        break;
      }
      expect(',');
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
  }
  LabelSelector::Requirement requirement() {
    using Op = LabelSelector::Operator;
    LabelSelector::Requirement r;
    skip_space();
    if (peek() == '!') {
      ++pos_;
      r.key = name("a label key after '!'");
      r.op = Op::does_not_exist;
      return r;
    }
    r.key = name("a label key");
    skip_space();
    if (at_end() || peek() == ',') {
      r.op = Op::exists;
      return r;
    }
    if (peek() == '=') {
      ++pos_;
      if (peek() == '=') ++pos_;
      r.op = Op::equals;
      r.values.push_back(value());
    } else if (peek() == '!') {
      ++pos_;
      if (peek() != '=') fail("expected '=' after '!'");
      ++pos_;
      r.op = Op::not_equals;
      r.values.push_back(value());
    } else if (keyword("notin")) {
      r.op = Op::not_in;
      r.values = value_set();
    } else if (keyword("in")) {
      r.op = Op::in;
      r.values = value_set();
    } else {
      fail("expected '=', '==', '!=', 'in', 'notin', ',' or end after key '" + r.key + "'");
    }
    return r;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

LabelSelector LabelSelector::parse(std::string_view text) {
  LabelSelector s;
  s.requirements_ = Parser(text).parse();
  std::stable_sort(s.requirements_.begin(), s.requirements_.end(),
                   [](const Requirement& a, const Requirement& b) { return a.key < b.key; });
  return s;
}

bool LabelSelector::matches(const client::StringMap& labels) const {
  for (const auto& r : requirements_) {
    const std::string* v = client::find_value(labels, r.key);
    switch (r.op) {
      case Operator::equals:
        if (v == nullptr || *v != r.values.front()) return false;
        break;
      case Operator::not_equals:
        if (v != nullptr && *v == r.values.front()) return false;
        break;
      case Operator::in:
        if (v == nullptr || !std::binary_search(r.values.begin(), r.values.end(), *v)) return false;
        break;
      case Operator::not_in:
        if (v != nullptr && std::binary_search(r.values.begin(), r.values.end(), *v)) return false;
        break;
      case Operator::exists:
        if (v == nullptr) return false;
        break;
      case Operator::does_not_exist:
        if (v != nullptr) return false;
        break;
    }
  }
  return true;
}

std::string LabelSelector::to_string() const {
  std::string out;
  auto join = [](const std::vector<std::string>& values) {
    std::string s;
    for (const auto& v : values) {
      if (!s.empty()) s += ',';
      s += v;
    }
    return s;
  };
  for (const auto& r : requirements_) {
    if (!out.empty()) out += ',';
    switch (r.op) {
      case Operator::equals:
        out += r.key + "=" + r.values.front();
        break;
      case Operator::not_equals:
        out += r.key + "!=" + r.values.front();
        break;
      case Operator::in:
        out += r.key + " in (" + join(r.values) + ")";
        break;
      case Operator::not_in:
        out += r.key + " notin (" + join(r.values) + ")";
        break;
      case Operator::exists:
        out += r.key;
        break;
      case Operator::does_not_exist:
        out += "!" + r.key;
        break;
    }
  }
  return out;
}

}  // namespace kinformer::cache
