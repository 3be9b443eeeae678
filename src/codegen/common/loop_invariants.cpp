#include "codegen/common/loop_invariants.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

namespace fieldflow::codegen {

namespace {

struct Line {
  std::string text;
  int depth = 0;  // brace depth at the start of the line, relative to the body
};

std::vector<Line> split_lines(const std::string& body) {
  std::vector<Line> lines;
  std::istringstream in(body);
  int depth = 0;
  for (std::string t; std::getline(in, t);) {
    const int opened = static_cast<int>(std::count(t.begin(), t.end(), '{')) - static_cast<int>(std::count(t.begin(), t.end(), '}'));
    lines.push_back({std::move(t), depth});
    depth += opened;
  }
  return lines;
}

bool identifier_char(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

// The names on a line (a digit run such as the `2` of `0x1p+2` is not one).
std::vector<std::string> identifiers(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    if (identifier_char(s[i], true) && (i == 0 || !identifier_char(s[i - 1], false))) {
      std::size_t j = i + 1;
      while (j < s.size() && identifier_char(s[j], false)) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

std::size_t skip_space(const std::string& s, std::size_t i) {
  while (i < s.size() && space(s[i])) ++i;
  return i;
}

// The end of the word-character run (letters, digits, `_`) starting at i.
std::size_t word_end(const std::string& s, std::size_t i) {
  while (i < s.size() && identifier_char(s[i], false)) ++i;
  return i;
}

bool starts_with_at(const std::string& s, std::size_t i, std::string_view w) { return s.compare(i, w.size(), w) == 0; }

struct Statement {
  std::string type;  // the declared type, empty for an assignment
  std::string name, value;
};

// `<name> = <value>;` optionally followed by a `//` comment, from position i of a line: the
// name and the value. The value ends at the first `;` after which only a comment or blanks follow.
std::optional<Statement> local_assignment(const std::string& s, std::size_t i) {
  const std::size_t e = word_end(s, i);
  if (e == i) return std::nullopt;
  std::size_t k = skip_space(s, e);
  if (k >= s.size() || s[k] != '=') return std::nullopt;
  const std::size_t value = k + 1;
  for (std::size_t semi = s.find(';', value); semi != std::string::npos; semi = s.find(';', semi + 1)) {
    const std::size_t rest = skip_space(s, semi + 1);
    if (rest == s.size() || starts_with_at(s, rest, "//")) return Statement{"", s.substr(i, e - i), s.substr(value, semi - value)};
  }
  return std::nullopt;
}

// A line the point emitter writes as one declaration (`const double v3 = ...;`) or assignment
// (`nb4 = present5 ? nb4 : 0;`) of a local: the local and its value. Parsed by hand because this
// runs on every warm compile (a cache hit), where std::regex cost more than the rest of codegen.
std::optional<Statement> local_statement(const std::string& s) {
  std::size_t i = skip_space(s, 0);
  if (auto a = local_assignment(s, i)) return a;
  if (starts_with_at(s, i, "const") && i + 5 < s.size() && space(s[i + 5])) i = skip_space(s, i + 5);
  // ff_index and ff_offset: CUDA kernels' coordinate and element-offset types (Dialect).
  for (std::string_view type : {"double", "float", "bool", "std::int32_t", "std::int64_t", "ff_index", "ff_offset"})
    if (starts_with_at(s, i, type) && i + type.size() < s.size() && space(s[i + type.size()])) {
      auto d = local_assignment(s, skip_space(s, i + type.size()));
      if (d) d->type = type;
      return d;
    }
  return std::nullopt;
}

// The names a line inside a branch or nested loop assigns (`x = ...`, `x |= ...`; not `x == y`).
std::vector<std::string> assigned_names(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    if (!identifier_char(s[i], true)) {
      ++i;
      continue;
    }
    const std::size_t e = word_end(s, i), k = skip_space(s, e);
    if (k + 1 < s.size() && s[k] == '|' && s[k + 1] == '=') {
      out.push_back(s.substr(i, e - i));
      i = k + 2;
    } else if (k < s.size() && s[k] == '=' && (k + 1 == s.size() || s[k + 1] != '=')) {
      out.push_back(s.substr(i, e - i));
      i = k + 1;
    } else {
      i = e;
    }
  }
  return out;
}

// Whether a line holds a jump keyword (as a whole word).
bool has_jump_keyword(const std::string& s) {
  for (std::string_view w : {"continue", "break", "return", "goto"})
    for (std::size_t at = s.find(w); at != std::string::npos; at = s.find(w, at + 1))
      if ((at == 0 || !identifier_char(s[at - 1], false)) && (at + w.size() == s.size() || !identifier_char(s[at + w.size()], false)))
        return true;
  return false;
}

// Whether a line starts an `if`.
bool starts_if(const std::string& s) {
  const std::size_t i = skip_space(s, 0);
  return starts_with_at(s, i, "if") && skip_space(s, i + 2) < s.size() && s[skip_space(s, i + 2)] == '(';
}

// Whether a line holds a jump keyword or starts an `if`.
bool has_jump(const std::string& s) { return has_jump_keyword(s) || starts_if(s); }

// `okN` if the line declares a reduction mask (`bool okN = ...`).
std::optional<std::string> declared_mask(const std::string& s) {
  std::size_t i = skip_space(s, 0);
  if (!starts_with_at(s, i, "bool") || i + 4 >= s.size() || !space(s[i + 4])) return std::nullopt;
  i = skip_space(s, i + 4);
  if (!starts_with_at(s, i, "ok")) return std::nullopt;
  std::size_t e = i + 2;
  while (e < s.size() && s[e] >= '0' && s[e] <= '9') ++e;
  if (e == i + 2) return std::nullopt;
  const std::size_t k = skip_space(s, e);
  if (k >= s.size() || s[k] != '=') return std::nullopt;
  return s.substr(i, e - i);
}

bool identifier(std::string_view s) {
  if (s.empty() || !identifier_char(s[0], true)) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return identifier_char(c, false); });
}

// The two operands of `static_cast<T>(a * b)` (how the point emitter writes a product of type T),
// where both are names.
std::optional<std::pair<std::string, std::string>> product_of(const std::string& value, const std::string& type) {
  const std::size_t b = skip_space(value, 0);
  std::size_t e = value.size();
  while (e > b && space(value[e - 1])) --e;
  const std::string open = "static_cast<" + type + ">(";
  if (!starts_with_at(value, b, open) || e == 0 || value[e - 1] != ')') return std::nullopt;
  const std::string_view inner = std::string_view(value).substr(b + open.size(), e - 1 - b - open.size());
  const std::size_t star = inner.find(" * ");
  if (star == std::string_view::npos) return std::nullopt;
  const std::string_view x = inner.substr(0, star), y = inner.substr(star + 3);
  if (!identifier(x) || !identifier(y)) return std::nullopt;
  return std::pair{std::string(x), std::string(y)};
}

// Every name a loop body assigns (`x = `, `x |= `, declarations with a value) or declares
// without one (`double v0;`), and the loop's own variable: what may change along the loop.
std::set<std::string> varying_names(const std::vector<Line>& lines, const std::string& loop_var) {
  std::set<std::string> varying{loop_var};
  for (const auto& line : lines) {
    const std::string& l = line.text;
    for (auto& name : assigned_names(l)) varying.insert(std::move(name));
    const std::vector<std::string> ids = identifiers(l);
    if (!ids.empty() && l.find('=') == std::string::npos && l.find('(') == std::string::npos && l.back() == ';')
      varying.insert(ids.back());
  }
  return varying;
}

// A value split into names and the characters between them, so that two loads can be compared
// name by name and one name replaced.
std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const bool name = identifier_char(s[i], true) && (i == 0 || !identifier_char(s[i - 1], false));
    const std::size_t j = name ? word_end(s, i) : i + 1;
    if (!name && !out.empty() && !identifier_char(out.back()[0], true)) out.back() += s.substr(i, j - i);
    else out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p;
  return out;
}

std::string trimmed(const std::string& s) {
  const std::size_t b = skip_space(s, 0);
  std::size_t e = s.size();
  while (e > b && space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::vector<HoistedLocal> hoisted_locals_read(const std::string& statements, const std::string& uses) {
  const std::vector<std::string> used = identifiers(uses);
  const std::set<std::string> read(used.begin(), used.end());
  std::vector<HoistedLocal> out;
  std::set<std::string> seen;
  for (const Line& l : split_lines(statements)) {
    const auto st = local_statement(l.text);
    if (st && !st->type.empty() && read.count(st->name) && seen.insert(st->name).second) out.push_back({st->type, st->name});
  }
  return out;
}

std::string without_dead_locals(const std::string& body) {
  const std::vector<Line> lines = split_lines(body);
  std::vector<std::optional<Statement>> declares(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (auto st = local_statement(lines[i].text); st && !st->type.empty() && lines[i].depth == 0) declares[i] = st;
  std::vector<bool> kept(lines.size(), true);
  for (bool dropped = true; dropped;) {
    dropped = false;
    std::set<std::string> read;  // by the lines kept, a declaration's own name aside
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (kept[i])
        for (auto& id : identifiers(lines[i].text))
          if (!declares[i] || id != declares[i]->name) read.insert(std::move(id));
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (kept[i] && declares[i] && !read.count(declares[i]->name)) {
        kept[i] = false;
        dropped = true;
      }
  }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (kept[i]) out += lines[i].text + "\n";
  return out;
}

HoistedLoopBody hoist_loop_invariants(const std::string& body, const std::string& loop_var) {
  const std::vector<Line> lines = split_lines(body);
  std::set<std::string> dependent{loop_var};
  // Whatever a branch or a nested loop assigns depends on it.
  for (const Line& l : lines)
    if (l.depth > 0)
      for (auto& name : assigned_names(l.text)) dependent.insert(std::move(name));
  // Nothing after a jump (a `continue` that skips the rest of an iteration, anywhere in the
  // body, or a one-line `if`) moves: a statement behind it need not be valid where the jump is
  // taken (a load through a missing neighbour's index).
  std::size_t movable = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& t = lines[i].text;
    if (has_jump(t) && (t.find('{') == std::string::npos || t.find("continue") != std::string::npos ||
                                       t.find("break") != std::string::npos || t.find("return") != std::string::npos)) {
      movable = i;
      break;
    }
  }
  // Each line is parsed once (this runs on every warm compile too).
  struct Parsed {
    bool statement = false;
    std::string type;                    // its declared type (empty for an assignment)
    std::string name;                    // the local it declares or assigns
    std::string value;                   // its right-hand side
    std::vector<std::string> operands;   // names on its right-hand side
    std::vector<std::string> names;      // every name on the line
  };
  std::vector<Parsed> parsed(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    parsed[i].names = identifiers(l.text);
    if (l.depth != 0 || l.text.find('{') != std::string::npos || l.text.find('}') != std::string::npos) continue;
    if (auto st = local_statement(l.text)) {
      parsed[i].statement = true;
      parsed[i].type = std::move(st->type);
      parsed[i].name = std::move(st->name);
      parsed[i].value = std::move(st->value);
      parsed[i].operands = identifiers(parsed[i].value);
    }
  }
  // An unrecognised top-level line (a declaration without a value, say) makes every name it may
  // define dependent: the names before its first `=` and those assigned inside one-line braces
  // (below), none for a store into a buffer (`b[..] = v`),
  // none for the head of a branch (`if (x_K < 1) {`: what its block assigns is dependent above;
  // counting the names of its condition would make `std` and `int64_t` dependent, and with them
  // every table row of the kernel).
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    if (l.depth != 0 || parsed[i].statement) continue;
    const std::string& t = l.text;
    std::vector<std::string> assigned = assigned_names(t);
    if (starts_if(t) && t.size() >= 3 && t.compare(t.size() - 3, 3, ") {") == 0 && assigned.empty()) continue;
    // A one-line branch assigns inside its braces (`if (d < lo || d >= hi) { err |= ..; d = lo; }`,
    // a dynamic offset's check): those names change here, whatever stands before the first `=`.
    for (auto& id : assigned) dependent.insert(std::move(id));
    const std::string lhs = l.text.substr(0, l.text.find('='));
    if (lhs.find('[') != std::string::npos) continue;
    for (const auto& id : identifiers(lhs)) dependent.insert(id);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const Parsed& pl = parsed[i];
      if (!pl.statement || dependent.count(pl.name)) continue;
      if (i >= movable) {  // stays in the loop: so does every name it assigns
        dependent.insert(pl.name);
        changed = true;
        continue;
      }
      for (const auto& id : pl.operands)
        if (dependent.count(id)) {
          dependent.insert(pl.name);
          changed = true;
          break;
        }
    }
    // A local assigned again after a line that stays in the loop has read it (`nb = present ? nb
    // : 0` after a load through nb) would reach that line with its later value: it stays too.
    std::map<std::string, std::size_t> last_assignment;
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (parsed[i].statement && !dependent.count(parsed[i].name)) last_assignment[parsed[i].name] = i;
    for (std::size_t i = 0; i < lines.size() && !changed; ++i) {
      if (parsed[i].statement && !dependent.count(parsed[i].name)) continue;  // moves with the others
      for (const auto& id : parsed[i].names)
        if (auto it = last_assignment.find(id); it != last_assignment.end() && it->second > i) {
          dependent.insert(id);
          changed = true;
        }
    }
  }
  HoistedLoopBody out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    if (parsed[i].statement && !dependent.count(parsed[i].name)) {
      out.invariant += l.text + "\n";
      if (auto m = declared_mask(l.text); m && std::find(out.masks.begin(), out.masks.end(), *m) == out.masks.end())
        out.masks.push_back(*m);
    } else {
      out.body += l.text + "\n";
    }
  }
  // Products by a level-invariant factor that is +-1 at run time reassociate exactly: with
  // y = t * a and x = y * b, where a and b do not change along the loop and y has no other use,
  // (t * a) * b == t * (a * b) bit for bit when b is 1 or -1 (rounding to nearest is symmetric,
  // so both sides are +-round(t a), overflow and underflow included). An edge orientation times
  // a per-edge weight is this shape; the fast copy of the loop then has one product per term.
  std::map<std::string, std::size_t> definition;
  std::map<std::string, int> uses;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (parsed[i].statement && !parsed[i].type.empty()) definition.emplace(parsed[i].name, i);
    for (const auto& id : parsed[i].names) ++uses[id];
  }
  const auto hoisted_of_type = [&](const std::string& name, const std::string& type) {
    const auto it = definition.find(name);
    return it != definition.end() && parsed[it->second].type == type && !dependent.count(name);
  };
  std::map<std::size_t, std::string> rewritten;  // line -> its text in the fast copy
  std::map<std::pair<std::string, std::string>, std::string> folded;  // (a, b) -> the local a * b
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Parsed& x = parsed[i];
    if (!x.statement || (x.type != "double" && x.type != "float") || !dependent.count(x.name)) continue;
    const auto xp = product_of(x.value, x.type);
    if (!xp) continue;
    for (const auto& [y_name, b] : {*xp, std::pair{xp->second, xp->first}}) {
      const auto yd = definition.find(y_name);
      if (!hoisted_of_type(b, x.type) || yd == definition.end() || yd->second >= i || uses[y_name] != 2) continue;
      const Parsed& y = parsed[yd->second];
      const auto yp = y.type == x.type && dependent.count(y.name) ? product_of(y.value, y.type) : std::nullopt;
      if (!yp) continue;
      const bool a_first = hoisted_of_type(yp->first, x.type);
      const std::string& a = a_first ? yp->first : yp->second;
      const std::string& t = a_first ? yp->second : yp->first;
      if (!hoisted_of_type(a, x.type) || !dependent.count(t)) continue;
      auto [c, fresh] = folded.try_emplace({a, b}, fmt::format("unit{}_{}", folded.size(), x.name));
      if (fresh) out.fast_prelude.push_back(fmt::format("const {} {} = static_cast<{}>({} * {});", x.type, c->second, x.type, a, b));
      if (std::find(out.unit_factors.begin(), out.unit_factors.end(), b) == out.unit_factors.end()) out.unit_factors.push_back(b);
      const std::string& text = lines[i].text;
      rewritten[i] = fmt::format("{}const {} {} = static_cast<{}>({} * {});", text.substr(0, text.find_first_not_of(" \t")),
                                 x.type, x.name, x.type, a_first ? c->second : t, a_first ? t : c->second);
      break;
    }
  }
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (!parsed[i].statement || dependent.count(parsed[i].name)) {
      const auto it = rewritten.find(i);
      out.fast_body += (it != rewritten.end() ? it->second : lines[i].text) + "\n";
    }
  return out;
}

