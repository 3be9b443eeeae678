#include "codegen/cpu/loop_invariants.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace fieldflow::codegen {

namespace {

struct Line {
  std::string text;
  int depth = 0;  // brace depth at the start of the line, relative to the body
};

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

}  // namespace

HoistedLoopBody hoist_loop_invariants(const std::string& body, const std::string& loop_var) {
  // One declaration or assignment of a local per line, as the point emitter writes them.
  static const std::regex declaration(
      R"(^\s*(?:const\s+)?(?:double|float|bool|std::int32_t|std::int64_t)\s+(\w+)\s*=\s*(.*?);\s*(?://.*)?$)");
  static const std::regex assignment(R"(^\s*(\w+)\s*=\s*(.*?);\s*(?://.*)?$)");
  static const std::regex assigned_in_block(R"(([A-Za-z_]\w*)\s*(?:\|=|=(?!=)))");
  std::vector<Line> lines;
  {
    std::istringstream in(body);
    int depth = 0;
    for (std::string t; std::getline(in, t);) {
      lines.push_back({t, depth});
      depth += static_cast<int>(std::count(t.begin(), t.end(), '{')) - static_cast<int>(std::count(t.begin(), t.end(), '}'));
    }
  }
  std::set<std::string> dependent{loop_var};
  // Whatever a branch or a nested loop assigns depends on it.
  for (const Line& l : lines)
    if (l.depth > 0)
      for (auto it = std::sregex_iterator(l.text.begin(), l.text.end(), assigned_in_block); it != std::sregex_iterator(); ++it)
        dependent.insert((*it)[1].str());
  // Nothing after a jump (a `continue` that skips the rest of an iteration, anywhere in the
  // body, or a one-line `if`) moves: a statement behind it need not be valid where the jump is
  // taken (a load through a missing neighbour's index).
  static const std::regex jump(R"(\b(continue|break|return|goto)\b|^\s*if\s*\()");
  std::size_t movable = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& t = lines[i].text;
    if (std::regex_search(t, jump) && (t.find('{') == std::string::npos || t.find("continue") != std::string::npos ||
                                       t.find("break") != std::string::npos || t.find("return") != std::string::npos)) {
      movable = i;
      break;
    }
  }
  // Each line is parsed once (std::regex is slow, and this runs on every warm compile too).
  struct Parsed {
    bool statement = false;
    std::string name;                    // the local it declares or assigns
    std::vector<std::string> operands;   // names on its right-hand side
    std::vector<std::string> names;      // every name on the line
  };
  std::vector<Parsed> parsed(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    std::smatch m;
    parsed[i].names = identifiers(l.text);
    if (l.depth == 0 && l.text.find('{') == std::string::npos && l.text.find('}') == std::string::npos &&
        (std::regex_match(l.text, m, declaration) || std::regex_match(l.text, m, assignment))) {
      parsed[i].statement = true;
      parsed[i].name = m[1].str();
      parsed[i].operands = identifiers(m[2].str());
    }
  }
  // An unrecognised top-level line (a declaration without a value, say) makes every name it may
  // define dependent: the names before its first `=`, none for a store into a buffer (`b[..] = v`).
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    if (l.depth != 0 || parsed[i].statement) continue;
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
  static const std::regex mask(R"(^\s*bool\s+(ok\d+)\s*=)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    if (parsed[i].statement && !dependent.count(parsed[i].name)) {
      out.invariant += l.text + "\n";
      std::smatch k;
      if (std::regex_search(l.text, k, mask) &&
          std::find(out.masks.begin(), out.masks.end(), k[1].str()) == out.masks.end())
        out.masks.push_back(k[1].str());
    } else {
      out.body += l.text + "\n";
    }
  }
  return out;
}

}  // namespace fieldflow::codegen