namespace {

// `loop_var`, `(loop_var + N)` or `(loop_var - N)` at the start of `c`: the offset N (signed) and
// where the rest begins.
std::optional<std::pair<std::int64_t, std::size_t>> loop_index_at_start(const std::string& c, const std::string& loop_var) {
  if (c.compare(0, loop_var.size(), loop_var) == 0 && c.size() > loop_var.size() && c[loop_var.size()] == ' ')
    return std::pair{std::int64_t{0}, loop_var.size()};
  const std::string open = "(" + loop_var + " ";
  if (c.compare(0, open.size(), open) != 0 || c.size() < open.size() + 4) return std::nullopt;
  const char sign = c[open.size()];
  if ((sign != '+' && sign != '-') || c[open.size() + 1] != ' ') return std::nullopt;
  std::size_t at = open.size() + 2, end = at;
  while (end < c.size() && std::isdigit(static_cast<unsigned char>(c[end]))) ++end;
  if (end == at || end - at > 18 || end >= c.size() || c[end] != ')') return std::nullopt;
  const std::int64_t n = std::stoll(c.substr(at, end - at));
  return std::pair{sign == '-' ? -n : n, end + 1};
}

// The bound of `loop_index OP bound`: one comparison, so the whole condition is that comparison
// (a bound holding `&&`, `?`, a comparison or a comma would make the condition another one).
std::optional<std::string> compared_bound(const std::string& c, std::size_t at) {
  static const char* ops[] = {" == ", " != ", " <= ", " >= ", " < ", " > "};
  for (const char* op : ops) {
    const std::size_t n = std::strlen(op);
    if (c.compare(at, n, op) != 0) continue;
    const std::string bound = c.substr(at + n);
    for (const char* bad : {"&&", "||", "?", "==", "!=", "<=", ">=", " < ", " > ", ",", ";"})
      if (bound.find(bad) != std::string::npos) return std::nullopt;
    int depth = 0;
    for (char ch : bound) {
      depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
      if (depth < 0) return std::nullopt;
    }
    if (depth != 0 || trimmed(bound).empty()) return std::nullopt;
    return bound;
  }
  return std::nullopt;
}

}  // namespace

UnswitchedLoopBody unswitch_invariant_branches(const std::string& body, const std::string& loop_var) {
  const std::vector<Line> lines = split_lines(body);
  const std::set<std::string> varying = varying_names(lines, loop_var);
  const auto invariant = [&](const std::string& text) {
    const std::vector<std::string> ids = identifiers(text);
    return text.find('[') == std::string::npos &&
           std::none_of(ids.begin(), ids.end(), [&](const std::string& id) { return varying.count(id) > 0; });
  };
  const auto add = [](std::vector<std::string>& list, const std::string& item) {
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
  };
  UnswitchedLoopBody out;
  for (const auto& [l, depth] : lines) {
    std::string text = l;
    const std::size_t i = skip_space(l, 0);
    if (depth == 0 && starts_with_at(l, i, "if (") && l.size() >= 3 && l.compare(l.size() - 3, 3, ") {") == 0) {
      const std::string condition = l.substr(i + 4, l.size() - 3 - (i + 4));
      if (invariant(condition)) {
        add(out.conditions, condition);
        text = l.substr(0, i) + "if (false) {";
      } else if (const auto index = loop_index_at_start(condition, loop_var)) {
        const auto bound = compared_bound(condition, index->second);
        if (bound && invariant(*bound)) {
          add(out.loop_conditions, condition);
          // loop_var + N crosses the bound where loop_var is bound - N (in unsigned arithmetic:
          // where it wraps, loop_var + N never meets the bound inside the loop, so the wrapped
          // value only adds a break nowhere near it).
          add(out.breaks, index->first == 0 ? trimmed(*bound)
                                            : fmt::format("std::int64_t(std::uint64_t({}) - std::uint64_t({}LL))",
                                                          trimmed(*bound), index->first));
          text = l.substr(0, i) + "if (false) {";
        }
      }
    }
    out.fast_body += text + "\n";
  }
  return out;
}

SharedColumnBody share_common_columns(const std::string& body, const std::string& loop_var) {
  const std::vector<Line> lines = split_lines(body);
  const std::set<std::string> varying = varying_names(lines, loop_var);
  SharedColumnBody out;
  out.fast_body = body;
  for (const Line& l : lines)
    if (has_jump_keyword(l.text)) return out;
  struct Load {
    std::size_t line;
    std::string type;
    std::vector<std::string> tokens;  // of `buffer[address]`
  };
  std::map<std::string, Load> loads;  // by the local it declares
  std::map<std::string, int> uses;
  std::vector<std::optional<Statement>> statements(lines.size());
  std::size_t first_store = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& t = lines[i].text;
    for (const auto& id : identifiers(t)) ++uses[id];
    if (lines[i].depth == 0) statements[i] = local_statement(t);
    // A store (or anything else writing through `[`, at any depth): no load moves above it.
    if (!statements[i] && t.find('=') != std::string::npos && t.find('[') < t.find('=')) first_store = std::min(first_store, i);
    if (!statements[i] || statements[i]->type.empty()) continue;
    const std::string value = trimmed(statements[i]->value);
    const std::size_t open = value.find('[');
    if (open == std::string::npos || open == 0 || value.back() != ']' || value.find('[', open + 1) != std::string::npos ||
        value.find(']') != value.size() - 1 || !identifier(value.substr(0, open)))
      continue;
    loads.emplace(statements[i]->name, Load{i, statements[i]->type, tokens(value)});
  }
  // The position at which the tokens of two loads differ, if they differ in exactly one name
  // inside the brackets and both names are loop-invariant.
  const auto differing_index = [&](const Load& a, const Load& b) -> std::optional<std::size_t> {
    if (a.type != b.type || a.tokens.size() != b.tokens.size()) return std::nullopt;
    std::optional<std::size_t> at;
    for (std::size_t k = 0; k < a.tokens.size(); ++k) {
      if (a.tokens[k] == b.tokens[k]) continue;
      if (at || k < 2 || !identifier(a.tokens[k]) || !identifier(b.tokens[k]) || varying.count(a.tokens[k]) ||
          varying.count(b.tokens[k]))
        return std::nullopt;
      at = k;
    }
    return at;
  };
  struct Pair {
    std::size_t sum_line;
    std::string sum, type, a, b;  // the sum's local and type, the loads' locals (as written)
    std::string index_a, index_b;
  };
  struct Group {
    std::vector<std::string> tokens;  // a load's, with the index to replace at `at`
    std::size_t at = 0;
    std::vector<Pair> pairs;
  };
  std::vector<Group> groups;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!statements[i] || statements[i]->type.empty()) continue;
    const Statement& st = *statements[i];
    const std::string open = "static_cast<" + st.type + ">(", value = trimmed(st.value);
    if (!starts_with_at(value, 0, open) || value.back() != ')') continue;
    const std::string inner = value.substr(open.size(), value.size() - 1 - open.size());
    const std::size_t plus = inner.find(" + ");
    if (plus == std::string::npos) continue;
    const std::string a = inner.substr(0, plus), b = inner.substr(plus + 3);
    const auto la = loads.find(a), lb = loads.find(b);
    if (a == b || la == loads.end() || lb == loads.end() || uses[a] != 2 || uses[b] != 2 || la->second.type != st.type) continue;
    const auto at = differing_index(la->second, lb->second);
    if (!at) continue;
    std::vector<std::string> key = la->second.tokens;
    key[*at].clear();
    Pair pair{i, st.name, st.type, a, b, la->second.tokens[*at], lb->second.tokens[*at]};
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      std::vector<std::string> k = x.tokens;
      k[x.at].clear();
      return x.at == *at && k == key;
    });
    if (g == groups.end()) groups.push_back(Group{la->second.tokens, *at, {std::move(pair)}});
    else g->pairs.push_back(std::move(pair));
  }
  std::map<std::size_t, std::string> rewritten;  // line -> its text in the fast copy ("" drops it)
  std::map<std::size_t, std::string> before;     // line -> a statement inserted before it
  int shared = 0;
  for (const Group& g : groups) {
    if (g.pairs.size() < 2) continue;
    std::size_t first_load = lines.size(), last_load = 0;
    for (const Pair& p : g.pairs)
      for (const auto* name : {&p.a, &p.b}) {
        first_load = std::min(first_load, loads.at(*name).line);
        last_load = std::max(last_load, loads.at(*name).line);
      }
    if (last_load > first_store || before.count(first_load)) continue;
    const std::string share = fmt::format("share{}", shared), column = fmt::format("share{}_column", shared);
    const Pair& p0 = g.pairs[0];
    const Pair& p1 = g.pairs[1];
    out.candidates.push_back(fmt::format("const std::int64_t {} = ({} == {} || {} == {}) ? {} : {};", share, p0.index_a, p1.index_a,
                                         p0.index_a, p1.index_b, p0.index_a, p0.index_b));
    // `local` declared as the group's load through `index`, indented like `line`.
    const auto load_of = [&](const std::string& local, const std::string& index, std::size_t line) {
      std::vector<std::string> t = g.tokens;
      t[g.at] = index;
      const std::string& text = lines[line].text;
      return fmt::format("{}const {} {} = {};", text.substr(0, text.find_first_not_of(" \t")), p0.type, local, joined(t));
    };
    std::vector<std::string> holds;
    before[first_load] = load_of(column, share, first_load);
    for (std::size_t m = 0; m < g.pairs.size(); ++m) {
      const Pair& p = g.pairs[m];
      const std::string other = fmt::format("{}_{}", share, m);
      holds.push_back(fmt::format("({} == {} || {} == {})", p.index_a, share, p.index_b, share));
      out.fast_prelude.push_back(fmt::format("const std::int64_t {} = {} == {} ? {} : {};", other, p.index_a, share, p.index_b, p.index_a));
      rewritten[loads.at(p.a).line] = load_of(p.a, other, loads.at(p.a).line);
      rewritten[loads.at(p.b).line] = "";
      const std::string& text = lines[p.sum_line].text;
      rewritten[p.sum_line] = fmt::format("{}const {} {} = static_cast<{}>({} + {});", text.substr(0, text.find_first_not_of(" \t")),
                                          p.type, p.sum, p.type, column, p.a);
    }
    for (const auto& h : holds) out.condition += (out.condition.empty() ? "" : " && ") + h;
    ++shared;
  }
  if (shared == 0) return out;
  out.fast_body.clear();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (const auto it = before.find(i); it != before.end()) out.fast_body += it->second + "\n";
    const auto it = rewritten.find(i);
    if (it == rewritten.end()) out.fast_body += lines[i].text + "\n";
    else if (!it->second.empty()) out.fast_body += it->second + "\n";
  }
  return out;
}

}  // namespace fieldflow::codegen
